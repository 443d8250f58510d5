package adapter

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/tablefilter"
	"github.com/searchfabric/sfemu/verify"
)

// startFiltered starts an adapter over the tables rules selects now, with
// the filter live.
func startFiltered(t *testing.T, r *shopRig, rules string, log *bytes.Buffer, logMu *sync.Mutex) *Adapter {
	t.Helper()
	f := tablefilter.MustParse(rules)
	refs, _, err := ResolveFilter(r.ctx, r.up, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Start(r.ctx, r.up, r.emu, Config{DataDir: r.dir, Tables: refs, Filter: f, Log: lockedWriter{logMu, log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func collectionExists(t *testing.T, r *shopRig, name string) bool {
	t.Helper()
	list, err := r.emu.ListCollections(r.ctx, &apiv1.ListCollectionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list.GetCollections() {
		if st.GetDefinition().GetName() == name && st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED {
			return true
		}
	}
	return false
}

// TestLT1_CreatedTableMirroredFromFirstRow: a table created after the
// start that matches the filter is mirrored from its first row (committed
// right after the CREATE), through a later ADD COLUMN, while an excluded
// one gets no collection; the adapter never restarts.
func TestLT1_CreatedTableMirroredFromFirstRow(t *testing.T)      { testCreatedTable(t, false) }
func TestLT1_Wire_CreatedTableMirroredFromFirstRow(t *testing.T) { testCreatedTable(t, true) }

func testCreatedTable(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	var log bytes.Buffer
	var logMu sync.Mutex
	a := startFiltered(t, r, "shop.*,!shop.audit", &log, &logMu)
	rt := a.RT

	r.exec("INSERT INTO shop.orders VALUES (1, 1.5, 'before', NULL)")
	r.exec("CREATE TABLE shop.fresh (id BIGINT PRIMARY KEY, v VARCHAR(20))")
	r.exec("INSERT INTO shop.fresh VALUES (1, 'first')") // the first row, right after the CREATE
	r.exec("CREATE TABLE shop.audit (id BIGINT PRIMARY KEY)")
	r.exec("INSERT INTO shop.audit VALUES (1)")
	for i := 2; i <= 20; i++ {
		r.exec(fmt.Sprintf("INSERT INTO shop.fresh (id, v) VALUES (%d, 'v%d')", i, i))
		if i == 10 {
			r.exec("ALTER TABLE shop.fresh ADD COLUMN n INT DEFAULT 7")
			r.exec("UPDATE shop.fresh SET v = 'changed' WHERE id = 1")
		}
	}
	r.exec("DELETE FROM shop.fresh WHERE id = 3")
	r.exec("CREATE TABLE shop.order_parts (id BIGINT PRIMARY KEY, n INT) PARTITION BY HASH (id) PARTITIONS 2")
	for i := 1; i <= 6; i++ {
		r.exec(fmt.Sprintf("INSERT INTO shop.order_parts VALUES (%d, %d)", i, i*i))
	}
	final := r.exec("INSERT INTO shop.orders VALUES (2, 2.5, 'after', NULL)")

	tables := []TableRef{{DB: "shop", Table: "products"}, {DB: "shop", Table: "orders"}, {DB: "shop", Table: "fresh"}, {DB: "shop", Table: "order_parts"}}
	if err := verify.WaitSafe(r.ctx, r.emu, tables, final, 30*time.Second); err != nil {
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%v (runtime: %v; log:\n%s)", err, rt.Err(), log.String())
	}
	expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
	if collectionExists(t, r, "shop.audit") {
		t.Error("shop.audit is excluded by the filter but got a collection")
	}
	if a.RT != rt || rt.Err() != nil {
		t.Fatalf("the runtime changed or stopped: %v", rt.Err())
	}
	select {
	case <-rt.Done():
		t.Fatal("the runtime stopped for a table-set change")
	default:
	}
	if got := fmt.Sprint(a.MirroredTables()); !strings.Contains(got, "shop.fresh") || !strings.Contains(got, "shop.order_parts") || strings.Contains(got, "audit") {
		t.Errorf("mirrored tables %s", got)
	}
	// A rename inside the filter keeps feeding the table's collection
	// (N3); MirroredTables (what /admin/check checks) names the table as
	// it is now with that collection.
	r.exec("RENAME TABLE shop.fresh TO shop.fresh2")
	final = r.exec("INSERT INTO shop.fresh2 (id, v) VALUES (100, 'renamed')")
	if err := verify.WaitSafe(r.ctx, r.emu, []TableRef{{DB: "shop", Table: "fresh2", Collection: "shop.fresh"}}, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime: %v)", err, rt.Err())
	}
	now := a.MirroredTables()
	found := false
	for _, ref := range now {
		found = found || ref == TableRef{DB: "shop", Table: "fresh2", Collection: "shop.fresh"}
	}
	if !found {
		t.Fatalf("mirrored tables after the rename: %+v", now)
	}
	expectConsistent(t, r.ctx, r.up, r.emu, now, final)
}

// TestLT3_RenameOutOfFilter: a table renamed out of the filter is no
// longer followed; its collection stays as it was at the rename; the
// other tables keep flowing. Renamed back in under a new name it is not
// followed again (its kept collection maps its partitions), with a log
// line saying how to mirror it again.
func TestLT3_RenameOutOfFilter(t *testing.T)      { testRenameOut(t, false) }
func TestLT3_Wire_RenameOutOfFilter(t *testing.T) { testRenameOut(t, true) }

func testRenameOut(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	var log bytes.Buffer
	var logMu sync.Mutex
	r.exec("CREATE DATABASE archive")
	a := startFiltered(t, r, "shop.*", &log, &logMu)
	rt := a.RT
	for i := 1; i <= 5; i++ {
		r.exec("INSERT INTO shop.products VALUES " + typedRow(r.rng, i))
	}
	renamed := r.exec("RENAME TABLE shop.products TO archive.products")
	for i := 6; i <= 9; i++ {
		r.exec("INSERT INTO archive.products VALUES " + typedRow(r.rng, i))
	}
	r.exec("UPDATE archive.products SET title = 'after the rename' WHERE id = 1")
	back := r.exec("RENAME TABLE archive.products TO shop.products_v2")
	r.exec("INSERT INTO shop.products_v2 VALUES " + typedRow(r.rng, 10))
	// LT4: a new table under the old name finds the kept collection: not
	// followed, the kept collection untouched.
	r.exec("CREATE TABLE shop.products (id BIGINT PRIMARY KEY, title VARCHAR(10))")
	r.exec("INSERT INTO shop.products VALUES (1, 'new')")
	final := r.exec("INSERT INTO shop.orders VALUES (5, 1.0, 'x', NULL)")

	live := []TableRef{{DB: "shop", Table: "orders"}}
	if err := verify.WaitSafe(r.ctx, r.emu, live, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime: %v)", err, rt.Err())
	}
	expectConsistent(t, r.ctx, r.up, r.emu, live, final)
	// The kept collection equals the table just before the rename (rule
	// LT3; LT4: the new shop.products did not touch it).
	expectConsistent(t, r.ctx, r.up, r.emu, []TableRef{{DB: "shop", Table: "products"}}, renamed-1)
	if !collectionExists(t, r, "shop.products") {
		t.Fatal("the collection of the renamed table was dropped, want it kept")
	}
	if collectionExists(t, r, "shop.products_v2") {
		t.Error("shop.products_v2 got a collection; its partitions belong to the kept shop.products")
	}
	_ = back
	logMu.Lock()
	if !strings.Contains(log.String(), "outside --tables") || !strings.Contains(log.String(), `collection "shop.products" kept from before`) ||
		!strings.Contains(log.String(), `collection "shop.products" already exists`) {
		t.Errorf("log lines for the rename out and back missing:\n%s", log.String())
	}
	logMu.Unlock()
	if got := fmt.Sprint(a.MirroredTables()); got != "[shop.orders]" {
		t.Errorf("mirrored tables %s, want [shop.orders]", got)
	}
	if rt.Err() != nil || a.RT != rt {
		t.Fatalf("runtime: %v", rt.Err())
	}
}

// TestTF8_RerunResolvesAtResumePoint: a table created (and written) while
// the adapter was stopped is picked up by the rerun from its creation,
// every row included: the filter is resolved at the resume point and the
// CREATE TABLE replayed (LT1).
func TestTF8_RerunResolvesAtResumePoint(t *testing.T)      { testRerunFilter(t, false) }
func TestTF8_Wire_RerunResolvesAtResumePoint(t *testing.T) { testRerunFilter(t, true) }

func testRerunFilter(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	var log bytes.Buffer
	var logMu sync.Mutex
	a := startFiltered(t, r, "shop.*", &log, &logMu)
	last := r.exec("INSERT INTO shop.orders VALUES (1, 1.0, 'a', NULL)")
	if err := verify.WaitSafe(r.ctx, r.emu, []TableRef{{DB: "shop", Table: "orders"}}, last, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// While stopped: a new table with rows.
	r.exec("CREATE TABLE shop.offline (id BIGINT PRIMARY KEY, v INT)")
	for i := 1; i <= 5; i++ {
		r.exec(fmt.Sprintf("INSERT INTO shop.offline VALUES (%d, %d)", i, i))
	}
	b := startFiltered(t, r, "shop.*", &log, &logMu) // resolves now, then at the resume point
	final := r.exec("INSERT INTO shop.offline VALUES (6, 6)")
	tables := []TableRef{{DB: "shop", Table: "orders"}, {DB: "shop", Table: "offline"}, {DB: "shop", Table: "products"}}
	if err := verify.WaitSafe(r.ctx, r.emu, tables, final, 30*time.Second); err != nil {
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%v (runtime %v; log:\n%s)", err, b.RT.Err(), log.String())
	}
	expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
	if n := countDocs(t, r.emu, "shop.offline"); n != 6 {
		t.Fatalf("shop.offline has %d documents, want all 6", n)
	}
}
