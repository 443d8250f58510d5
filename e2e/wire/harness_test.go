package wire_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/internal/testlog"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/verify"
)

// TestMain quiets the PD client's and client-go's logs (testlog).
func TestMain(m *testing.M) {
	testlog.Quiet()
	os.Exit(m.Run())
}

// seedFor is the run's seed: WIRE_SEED or a fixed default, printed on
// failure with the line that reruns it (W14).
func seedFor(t *testing.T) int64 {
	seed := int64(11)
	if s := os.Getenv("WIRE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad WIRE_SEED %q", s)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with WIRE_SEED=%d go test ./e2e/wire/ -run '%s')", seed, seed, t.Name())
		}
	})
	return seed
}

// The schema: items and ledger (one physical table each) and orders
// (RANGE partitioned, three physical tables). Every physical table is
// split at a few handles (W1), so a transaction's rows come from several
// regions, led by different stores. The SQL workload updates and deletes
// in items and orders; ledger gets SQL inserts only, and the raw
// transactions (mid-transaction faults, abandoned locks): the SQL front
// scans a whole table for an UPDATE or DELETE, so a pending raw lock in
// items would block the workload.
var (
	itemsRef  = adapter.TableRef{DB: "shop", Table: "items"}
	ordersRef = adapter.TableRef{DB: "shop", Table: "orders"}
	ledgerRef = adapter.TableRef{DB: "shop", Table: "ledger"}
	allTables = []adapter.TableRef{itemsRef, ordersRef, ledgerRef}
)

var schema = []string{
	"CREATE DATABASE shop",
	"CREATE TABLE shop.items (id BIGINT PRIMARY KEY, title VARCHAR(64) NOT NULL, qty INT NOT NULL DEFAULT 0, note TEXT)",
	"CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, item BIGINT, amount DECIMAL(10,2), status VARCHAR(16)) " +
		"PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (200), PARTITION p1 VALUES LESS THAN (400), PARTITION p2 VALUES LESS THAN MAXVALUE)",
	"CREATE TABLE shop.ledger (id BIGINT PRIMARY KEY, title VARCHAR(64) NOT NULL, qty INT NOT NULL DEFAULT 0)",
}

// Handles the record spans are split at: items and ledger at every
// hundred, each orders partition twice.
var (
	itemSplits  = []int64{100, 200, 300}
	orderSplits = [][]int64{{60, 130}, {260, 330}, {460, 530}}
)

// Ledger id bands: raw transactions write ids with 40 <= id%100 < 60,
// SQL inserts every other id, so a raw lock never meets a SQL statement
// (an INSERT reads only its own key). Markers (the row mutants' targets) and the final write
// use ids far above the workload's.
const (
	markerID = 1000
	finalID  = 5000
)

// rigOpts configures one run.
type rigOpts struct {
	// transport overrides the gRPC sources' timings (zero fields: rig
	// defaults, short so a fault costs milliseconds).
	transport logpuller.TransportConfig
	// mutant, when set, is a deliberate bug put into the run (meta-tests).
	mutant *mutant
	// memory is the adapter's memory and spill quota (zero: the default).
	memory adapter.Memory
	// safeWait bounds each wait for safe_ts (zero: 3 min); a run that
	// drains a spilled transaction of a million rows needs longer.
	safeWait time.Duration
}

