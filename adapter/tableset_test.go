package adapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/verify"
)

// recordingSink wraps the bridge's sink and checks, as calls happen, that
// batches of each (partition, epoch) have no seq gaps and that stored
// progress never regresses.
type recordingSink struct {
	normalize.Sink
	mu       sync.Mutex
	lastSeq  map[string]uint64 // "partition/epoch" -> last acknowledged seq
	progress map[string]uint64 // partition -> last acknowledged resolved ts
	rows     map[string]int    // partition -> acknowledged mutations
	problems []string
}

func newRecordingSink() *recordingSink {
	return &recordingSink{lastSeq: map[string]uint64{}, progress: map[string]uint64{}, rows: map[string]int{}}
}

func (r *recordingSink) wrap(s normalize.Sink) normalize.Sink {
	r.mu.Lock()
	r.Sink = s
	r.mu.Unlock()
	return r
}

func (r *recordingSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	resp, err := r.Sink.Ingest(ctx, b)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := fmt.Sprintf("%s/%d", b.GetSourcePartition(), b.GetSourceEpoch())
	if want := r.lastSeq[k] + 1; b.GetFirstSeq() != want {
		r.problems = append(r.problems, fmt.Sprintf("%s: batch first_seq %d, want %d (gap or overlap)", k, b.GetFirstSeq(), want))
	}
	r.lastSeq[k] = b.GetFirstSeq() + uint64(len(b.GetMutations())) - 1
	r.rows[b.GetSourcePartition()] += len(b.GetMutations())
	return resp, nil
}

func (r *recordingSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	resp, err := r.Sink.AdvancePartition(ctx, p)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := r.progress[p.GetSourcePartition()]; p.GetResolvedTs() < prev {
		r.problems = append(r.problems, fmt.Sprintf("%s: progress regressed from %d to %d", p.GetSourcePartition(), prev, p.GetResolvedTs()))
	}
	r.progress[p.GetSourcePartition()] = p.GetResolvedTs()
	return resp, nil
}

func (r *recordingSink) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Error(p)
	}
}

// typesTable has a column of every type the demo and the tests use.
const typesTable = "CREATE TABLE shop.products (id BIGINT PRIMARY KEY, title VARCHAR(100) NOT NULL, " +
	"price DECIMAL(10,2), ratio DOUBLE, score FLOAT, created DATETIME(3), seen TIMESTAMP(6), born DATE, took TIME(2), " +
	"attrs JSON, embedding VECTOR(3), color ENUM('red','green','blue'), tags SET('a','b','c'), flags BIT(8), note TEXT)"

const ordersTable = "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, amount DECIMAL(12,3), note VARCHAR(64), placed DATETIME) " +
	"PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (1000), PARTITION p1 VALUES LESS THAN (2000))"

var tablesetTables = []TableRef{{DB: "shop", Table: "products"}, {DB: "shop", Table: "orders"}}

// typedRow renders a products row with seeded values of every type.
func typedRow(rng *rand.Rand, id int) string {
	colors := []string{"red", "green", "blue"}
	tags := []string{"", "a", "b,c", "a,b,c"}
	null := func(s string) string {
		if rng.Intn(8) == 0 {
			return "NULL"
		}
		return s
	}
	return fmt.Sprintf("(%d, 'p%d', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", id, id,
		null(fmt.Sprintf("%d.%02d", rng.Intn(10000), rng.Intn(100))),
		null(fmt.Sprintf("%g", rng.NormFloat64()*1e3)),
		null(fmt.Sprintf("%.3f", rng.Float64()*10)),
		null(fmt.Sprintf("'2026-%02d-%02d %02d:%02d:%02d.%03d'", 1+rng.Intn(12), 1+rng.Intn(28), rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(1000))),
		null(fmt.Sprintf("'2025-06-%02d 10:11:12.%06d'", 1+rng.Intn(28), rng.Intn(1000000))),
		null(fmt.Sprintf("'19%02d-0%d-1%d'", 50+rng.Intn(50), 1+rng.Intn(9), rng.Intn(10))),
		null(fmt.Sprintf("'%02d:%02d:%02d.%02d'", rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(100))),
		null(fmt.Sprintf(`'{"n": %d, "s": "x%d", "l": [1, 2.5, true, null]}'`, rng.Intn(100), rng.Intn(10))),
		null(fmt.Sprintf("'[%.2f,%.2f,%.2f]'", rng.Float64()+0.1, rng.Float64()-2, rng.Float64())),
		null("'"+colors[1+rng.Intn(2)]+"'"), // never red: the divergence check sets red
		null("'"+tags[rng.Intn(len(tags))]+"'"),
		null(fmt.Sprintf("%d", rng.Intn(255))), // never 255: the divergence check sets it
		null(fmt.Sprintf("'note %d é'", rng.Intn(1000))),
	)
}

