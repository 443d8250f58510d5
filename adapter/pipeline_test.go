package adapter

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/verify"
)

func seedFor(t *testing.T) int64 {
	seed := int64(7)
	if s := os.Getenv("PIPELINE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad PIPELINE_SEED %q", s)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with PIPELINE_SEED=%d)", seed, seed)
		}
	})
	return seed
}

var e2eTables = []TableRef{{DB: "shop", Table: "products"}, {DB: "shop", Table: "events"}}

func setupShop(t *testing.T, ctx context.Context, ss *sqlfront.Session) {
	t.Helper()
	for _, q := range []string{
		"CREATE DATABASE shop",
		"CREATE TABLE shop.products (id BIGINT PRIMARY KEY, title VARCHAR(100) NOT NULL, price INT, stock INT)",
		"CREATE TABLE shop.events (id BIGINT PRIMARY KEY, product_id BIGINT, kind VARCHAR(16)) PARTITION BY HASH (id) PARTITIONS 4",
	} {
		if _, err := ss.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// workload runs a seeded mix of single-statement and multi-statement
// transactions, with DDLs in the middle.
type workload struct {
	rng    *rand.Rand
	ss     *sqlfront.Session
	live   []int64
	nextID int64
	nextEv int64
	hasTag bool
	events string // the events table's current name
}

func (w *workload) exec(t *testing.T, ctx context.Context, q string) {
	t.Helper()
	if _, err := w.ss.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (w *workload) eventsTable() string {
	if w.events == "" {
		return "events"
	}
	return w.events
}

func (w *workload) insert() string {
	w.nextID++
	w.live = append(w.live, w.nextID)
	if w.hasTag {
		return fmt.Sprintf("INSERT INTO shop.products (id, title, price, stock, tag) VALUES (%d, 'item %d', %d, %d, 't%d')",
			w.nextID, w.nextID, w.rng.Intn(1000), w.rng.Intn(50), w.rng.Intn(5))
	}
	return fmt.Sprintf("INSERT INTO shop.products VALUES (%d, 'item %d', %d, %d)", w.nextID, w.nextID, w.rng.Intn(1000), w.rng.Intn(50))
}

func (w *workload) step(t *testing.T, ctx context.Context) {
	switch p := w.rng.Intn(100); {
	case p < 35 || len(w.live) < 5:
		w.exec(t, ctx, w.insert())
	case p < 60:
		id := w.live[w.rng.Intn(len(w.live))]
		w.exec(t, ctx, fmt.Sprintf("UPDATE shop.products SET price = %d, stock = stock + 1 WHERE id = %d", w.rng.Intn(1000), id))
	case p < 70:
		i := w.rng.Intn(len(w.live))
		id := w.live[i]
		w.live = append(w.live[:i], w.live[i+1:]...)
		w.exec(t, ctx, fmt.Sprintf("DELETE FROM shop.products WHERE id = %d", id))
	case p < 85:
		// A multi-row transaction touching both tables (and several
		// partitions, hence several regions' worth of keys).
		w.exec(t, ctx, "BEGIN")
		w.exec(t, ctx, w.insert())
		for i := 0; i < 3; i++ {
			w.nextEv++
			w.exec(t, ctx, fmt.Sprintf("INSERT INTO shop.%s VALUES (%d, %d, 'view')", w.eventsTable(), w.nextEv, w.nextID))
		}
		id := w.live[w.rng.Intn(len(w.live))]
		w.exec(t, ctx, fmt.Sprintf("UPDATE shop.products SET title = 'renamed %d' WHERE id = %d", id, id))
		w.exec(t, ctx, "COMMIT")
	default:
		if w.nextEv > 0 {
			id := 1 + w.rng.Int63n(w.nextEv)
			w.exec(t, ctx, fmt.Sprintf("UPDATE shop.%s SET kind = 'cart' WHERE id = %d", w.eventsTable(), id))
		}
	}
}

// TestE2E_CollectionsEqualUpstreamSnapshot runs the whole pipeline
// (fakeupstream -> minicdc -> normalize -> emulator) through a seeded
// workload with DDL mid-stream (add column, rename table, drop column) and multi-table
// transactions over a partitioned table split into many regions (rows of
// one transaction arrive from several regions, interleaved), then checks
// every collection against the upstream read by snapshot at a final ts.
//
// Rules M45 (the schema store gets its own source), M46 (the one data path),
// M47 (every partition its own path), M49 (the exact consistency check).
func TestE2E_CollectionsEqualUpstreamSnapshot(t *testing.T) {
	testE2ECollections(t, false)
}

// TestE2E_Wire_CollectionsEqualUpstreamSnapshot is the same run over the
// embedded gRPC servers: PD client, client-go snapshots and the EventFeed
// log puller (SR1).
func TestE2E_Wire_CollectionsEqualUpstreamSnapshot(t *testing.T) {
	testE2ECollections(t, true)
}

func testE2ECollections(t *testing.T, wire bool) {
	seed := seedFor(t)
	ctx := context.Background()
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: wire})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	// Several regions per table, so one transaction's rows come from
	// several regions, interleaved out of commit order by the feed.
	splitTables(t, up)
	w := &workload{rng: rand.New(rand.NewSource(seed)), ss: ss}
	for i := 0; i < 400; i++ {
		switch i {
		case 150:
			w.exec(t, ctx, "ALTER TABLE shop.products ADD COLUMN tag VARCHAR(16) DEFAULT 'none'")
			w.hasTag = true
		case 250:
			w.exec(t, ctx, "RENAME TABLE shop.events TO shop.events_v2")
			w.events = "events_v2"
		case 300:
			w.exec(t, ctx, "ALTER TABLE shop.products DROP COLUMN stock")
		}
		if i >= 300 {
			// stock is gone: keep to statements without it.
			w.exec(t, ctx, w.insertNoStock())
			if i%3 == 0 {
				w.nextEv++
				w.exec(t, ctx, fmt.Sprintf("INSERT INTO shop.events_v2 VALUES (%d, %d, 'late')", w.nextEv, w.nextID))
			}
			continue
		}
		w.step(t, ctx)
	}
	final, err := up.Cluster.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The renamed table keeps feeding the collection it had.
	renamed := []TableRef{e2eTables[0], {DB: "shop", Table: "events_v2", Collection: e2eTables[1].CollectionName()}}
	if err := verify.WaitSafe(ctx, emu, renamed, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime: %v)", err, a.RT.Err())
	}
	expectConsistent(t, ctx, up, emu, renamed, final)
	st := a.RT.Stats()
	if st.RowsDelivered == 0 || st.DDLsDelivered < 2 {
		t.Fatalf("pipeline did not run: %+v", st)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// The check must see divergence: with replication stopped, change the
	// upstream and compare at the new ts.
	id := w.live[0]
	w.exec(t, ctx, fmt.Sprintf("UPDATE shop.products SET price = 123456 WHERE id = %d", id))
	w.exec(t, ctx, w.insertNoStock())
	after, err := up.Cluster.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := verify.CheckConsistency(ctx, up.Snapshot(), emu, renamed, after)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("shop.products (collection shop.products) pk=%d: field \"price\": expected int 123456, actual int ", id),
		fmt.Sprintf("shop.products (collection shop.products) pk=%d: row missing from the collection", w.nextID),
	}
	if len(diffs) != 2 {
		t.Fatalf("want 2 diffs, got %v", diffs)
	}
	for _, w := range want {
		if !strings.HasPrefix(diffs[0].String(), w) && !strings.HasPrefix(diffs[1].String(), w) {
			t.Fatalf("divergence %q not reported: %v", w, diffs)
		}
	}
}