// rig is one end-to-end run over real gRPC: fake cluster + SQL front ->
// gRPC servers on loopback -> PD client / client-go / GRPCSource ->
// minicdc -> mounter -> normalize -> emulator.
type rig struct {
	t    *testing.T
	ctx  context.Context
	seed int64
	rng  *rand.Rand
	up   *adapter.Upstream
	c    *fakeupstream.Cluster
	ss   *sqlfront.Session
	emu  *emulator.Emulator
	a    *adapter.Adapter
	chk  *checker
	mut  *mutant
	w    *workload

	items, orders, ledger *model.TableInfo
	nextRaw               int64 // next raw-band id offset
	nextFinal             int64
	safeWait              time.Duration // rigOpts.safeWait
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	seed := seedFor(t)
	ctx := context.Background()
	tc := o.transport
	if tc.StoreReconnectBackoff == 0 {
		tc.StoreReconnectBackoff = 30 * time.Millisecond
	}
	if tc.RegionRetryInterval == 0 {
		tc.RegionRetryInterval = 10 * time.Millisecond
	}
	if tc.BusyBackoff == 0 {
		tc.BusyBackoff = 20 * time.Millisecond
	}
	if tc.ResolveLockInterval == 0 {
		tc.ResolveLockInterval = 20 * time.Millisecond
	}
	up, err := adapter.NewUpstream(ctx, adapter.UpstreamConfig{
		Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: true, Stores: 3, Transport: tc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	r := &rig{t: t, ctx: ctx, seed: seed, rng: rand.New(rand.NewSource(seed)), up: up, c: up.Cluster,
		ss: up.SQL.NewSession(""), chk: newChecker(), mut: o.mutant, nextFinal: finalID, safeWait: o.safeWait}
	for _, q := range schema {
		r.exec(q)
	}
	if r.items, _, err = up.SQL.TableInfo("shop", "items"); err != nil {
		t.Fatal(err)
	}
	if r.orders, _, err = up.SQL.TableInfo("shop", "orders"); err != nil {
		t.Fatal(err)
	}
	if r.ledger, _, err = up.SQL.TableInfo("shop", "ledger"); err != nil {
		t.Fatal(err)
	}
	r.splitTables()

	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	r.emu = emu
	wrap := r.chk.wrapSink
	var tap minicdc.Callback = r.chk.tap()
	if r.mut != nil {
		wrap = func(s normalize.Sink) normalize.Sink { return r.mut.wrapSink(r.chk.wrapSink(s)) }
		tap = r.mut.wrapTap(tap)
	}
	a, err := adapter.Start(ctx, up, emu, adapter.Config{DataDir: dir, Tables: allTables, WrapSink: wrap, Tap: tap, Memory: o.memory})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	r.a = a
	r.w = &workload{r: r, items: map[int64]bool{}, orders: map[int64]bool{}, ledger: map[int64]bool{}}
	return r
}

func (r *rig) exec(q string) sqlfront.Result {
	r.t.Helper()
	res, err := r.ss.Exec(r.ctx, q)
	if err != nil {
		r.t.Fatalf("%s: %v (seed %d)", q, err, r.seed)
	}
	return res
}

// splitTables splits every physical table's record span at its bounds
// (as TiDB splits tables, so a lock in one table never holds another
// table's or the DDL job table's resolved ts) and at a few handles inside,
// and spreads the leaders over the stores (W1).
func (r *rig) splitTables() {
	r.t.Helper()
	var phys []int64
	phys = append(phys, r.items.PhysicalIDs()...)
	phys = append(phys, r.orders.PhysicalIDs()...)
	phys = append(phys, r.ledger.ID)
	for _, p := range phys {
		prefix := tablecodec.EncodeRecordPrefix(nil, p)
		for _, k := range [][]byte{prefix, tablecodec.PrefixNext(prefix)} {
			if _, _, err := r.c.SplitRaw(k); err != nil {
				r.t.Fatalf("split table %d at %x: %v", p, k, err)
			}
		}
	}
	for _, phys := range []int64{r.items.ID, r.ledger.ID} {
		for _, h := range itemSplits {
			r.split(phys, h)
		}
	}
	for i, phys := range r.orders.PhysicalIDs() {
		for _, h := range orderSplits[i] {
			r.split(phys, h)
		}
	}
	regions := r.tableRegions()
	if len(regions) < 12 {
		r.t.Fatalf("only %d regions hold the tables after splits", len(regions))
	}
	for i, id := range regions {
		if err := r.c.TransferLeader(id, uint64(i%3)+1); err != nil {
			r.t.Fatalf("transfer leader of region %d: %v", id, err)
		}
	}
}

func (r *rig) split(phys, h int64) {
	r.t.Helper()
	if _, _, err := r.c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, phys, h)); err != nil {
		r.t.Fatalf("split table %d at %d: %v", phys, h, err)
	}
}