// TestE2E_TableSetChangesFollowed runs TRUNCATE TABLE mid-stream on a
// table with every column type, and ADD / TRUNCATE / DROP PARTITION on a
// RANGE partitioned table and finally TRUNCATE TABLE of it, with inserts
// before and after each, through
// the supervised pipeline (fakeupstream SQL -> minicdc -> normalize ->
// emulator). Each DDL changes the physical tables (normalization N34); the
// adapter follows it in place (LT2, minicdc M50-M54): the new ids are
// subscribed from the DDL's ts, the old ones unsubscribed, with no restart
// and no new epoch. No row is lost: the final check is exact for every
// column; batches have no seq gaps within each (partition, epoch); stored
// progress never regresses, nor do the checkpoints.
//
// Divergence D10 (the host changes the runtime's set) and M49 (every
// column type compared exactly, divergence reported per type).
// rule LT2: followed in place, no restart.
func TestE2E_TableSetChangesFollowed(t *testing.T) {
	testTableSetChanges(t, false)
}

// TestE2E_Wire_TableSetChangesFollowed is the same over the embedded gRPC
// servers: new physical tables are subscribed over the wire and nothing is
// resolved through the SQL front (SR1, SR2).
func TestE2E_Wire_TableSetChangesFollowed(t *testing.T) {
	testTableSetChanges(t, true)
}