func (w *workload) insertNoStock() string {
	w.nextID++
	w.live = append(w.live, w.nextID)
	return fmt.Sprintf("INSERT INTO shop.products (id, title, price, tag) VALUES (%d, 'item %d', %d, 't%d')",
		w.nextID, w.nextID, w.rng.Intn(1000), w.rng.Intn(5))
}

// TestE2E_RestartResumesWithNewEpoch stops the adapter mid-workload, keeps
// writing upstream, and starts a new adapter on the same emulator and
// schema store: it resumes from the emulator's stored progress with epoch
// 2, re-delivered rows change nothing, and the collections end equal to
// the upstream.
func TestE2E_RestartResumesWithNewEpoch(t *testing.T) {
	testE2ERestart(t, false)
}

// TestE2E_Wire_RestartResumesWithNewEpoch is the same over the embedded
// gRPC servers (SR1).
func TestE2E_Wire_RestartResumesWithNewEpoch(t *testing.T) {
	testE2ERestart(t, true)
}

func testE2ERestart(t *testing.T, wire bool) {
	seed := seedFor(t)
	ctx := context.Background()
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: wire})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	cfg := Config{DataDir: dir, Tables: e2eTables}
	a, err := Start(ctx, up, emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Resume.Epoch != 1 {
		t.Fatalf("first run epoch %d, want 1", a.Resume.Epoch)
	}
	w := &workload{rng: rand.New(rand.NewSource(seed)), ss: ss}
	for i := 0; i < 100; i++ {
		w.step(t, ctx)
	}
	mid, _ := up.Cluster.CurrentTs(ctx)
	if err := verify.WaitSafe(ctx, emu, e2eTables, mid, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ { // some of these may or may not reach the emulator
		w.step(t, ctx)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ { // written while no adapter runs
		w.step(t, ctx)
	}
	b, err := Start(ctx, up, emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Resume.Epoch != 2 || b.Resume.StartTs < mid {
		t.Fatalf("restart resume %+v, want epoch 2 and start ts >= %d", b.Resume, mid)
	}
	for i := 0; i < 100; i++ {
		w.step(t, ctx)
	}
	final, _ := up.Cluster.CurrentTs(ctx)
	if err := verify.WaitSafe(ctx, emu, e2eTables, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime: %v)", err, b.RT.Err())
	}
	expectConsistent(t, ctx, up, emu, e2eTables, final)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// splitTables splits every physical table of the shop schema into regions
// at a few handles.
func splitTables(t *testing.T, up *Upstream) {
	t.Helper()
	for _, ref := range e2eTables {
		ti, _, err := up.SQL.TableInfo(ref.DB, ref.Table)
		if err != nil {
			t.Fatal(err)
		}
		for _, phys := range ti.PhysicalIDs() {
			for _, h := range []int64{20, 60, 120} {
				if _, _, err := up.Cluster.SplitRaw(tablecodec.EncodeIntRecordKey(nil, phys, h)); err != nil {
					t.Fatalf("split %s at %d: %v", ref, h, err)
				}
			}
		}
	}
	if n := len(up.Cluster.Regions()); n < 10 {
		t.Fatalf("only %d regions after splits", n)
	}
}

// TestE2E_SameTsDMLAndDDL commits a row of shop.products at exactly the
// FinishedTs T of a DROP COLUMN on that table (a transaction whose lock
// was written before the DDL, as an async-commit or 1PC transaction can).
// The row was written with the old layout: it must be decoded with the
// schema at T-1 and reach the emulator before the DDL at T is applied
// (specs/minicdc.md M22, M30); afterwards the collections must equal the
// upstream.
func TestE2E_SameTsDMLAndDDL(t *testing.T) {
	seed := seedFor(t)
	ctx := context.Background()
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ss := up.SQL.NewSession("")
	setupShop(t, ctx, ss)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	tap := &orderTap{key: string(tablecodec.EncodeIntRecordKey(nil, 0, 0))}
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, Tap: tap})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	w := &workload{rng: rand.New(rand.NewSource(seed)), ss: ss}
	for i := 0; i < 50; i++ {
		w.step(t, ctx)
	}

	// The row: written (and locked) with the pre-DDL layout.
	ti, _, err := up.SQL.TableInfo("shop", "products")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, c := range ti.Columns {
		ids[c.Name.L] = c.ID
	}
	val, err := rowcodec.EncodeV2(nil, []int64{ids["title"], ids["price"], ids["stock"]},
		[]value.Datum{value.NewStringDatum("same ts row"), value.NewIntDatum(42), value.NewIntDatum(7)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := up.Cluster.Begin()
	key := tablecodec.EncodeIntRecordKey(nil, ti.ID, 777777)
	tap.setKey(string(key))
	txn.Set(key, val)
	txn.SetPrimary(key)
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	res, err := ss.Exec(ctx, "ALTER TABLE shop.products DROP COLUMN stock")
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.CommitAt(res.CommitTs); err != nil {
		t.Fatalf("commit at the DDL's ts %d: %v", res.CommitTs, err)
	}
	for i := 0; i < 20; i++ {
		w.nextID++
		w.exec(t, ctx, fmt.Sprintf("INSERT INTO shop.products (id, title, price) VALUES (%d, 'after %d', %d)", w.nextID, w.nextID, i))
	}
	final, _ := up.Cluster.CurrentTs(ctx)
	if err := verify.WaitSafe(ctx, emu, e2eTables, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime: %v)", err, a.RT.Err())
	}
	expectConsistent(t, ctx, up, emu, e2eTables, final)
	doc, err := emu.GetDocument(ctx, &apiv1.GetDocumentRequest{Collection: e2eTables[0].CollectionName(), PrimaryKey: "777777"})
	if err != nil || !doc.GetFound() {
		t.Fatalf("same-ts row not in the collection: %v %v", doc, err)
	}
	if got := doc.GetDocument().GetCommitTs(); got != res.CommitTs {
		t.Fatalf("document commit ts %d, want the DDL's ts %d", got, res.CommitTs)
	}
	// What the adapter handed out: the row at T before the DDL at T, decoded
	// with the schema at T-1 (which still has stock).
	tap.mu.Lock()
	log := append([]string(nil), tap.log...)
	tap.mu.Unlock()
	want := []string{fmt.Sprintf("row %d with stock=true", res.CommitTs), fmt.Sprintf("ddl %d", res.CommitTs)}
	if len(log) != 2 || log[0] != want[0] || log[1] != want[1] {
		t.Fatalf("same-ts order/schema: got %q, want %q", log, want)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// orderTap records the callbacks for one row key and every DDL.
type orderTap struct {
	mu  sync.Mutex
	key string
	log []string
}

func (o *orderTap) setKey(k string) {
	o.mu.Lock()
	o.key = k
	o.mu.Unlock()
}

func (o *orderTap) OnRowChanged(_ context.Context, ev minicdc.RowChanged) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if string(ev.RowKey) == o.key {
		hasStock := false
		for _, c := range ev.TableInfo.Columns {
			hasStock = hasStock || c.Name.L == "stock"
		}
		o.log = append(o.log, fmt.Sprintf("row %d with stock=%v", ev.CommitTs, hasStock))
	}
	return nil
}

func (o *orderTap) OnDDL(_ context.Context, ev minicdc.DDL) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if strings.Contains(ev.Query, "DROP COLUMN stock") {
		o.log = append(o.log, fmt.Sprintf("ddl %d", ev.FinishedTs))
	}
	return nil
}

func (o *orderTap) OnCheckpoint(context.Context, minicdc.Checkpoint) error { return nil }