// itemKey is the record key of items row id.
func (r *rig) itemKey(id int64) []byte { return tablecodec.EncodeIntRecordKey(nil, r.items.ID, id) }

// ledgerKey is the record key of ledger row id.
func (r *rig) ledgerKey(id int64) []byte { return tablecodec.EncodeIntRecordKey(nil, r.ledger.ID, id) }

// tableRegions are the ids of the regions overlapping any record span of
// the tables, in key order.
func (r *rig) tableRegions() []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	var phys []int64
	phys = append(phys, r.items.PhysicalIDs()...)
	phys = append(phys, r.orders.PhysicalIDs()...)
	phys = append(phys, r.ledger.ID)
	for _, p := range phys {
		span := tablecodec.TableRecordSpan(0, false, p)
		for _, reg := range r.c.RegionsInSpan(span) {
			if !seen[reg.ID] {
				seen[reg.ID] = true
				out = append(out, reg.ID)
			}
		}
	}
	return out
}

// arm starts the mutant's deliberate bug (no-op in clean runs): called
// when the fault begins, so the mutated delivery happens inside the fault
// window.
func (r *rig) arm() {
	if r.mut != nil {
		r.mut.armed.Store(true)
	}
}

// marker writes the row mutants' target: three items rows in one
// statement (one transaction, one commit ts, so one batch), the first of
// which is markerID. Clean runs write it too, so both runs do the same.
func (r *rig) marker() {
	r.exec(fmt.Sprintf("INSERT INTO shop.items VALUES (%d, 'marker', 1, 'm'), (%d, 'marker+1', 2, 'm'), (%d, 'marker+2', 3, 'm')",
		markerID, markerID+1, markerID+2))
}

// rawTxn prewrites a transaction of ledger rows in the raw band, one per
// given hundred (so across regions), and returns it uncommitted with the
// ids it writes; the caller commits it. Its locks live a minute, so the
// lock resolver leaves them alone however slow the machine.
func (r *rig) rawTxn(tag string, hundreds ...int64) (*fakeupstream.Txn, []int64) {
	return r.rawTxnTTL(tag, 60_000, hundreds...)
}

// rawTxnTTL is rawTxn with a chosen lock TTL (abandoned transactions).
func (r *rig) rawTxnTTL(tag string, ttlMs uint64, hundreds ...int64) (*fakeupstream.Txn, []int64) {
	r.t.Helper()
	txn := r.c.Begin()
	txn.SetTTL(ttlMs)
	var ids []int64
	for _, h := range hundreds {
		id := h*100 + 40 + r.nextRaw%20
		r.nextRaw++
		key := r.ledgerKey(id)
		if len(ids) == 0 {
			txn.SetPrimary(key)
		}
		txn.Set(key, r.encodeLedger(fmt.Sprintf("%s %d", tag, id), id%7))
		ids = append(ids, id)
	}
	if err := txn.Prewrite(); err != nil {
		r.t.Fatalf("prewrite %s: %v", tag, err)
	}
	return txn, ids
}