func testTableSetChanges(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	ctx, up, emu, dir, rng, exec := r.ctx, r.up, r.emu, r.dir, r.rng, r.exec
	rec := newRecordingSink()
	var log bytes.Buffer
	var logMu sync.Mutex
	tap := newHoldTap()
	sup, err := StartSupervisor(ctx, up, emu, Config{DataDir: dir, Tables: tablesetTables, WrapSink: rec.wrap, Tap: tap}, lockedWriter{&logMu, &log})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()

	nextProduct := 1
	products := func(n int) {
		for i := 0; i < n; i++ {
			switch {
			case nextProduct > 3 && rng.Intn(5) == 0:
				exec(fmt.Sprintf("UPDATE shop.products SET price = %d.5, color = 'blue', attrs = '{\"u\": %d}' WHERE id = %d",
					rng.Intn(100), i, 1+rng.Intn(nextProduct-1)))
			case nextProduct > 3 && rng.Intn(8) == 0:
				exec(fmt.Sprintf("DELETE FROM shop.products WHERE id = %d", 1+rng.Intn(nextProduct-1)))
			default:
				exec("INSERT INTO shop.products VALUES " + typedRow(rng, nextProduct))
				nextProduct++
			}
		}
	}
	orderID := map[int]int{0: 0, 1: 1000, 2: 2000}
	orders := func(part, n int) {
		for i := 0; i < n; i++ {
			orderID[part]++
			exec(fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, %d.%03d, 'o%d', '2026-01-02 03:04:05')", orderID[part], rng.Intn(1000), rng.Intn(1000), orderID[part]))
		}
	}
	changes := func() int {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Count(log.String(), "changed the tables of collection")
	}
	waitRestarts := func(n int) { // waits for the n-th change followed in place
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for changes() < n {
			select {
			case <-sup.Done():
				t.Fatalf("supervisor stopped: %v", sup.Err())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d table-set changes followed, want %d", changes(), n)
			}
			time.Sleep(5 * time.Millisecond) // polls an observed count; the hang guard above bounds it
		}
	}
	first := sup.Adapter()

	products(40)
	orders(0, 10)
	orders(1, 10)
	// Hold the checkpoints once the TRUNCATE was seen, so that rows
	// written after it reach the runtime while the change is followed;
	// with no restart each is delivered exactly once.
	tap.armHold()
	truncTs := exec("TRUNCATE TABLE shop.products")
	products(30) // written under the new table id while the adapter restarts
	firstOrder := orderID[0] + 1
	orders(0, 5)
	var heldKeys []string
	for id := firstOrder; id <= orderID[0]; id++ {
		heldKeys = append(heldKeys, fmt.Sprint(id))
	}
	tap.waitSeen(t, heldKeys)
	tap.release()
	waitRestarts(1)
	products(20)
	orders(0, 5)
	addTs := exec("ALTER TABLE shop.orders ADD PARTITION (PARTITION p2 VALUES LESS THAN (3000))")
	orders(2, 15) // rows of the new partition
	waitRestarts(2)
	orders(1, 5)
	tpTs := exec("ALTER TABLE shop.orders TRUNCATE PARTITION p0")
	orders(0, 8) // p0 under its new id
	orders(2, 3)
	waitRestarts(3)
	dpTs := exec("ALTER TABLE shop.orders DROP PARTITION p1")
	orders(0, 4)
	orders(2, 4)
	products(10)
	waitRestarts(4)
	// TRUNCATE TABLE of a partitioned table: every partition and the
	// logical table get new ids.
	truncOrdersTs := exec("TRUNCATE TABLE shop.orders")
	orders(0, 3)
	orders(2, 2)
	waitRestarts(5)

	final, err := up.Cluster.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, tablesetTables, final, 30*time.Second); err != nil {
		t.Fatalf("%v (supervisor: %v)", err, sup.Err())
	}
	expectConsistent(t, ctx, up, emu, tablesetTables, final)
	rec.check(t)
	tap.mu.Lock()
	for _, r := range tap.regressions {
		t.Error(r)
	}
	if len(tap.lastCP) != 1 {
		t.Errorf("checkpoints seen from %d runs, want 1 (no restart)", len(tap.lastCP))
	}
	tap.mu.Unlock()
	// The rows written while the change was followed were delivered once
	// (and the check above found each exactly once, with its values).
	for _, k := range heldKeys {
		if n := tap.deliveries(k); n != 1 {
			t.Errorf("order %s delivered %d times, want once (no restart)", k, n)
		}
	}

	// The changes: one per table-set DDL, each followed in place at its
	// ts by the same adapter, in the same epoch, logged with its action.
	if a := sup.Adapter(); a != first || a.Resume.Epoch != 1 || a.RT.Err() != nil {
		t.Fatalf("adapter replaced or stopped: epoch %d, runtime %v", a.Resume.Epoch, a.RT.Err())
	}
	logMu.Lock()
	lines := strings.Count(log.String(), "changed the tables of collection")
	logText := log.String()
	logMu.Unlock()
	if lines != 5 || strings.Count(logText, "(no restart)") != 5 {
		t.Errorf("table-set change log lines: %d\n%s", lines, logText)
	}
	for _, want := range []struct {
		ts     uint64
		action string
	}{{truncTs, "truncate table"}, {addTs, "add partition"}, {tpTs, "truncate partition"}, {dpTs, "drop partition"}, {truncOrdersTs, "truncate table"}} {
		if line := fmt.Sprintf("(%s) at ts %d changed the tables", want.action, want.ts); !strings.Contains(logText, line) {
			t.Errorf("no log line %q:\n%s", line, logText)
		}
	}

	// The partitions of the final definition are exactly the upstream's
	// physical tables.
	for _, ref := range tablesetTables {
		ti, _, err := up.SQL.TableInfo(ref.DB, ref.Table)
		if err != nil {
			t.Fatal(err)
		}
		st, err := emu.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: ref.CollectionName()})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, id := range ti.PhysicalIDs() {
			want = append(want, normalize.PartitionName(0, id))
		}
		if got := st.GetDefinition().GetSourcePartitions(); strings.Join(got, ",") != strings.Join(sortedStrings(want), ",") {
			t.Errorf("%s: source partitions %v, upstream physical tables %v", ref, got, want)
		}
	}

	// Every row written under a new physical id arrived.
	if n := countDocs(t, emu, "shop.orders"); n != 3+2 {
		t.Errorf("shop.orders has %d documents", n)
	}
	if err := sup.Close(); err != nil {
		t.Fatal(err)
	}
	if sup.Err() != nil {
		t.Fatal(sup.Err())
	}

	// The check is exact for every type: with replication stopped, change
	// one value of each kind upstream; each is reported, naming the
	// collection, key, field, expected and actual value.
	docs, err := verify.Documents(ctx, emu, "shop.products")
	if err != nil || len(docs) == 0 {
		t.Fatalf("products: %d docs, %v", len(docs), err)
	}
	pk := docs[0].PrimaryKey
	exec(fmt.Sprintf("UPDATE shop.products SET price = 0.01, ratio = 1e-7, score = 0.5, created = '2001-01-01 00:00:00.001', "+
		"seen = '2001-01-01 00:00:00.000001', born = '2001-01-01', took = '00:00:00.01', attrs = '{\"changed\": true}', "+
		"embedding = '[9,9,9]', color = 'red', tags = 'c', flags = 255, note = 'changed' WHERE id = %s", pk))
	after, _ := up.Cluster.CurrentTs(ctx)
	diffs, err := verify.CheckConsistency(ctx, up.Snapshot(), emu, tablesetTables, after)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range diffs {
		if d.Collection != "shop.products" || d.Key != pk || d.Expected == d.Actual || !strings.Contains(d.String(), "pk="+pk) {
			t.Errorf("unexpected diff %+v", d)
		}
		got[d.Field] = true
	}
	for _, f := range []string{"price", "ratio", "score", "created", "seen", "born", "took", "attrs", "embedding", "color", "tags", "flags", "note"} {
		// A value that happened to be equal already is not a difference.
		if !got[f] && fieldText(docs[0], f) != "" {
			t.Errorf("change of %q not reported (doc value %s): %v", f, fieldText(docs[0], f), diffs)
		}
	}
}