// encodeLedger is a ledger row value as TiDB writes it (row format v2,
// the handle in the key).
func (r *rig) encodeLedger(title string, qty int64) []byte {
	r.t.Helper()
	ids := map[string]int64{}
	for _, c := range r.ledger.Columns {
		ids[c.Name.L] = c.ID
	}
	val, err := rowcodec.EncodeV2(nil, []int64{ids["title"], ids["qty"]},
		[]value.Datum{value.NewStringDatum(title), value.NewIntDatum(qty)}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return val
}

func (r *rig) commit(txn *fakeupstream.Txn) uint64 {
	r.t.Helper()
	ts, err := txn.Commit()
	if err != nil {
		r.t.Fatalf("commit txn %d: %v (seed %d)", txn.StartTs(), err, r.seed)
	}
	return ts
}

// outcome is what a run ends with.
type outcome struct {
	waitErr  error // WaitSafe at the final write's commit ts
	adptErr  error // the adapter's fatal error, if it stopped
	diffs    []verify.Diff
	problems []problem
	summary  string
}

func (o outcome) has(kind string) bool {
	for _, p := range o.problems {
		if p.kind == kind {
			return true
		}
	}
	return false
}

// finish writes one last transaction to every table, waits until every
// collection's safe_ts reaches its commit ts (W2), compares collections
// with the upstream snapshot there and collects the checker's findings. It
// stops early when the adapter stops (a fatal mutant).
func (r *rig) finish() outcome {
	r.t.Helper()
	id := r.nextFinal
	r.nextFinal++
	r.exec("BEGIN")
	r.exec(fmt.Sprintf("INSERT INTO shop.items VALUES (%d, 'final', 0, 'f')", id))
	r.exec(fmt.Sprintf("INSERT INTO shop.ledger VALUES (%d, 'final', 0)", id))
	for _, oid := range []int64{id % 200, 200 + id%200, id} { // one row per partition
		r.exec(fmt.Sprintf("REPLACE INTO shop.orders VALUES (%d, %d, 1.00, 'final')", oid, id))
	}
	final := r.exec("COMMIT").CommitTs
	if final == 0 {
		r.t.Fatal("final write has no commit ts")
	}
	var o outcome
	o.waitErr = r.waitSafe(final)
	if r.stopped() {
		o.adptErr = r.a.RT.Err()
		if o.adptErr == nil {
			o.adptErr = fmt.Errorf("adapter stopped without an error")
		}
	}
	if o.waitErr == nil {
		diffs, err := verify.CheckConsistency(r.ctx, r.up.Snapshot(), r.emu, allTables, final)
		if err != nil {
			r.t.Fatalf("consistency check: %v", err)
		}
		o.diffs = diffs
	}
	o.problems, o.summary = r.chk.snapshot()
	return o
}

// requireClean fails the test unless the run ended with collections equal
// to the upstream, no checker problem, and the pipeline and the checker
// did real work (W2-W10).
func (r *rig) requireClean(o outcome) {
	r.t.Helper()
	r.t.Log(o.summary)
	if o.adptErr != nil {
		r.t.Fatalf("adapter stopped: %v (seed %d)", o.adptErr, r.seed)
	}
	if o.waitErr != nil {
		r.t.Fatalf("%v (seed %d, %s)", o.waitErr, r.seed, o.summary)
	}
	for i, d := range o.diffs {
		if i == 20 {
			r.t.Errorf("... %d more diffs", len(o.diffs)-20)
			break
		}
		r.t.Errorf("diff: %s", d)
	}
	for i, p := range o.problems {
		if i == 20 {
			r.t.Errorf("... %d more problems", len(o.problems)-20)
			break
		}
		r.t.Errorf("checker: %s", p)
	}
	// W10: the checks were not vacuous.
	muts, advances, cps, rows, parts := r.chk.counts()
	if muts < 50 || advances == 0 || cps == 0 || rows < muts || parts < 5 {
		r.t.Errorf("too little observed: %s", o.summary)
	}
}

// requireCaught is the meta-test's verdict: the mutant applied, and the
// check it targets reported it (W11).
func (r *rig) requireCaught(o outcome) {
	r.t.Helper()
	m := r.mut
	r.t.Logf("mutant %s: %s; adapter error: %v; wait error: %v", m.mode, o.summary, o.adptErr, o.waitErr)
	if !m.applied.Load() {
		r.t.Fatalf("mutant %s never applied (seed %d): the meta-test proves nothing", m.mode, r.seed)
	}
	if m.want == wantDiff {
		if len(o.diffs) == 0 {
			r.t.Fatalf("mutant %s: CheckConsistency reported no difference (wait error %v, seed %d)", m.mode, o.waitErr, r.seed)
		}
		r.t.Logf("caught: %s", o.diffs[0])
		return
	}
	if !o.has(m.want) {
		r.t.Fatalf("mutant %s: checker did not report %q (problems %v, seed %d)", m.mode, m.want, o.problems, r.seed)
	}
	for _, p := range o.problems {
		if p.kind == m.want {
			r.t.Logf("caught: %s", p)
			break
		}
	}
}

// ---- workload ----

// workload is a seeded mix of SQL statements and multi-statement
// transactions over items and the partitioned orders, with ids spread over
// every region. It tracks live ids so no statement fails.
type workload struct {
	r      *rig
	items  map[int64]bool
	orders map[int64]bool
	ledger map[int64]bool
}

// freeID picks an id in [lo, hi) outside the ledger's raw band that is
// not live.
func (w *workload) freeID(live map[int64]bool, lo, hi int64) (int64, bool) {
	for i := 0; i < 20; i++ {
		id := lo + w.r.rng.Int63n(hi-lo)
		if !rawBand(id) && id > 0 && !live[id] {
			return id, true
		}
	}
	return 0, false
}

func (w *workload) liveID(live map[int64]bool) (int64, bool) {
	if len(live) == 0 {
		return 0, false
	}
	ids := make([]int64, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids[w.r.rng.Intn(len(ids))], true
}

// itemInserts returns n VALUES tuples of new items rows, each in a
// different hundred (region) where possible.
func (w *workload) itemInserts(n int) []string {
	var vals []string
	for i := 0; i < n; i++ {
		h := int64(w.r.rng.Intn(4))
		id, ok := w.freeID(w.items, h*100, h*100+100)
		if !ok {
			continue
		}
		w.items[id] = true
		vals = append(vals, fmt.Sprintf("(%d, 'item %d', %d, 'n%d')", id, id, w.r.rng.Intn(100), w.r.rng.Intn(1000)))
	}
	return vals
}

func (w *workload) orderInsert() (string, bool) {
	p := int64(w.r.rng.Intn(3)) // partition: ids [p*200, p*200+200)
	id, ok := w.freeID(w.orders, p*200, p*200+200)
	if !ok {
		return "", false
	}
	w.orders[id] = true
	return fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, %d, %d.%02d, 'new')", id, w.r.rng.Intn(400), w.r.rng.Intn(1000), w.r.rng.Intn(100)), true
}

func (w *workload) ledgerInsert() (string, bool) {
	h := int64(w.r.rng.Intn(4))
	id, ok := w.freeID(w.ledger, h*100, h*100+100)
	if !ok {
		return "", false
	}
	w.ledger[id] = true
	return fmt.Sprintf("INSERT INTO shop.ledger VALUES (%d, 'sql %d', %d)", id, id, w.r.rng.Intn(50)), true
}

// step runs one statement or transaction.
func (w *workload) step() {
	r := w.r
	switch p := r.rng.Intn(100); {
	case p < 20 || len(w.items) < 8:
		// A multi-row insert across regions.
		if vals := w.itemInserts(3); len(vals) > 0 {
			r.exec("INSERT INTO shop.items VALUES " + strings.Join(vals, ", "))
		}
	case p < 45:
		// A multi-region, multi-table transaction.
		r.exec("BEGIN")
		if vals := w.itemInserts(2); len(vals) > 0 {
			r.exec("INSERT INTO shop.items VALUES " + strings.Join(vals, ", "))
		}
		h := int64(r.rng.Intn(3))
		r.exec(fmt.Sprintf("UPDATE shop.items SET qty = qty + 1 WHERE id >= %d AND id < %d", h*100+60, (h+1)*100+40))
		if q, ok := w.ledgerInsert(); ok {
			r.exec(q)
		}
		for i := 0; i < 2; i++ {
			if q, ok := w.orderInsert(); ok {
				r.exec(q)
			}
		}
		if id, ok := w.liveID(w.items); ok {
			r.exec(fmt.Sprintf("DELETE FROM shop.items WHERE id = %d", id))
			delete(w.items, id)
		}
		r.exec("COMMIT")
	case p < 60:
		if id, ok := w.liveID(w.items); ok {
			r.exec(fmt.Sprintf("UPDATE shop.items SET title = 'upd %d', note = 'v%d' WHERE id = %d", id, r.rng.Intn(1000), id))
		}
	case p < 68:
		if id, ok := w.liveID(w.items); ok {
			r.exec(fmt.Sprintf("DELETE FROM shop.items WHERE id = %d", id))
			delete(w.items, id)
		}
	case p < 75:
		if q, ok := w.orderInsert(); ok {
			r.exec(q)
		}
	case p < 80:
		if q, ok := w.ledgerInsert(); ok {
			r.exec(q)
		}
	case p < 90:
		// Move an order to another partition: delete + insert in one
		// transaction, two physical tables.
		id, ok := w.liveID(w.orders)
		if !ok {
			return
		}
		to := (id/200 + 1 + int64(r.rng.Intn(2))) % 3
		nid, ok := w.freeID(w.orders, to*200, to*200+200)
		if !ok {
			return
		}
		r.exec(fmt.Sprintf("UPDATE shop.orders SET id = %d, status = 'moved' WHERE id = %d", nid, id))
		delete(w.orders, id)
		w.orders[nid] = true
	default:
		p := int64(r.rng.Intn(3))
		r.exec(fmt.Sprintf("UPDATE shop.orders SET amount = amount + 1, status = 'bulk' WHERE id >= %d AND id < %d", p*200+10, p*200+150))
	}
}

// run runs n steps.
func (w *workload) run(n int) {
	for i := 0; i < n; i++ {
		w.step()
	}
}

// caughtUp waits until the collections' safe_ts passes everything written
// so far (the fault's effects delivered) without comparing. In a mutant
// run the adapter may have stopped (the emulator refused the mutated
// stream): then it returns at once, finish reports it.
func (r *rig) caughtUp(what string) {
	r.t.Helper()
	ts, err := r.up.CurrentTs(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.waitSafe(ts); err != nil {
		if r.mut != nil && r.stopped() {
			return
		}
		r.t.Fatalf("%s: %v (adapter: %v, seed %d)", what, err, r.a.RT.Err(), r.seed)
	}
}

// waitSafe is verify.WaitSafe over every table, given up when the
// adapter stops.
func (r *rig) waitSafe(ts uint64) error { return r.waitSafeOf(allTables, ts) }

// waitSafeOf is waitSafe over some tables. Its bound is a hang guard, not
// a timing check: a stopped adapter ends the wait at once, and under -race
// on a loaded CI machine draining the 20k-row spilled transaction took
// longer than 30 s.
func (r *rig) waitSafeOf(tables []adapter.TableRef, ts uint64) error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	go func() {
		select {
		case <-r.a.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	limit := r.safeWait
	if limit == 0 {
		limit = 3 * time.Minute // a hang guard
	}
	return verify.WaitSafe(ctx, r.emu, tables, ts, limit)
}

// stopped reports whether the adapter has stopped.
func (r *rig) stopped() bool {
	select {
	case <-r.a.Done():
		return true
	default:
		return false
	}
}

// expect records evidence that the fault really happened (W13); it is
// checked in clean runs only (a mutant run may have stopped the adapter).
func (r *rig) expect(ok bool, format string, args ...any) {
	r.t.Helper()
	if !ok && r.mut == nil {
		r.t.Errorf("fault not exercised: "+format+" (seed %d)", append(args, r.seed)...)
	}
}

// collSafeTs is a collection's safe_ts (0 when it cannot be read).
func (r *rig) collSafeTs(name string) uint64 {
	st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: name})
	if err != nil {
		return 0
	}
	return st.GetSafeTs()
}

// rawBand reports whether id is reserved for raw transactions.
func rawBand(id int64) bool { return id%100 >= 40 && id%100 < 60 }