func fieldText(d *apiv1.Document, f string) string {
	v, ok := d.Fields[f]
	if !ok {
		return ""
	}
	return verify.ValueText(v)
}

func countDocs(t *testing.T, emu *emulator.Emulator, coll string) int {
	t.Helper()
	docs, err := verify.Documents(context.Background(), emu, coll)
	if err != nil {
		t.Fatal(err)
	}
	return len(docs)
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// holdTap counts row deliveries of shop.orders by primary key and, once
// armed, blocks checkpoints after it saw a TRUNCATE TABLE until released.
type holdTap struct {
	mu   sync.Mutex
	seen map[string]int
	// lastCP is the last checkpoint per run (each runtime calls with its
	// own context); regressions lists any that went backwards.
	lastCP      map[context.Context]minicdc.Checkpoint
	regressions []string
	armed       bool
	holding     bool
	rel         chan struct{}
}

func newHoldTap() *holdTap {
	return &holdTap{seen: map[string]int{}, rel: make(chan struct{}), lastCP: map[context.Context]minicdc.Checkpoint{}}
}

func (h *holdTap) armHold() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

func (h *holdTap) release() { close(h.rel) }

func (h *holdTap) deliveries(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[key]
}

func (h *holdTap) waitSeen(t *testing.T, keys []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		all := true
		for _, k := range keys {
			all = all && h.seen[k] > 0
		}
		h.mu.Unlock()
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows %v not delivered", keys)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *holdTap) OnRowChanged(_ context.Context, ev minicdc.RowChanged) error {
	if ev.TableInfo.Name.L != "orders" || ev.Row.IsEmpty() {
		return nil
	}
	d, err := ev.Row.ColumnAt(0)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.seen[fmt.Sprint(d.GetInt64())]++
	h.mu.Unlock()
	return nil
}

func (h *holdTap) OnDDL(_ context.Context, ev minicdc.DDL) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed && strings.HasPrefix(ev.Query, "TRUNCATE TABLE") {
		h.armed, h.holding = false, true
	}
	return nil
}

func (h *holdTap) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	h.mu.Lock()
	if prev, ok := h.lastCP[ctx]; ok {
		if cp.GlobalResolvedTs < prev.GlobalResolvedTs {
			h.regressions = append(h.regressions, fmt.Sprintf("global checkpoint %d after %d", cp.GlobalResolvedTs, prev.GlobalResolvedTs))
		}
		for id, ts := range cp.TableResolvedTs {
			if ts < prev.TableResolvedTs[id] {
				h.regressions = append(h.regressions, fmt.Sprintf("table %d checkpoint %d after %d", id, ts, prev.TableResolvedTs[id]))
			}
		}
	}
	h.lastCP[ctx] = cp
	holding := h.holding
	h.holding = false
	h.mu.Unlock()
	if holding {
		select {
		case <-h.rel:
		case <-ctx.Done():
		}
	}
	return nil
}

// failTap fails the first checkpoint after fail is set.
type failTap struct {
	mu   sync.Mutex
	fail bool
}

func (f *failTap) OnRowChanged(context.Context, minicdc.RowChanged) error { return nil }
func (f *failTap) OnDDL(context.Context, minicdc.DDL) error               { return nil }
func (f *failTap) OnCheckpoint(context.Context, minicdc.Checkpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errBoom
	}
	return nil
}

var errBoom = fmt.Errorf("injected failure")

// TestSupervisorStopsOnOtherFatalErrors: a fatal error stops the
// supervisor with it, and nothing restarts the adapter (M48).
func TestSupervisorStopsOnOtherFatalErrors(t *testing.T) {
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
	tap := &failTap{}
	sup, err := StartSupervisor(ctx, up, emu, Config{DataDir: dir, Tables: e2eTables, Tap: tap}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	first := sup.Adapter()
	tap.mu.Lock()
	tap.fail = true
	tap.mu.Unlock()
	if _, err := ss.Exec(ctx, "INSERT INTO shop.products VALUES (1, 'a', 1, 1)"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sup.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("supervisor did not stop")
	}
	var fe *minicdc.FatalError
	if err := sup.Err(); !errors.Is(err, errBoom) || !errors.As(err, &fe) || fe.Trigger != minicdc.TriggerCallback {
		t.Fatalf("supervisor error %v, want the callback failure", err)
	}
	if sup.Adapter() != first {
		t.Fatal("the adapter was replaced")
	}
	if err := sup.Close(); !errors.Is(err, errBoom) {
		t.Fatalf("Close: %v", err)
	}
}

// shopRig is the fixture of the table-set and cold-start tests: an
// upstream (in process or over the wire) holding shop.products and the
// partitioned shop.orders, an emulator, and the run's seeded randomness.
type shopRig struct {
	ctx context.Context
	up  *Upstream
	emu *emulator.Emulator
	dir string
	rng *rand.Rand
	ss  *sqlfront.Session
	t   *testing.T
}

func newShopRig(t *testing.T, wire bool) *shopRig {
	t.Helper()
	seed := seedFor(t)
	ctx := context.Background()
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: wire})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	r := &shopRig{ctx: ctx, up: up, dir: t.TempDir(), rng: rand.New(rand.NewSource(seed)), ss: up.SQL.NewSession(""), t: t}
	r.exec("CREATE DATABASE shop")
	r.exec(typesTable)
	r.exec(ordersTable)
	emu, err := emulator.Open(filepath.Join(r.dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	r.emu = emu
	return r
}

// exec runs q on the upstream and returns its commit ts.
func (r *shopRig) exec(q string) uint64 {
	r.t.Helper()
	res, err := r.ss.Exec(r.ctx, q)
	if err != nil {
		r.t.Fatalf("%s: %v", q, err)
	}
	return res.CommitTs
}

// expectConsistent fails t with the differences (the first 20 and a count)
// between the tables and their collections at ts.
func expectConsistent(t *testing.T, ctx context.Context, up *Upstream, emu *emulator.Emulator, tables []TableRef, ts uint64) {
	t.Helper()
	diffs, err := verify.CheckConsistency(ctx, up.Snapshot(), emu, tables, ts)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range diffs {
		if i == 20 {
			t.Errorf("... %d more", len(diffs)-20)
			break
		}
		t.Error(d)
	}
}
