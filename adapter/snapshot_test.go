package adapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/internal/invariants"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/verify"
)

var snapTables = []TableRef{{DB: "shop", Table: "items"}}

// snapRows is the number of rows written before the adapter starts: 20k
// in make test (5k in its -race -tags invariants pass, which is several
// times slower); SFEMU_SNAPSHOT_ROWS=200000 runs the full size.
func snapRows(t testing.TB) int64 {
	if s := os.Getenv("SFEMU_SNAPSHOT_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 100 {
			t.Fatalf("bad SFEMU_SNAPSHOT_ROWS %q (want >= 100)", s)
		}
		return n
	}
	if invariants.Enabled {
		return 5000
	}
	return 20000
}

// snapRig is an upstream with shop.items holding rows before the adapter
// starts, and an emulator over a data dir.
type snapRig struct {
	ctx  context.Context
	up   *Upstream
	emu  *emulator.Emulator
	dir  string
	tid  int64
	cols []int64
	rows int64

	mu    sync.Mutex // the workload run from snapshot hooks
	rng   *rand.Rand
	next  int64
	sinks []*countingSink
}

func newSnapRig(t *testing.T, wire bool, seed int64, rows int64) *snapRig {
	t.Helper()
	r := &snapRig{ctx: context.Background(), dir: t.TempDir(), rows: rows, next: rows, rng: rand.New(rand.NewSource(seed))}
	up, err := NewUpstream(r.ctx, UpstreamConfig{Seed: seed, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: wire})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	r.up = up
	r.exec(t, "CREATE DATABASE shop")
	r.exec(t, "CREATE TABLE shop.items (id BIGINT PRIMARY KEY, v INT, note VARCHAR(32), body TEXT)")
	ti, _, err := up.SQL.TableInfo("shop", "items")
	if err != nil {
		t.Fatal(err)
	}
	r.tid = ti.ID
	for _, c := range ti.Columns {
		if c.Name.L != "id" {
			r.cols = append(r.cols, c.ID)
		}
	}
	r.load(t, 0, rows)
	r.openEmu(t)
	return r
}

func (r *snapRig) openEmu(t *testing.T) {
	t.Helper()
	emu, err := emulator.Open(filepath.Join(r.dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.emu = emu
	t.Cleanup(func() { emu.Close() })
}

func (r *snapRig) exec(t testing.TB, q string) uint64 {
	t.Helper()
	res, err := r.up.SQL.NewSession("").Exec(r.ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res.CommitTs
}

// load writes rows [from, to) of shop.items in transactions of 10k rows
// through the typed Txn API (fast: no SQL per row).
func (r *snapRig) load(t testing.TB, from, to int64) {
	t.Helper()
	var val []byte
	for start := from; start < to; start += 10000 {
		txn := r.up.Cluster.Begin()
		for i := start; i < min(start+10000, to); i++ {
			var err error
			val, err = rowcodec.EncodeV2(val[:0], r.cols, []value.Datum{value.NewIntDatum(i % 1000), value.NewStringDatum(fmt.Sprintf("n%d", i)), value.NewStringDatum("body of row " + strconv.FormatInt(i, 10))}, nil)
			if err != nil {
				t.Fatal(err)
			}
			key := tablecodec.EncodeIntRecordKey(nil, r.tid, i)
			if i == start {
				txn.SetPrimary(key)
			}
			txn.Set(key, val)
		}
		if _, err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// split splits shop.items into n regions at even handles.
func (r *snapRig) split(t testing.TB, n int) {
	t.Helper()
	for i := 1; i < n; i++ {
		if _, _, err := r.up.Cluster.SplitRaw(tablecodec.EncodeIntRecordKey(nil, r.tid, r.rows*int64(i)/int64(n))); err != nil {
			t.Fatal(err)
		}
	}
}

// step runs a few seeded statements: updates and deletes of rows read or
// not yet read by the snapshot, and inserts past the loaded ones.
func (r *snapRig) step(t testing.TB) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := 0; k < 3; k++ {
		id := r.rng.Int63n(r.next)
		switch r.rng.Intn(4) {
		case 0:
			r.exec(t, fmt.Sprintf("INSERT INTO shop.items VALUES (%d, %d, 'new', 'inserted')", r.next, r.rng.Intn(1000)))
			r.next++
		case 1:
			r.exec(t, fmt.Sprintf("DELETE FROM shop.items WHERE id = %d", id))
		default:
			r.exec(t, fmt.Sprintf("UPDATE shop.items SET v = %d, note = 'upd' WHERE id = %d", r.rng.Intn(1000), id))
		}
	}
}

// countingSink counts the mutations ingested per (primary key, commit
// ts) and remembers the commit ts of every batch of an epoch.
type countingSink struct {
	normalize.Sink
	mu     sync.Mutex
	perKey map[string]int
	tsOf   map[uint64][]uint64 // epoch -> commit ts seen
}

func (c *countingSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	resp, err := c.Sink.Ingest(ctx, b)
	if err == nil {
		c.mu.Lock()
		for _, m := range b.GetMutations() {
			c.perKey[fmt.Sprintf("%s@%d", m.GetPrimaryKey(), m.GetCommitTs())]++
			c.tsOf[b.GetSourceEpoch()] = append(c.tsOf[b.GetSourceEpoch()], m.GetCommitTs())
		}
		c.mu.Unlock()
	}
	return resp, err
}

func (r *snapRig) config(t *testing.T, sc SnapshotConfig) Config {
	cs := &countingSink{perKey: map[string]int{}, tsOf: map[uint64][]uint64{}}
	r.sinks = append(r.sinks, cs)
	if sc.Mode == SnapshotNever {
		sc.Mode = SnapshotAuto
	}
	if sc.ChunkRows == 0 {
		sc.ChunkRows = 500
	}
	return Config{DataDir: r.dir, Tables: snapTables, Snapshot: sc,
		WrapSink: func(s normalize.Sink) normalize.Sink { cs.Sink = s; return cs }}
}

func (r *snapRig) state(t *testing.T) *snapshot.State {
	t.Helper()
	st, err := snapshot.Load(filepath.Join(r.dir, snapshot.FileName))
	if err != nil || st == nil {
		t.Fatalf("snapshot state: %v (%v)", st, err)
	}
	return st
}

// finish writes a last round, waits for the final ts and compares the
// collection with the table read at it.
func (r *snapRig) finish(t *testing.T, a interface{ Close() error }) uint64 {
	t.Helper()
	for i := 0; i < 20; i++ {
		r.step(t)
	}
	final, err := r.up.CurrentTs(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(r.ctx, r.emu, snapTables, final, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	expectConsistent(t, r.ctx, r.up, r.emu, snapTables, final)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return final
}

// streamTap fails the test when the stream delivers a row at or below S
// (SN11: nothing at or below S comes twice).
type streamTap struct {
	t    *testing.T
	mu   sync.Mutex
	s    uint64
	rows int
	bad  []uint64
}

func (p *streamTap) OnRowChanged(_ context.Context, ev minicdc.RowChanged) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rows++
	if ev.CommitTs <= p.s {
		p.bad = append(p.bad, ev.CommitTs)
	}
	return nil
}
func (p *streamTap) OnDDL(context.Context, minicdc.DDL) error               { return nil }
func (p *streamTap) OnCheckpoint(context.Context, minicdc.Checkpoint) error { return nil }

// TestSN_SnapshotThenStream (SN1-SN5, SN8, SN11; N41-N44): a table with
// rows before start and a workload while the snapshot reads it (run from
// the snapshot's chunk hook, so it lands in the middle, after S). The
// collection equals the table at the final ts; every snapshot row was
// ingested once at commit_ts S in its own epoch; the stream started at S
// and delivered nothing at or below S; while the snapshot ran the
// collection's safe_ts stayed below S (a read with min_ts >= S waits).
func TestSN_SnapshotThenStream(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(fmt.Sprintf("wire=%v", wire), func(t *testing.T) {
			r := newSnapRig(t, wire, 11, snapRows(t))
			r.split(t, 4)
			var log bytes.Buffer
			var chunks int
			var hookErr error
			var announce sync.Once
			var announceErr error
			tap := &streamTap{t: t}
			prog := &snapshot.Progress{}
			cfg := r.config(t, SnapshotConfig{Concurrency: 4, Log: &syncWriter{w: &log}, Progress: prog, AfterChunk: func(snapshot.Task, int) error {
				r.mu.Lock()
				chunks++
				n := chunks
				r.mu.Unlock()
				if n%5 == 0 {
					r.step(t)
				}
				if wire {
					// rule: SN12 - GC is held at S − 1 while the snapshot
					// reads, although TiDB's GC worker wants far ahead.
					if err := checkHeld(r, prog, &announce, &announceErr); err != nil {
						r.mu.Lock()
						if hookErr == nil { // the first error is the cause: a failed announcement made every later check see PD's seeded 0
							hookErr = err
						}
						r.mu.Unlock()
					}
				}
				// rule: SN11 - safe_ts stays undefined (a read with
				// min_ts >= S waits) until the snapshot stored its
				// progress at S. The status is read before the progress,
				// so "not done" then means not done at the read.
				st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: "shop.items"})
				if rep := prog.Report(time.Now()); err == nil && st.GetSafeTs() != 0 && rep[0].State != "done" {
					r.mu.Lock()
					if hookErr == nil {
						hookErr = fmt.Errorf("safe_ts %d during the snapshot", st.GetSafeTs())
					}
					r.mu.Unlock()
				}
				return nil
			}})
			cfg.Tap = tap
			phase := &phaseRec{}
			cfg.Phase = phase
			a, err := Start(r.ctx, r.up, r.emu, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() }) // a failed test leaves no runtime behind
			if hookErr != nil {
				t.Fatal(hookErr)
			}
			// SR13: the binary's status is told of the snapshot, then of
			// the stream.
			if phase.snapshotting.Load() == 0 || !phase.streaming.Load() {
				t.Errorf("phase hook: %d snapshotting reports, streaming %v", phase.snapshotting.Load(), phase.streaming.Load())
			}
			st := r.state(t)
			if !st.Complete || a.RT.StartTs() != st.Ts || a.Resume.StartTs != st.Ts {
				t.Fatalf("state complete=%v ts=%d, stream starts at %d (resume %+v)", st.Complete, st.Ts, a.RT.StartTs(), a.Resume)
			}
			if st.Epoch != 1 || a.Resume.Epoch != 2 {
				t.Fatalf("snapshot epoch %d, stream epoch %d; want 1 and 2 (N42)", st.Epoch, a.Resume.Epoch)
			}
			tap.mu.Lock()
			tap.s = st.Ts
			tap.mu.Unlock()
			r.finish(t, a)
			tap.mu.Lock()
			if len(tap.bad) > 0 {
				t.Errorf("stream delivered %d rows at or below S=%d: %v", len(tap.bad), st.Ts, tap.bad[:min(5, len(tap.bad))])
			}
			tap.mu.Unlock()
			cs := r.sinks[0]
			var atS int
			for _, ts := range cs.tsOf[1] {
				if ts != st.Ts {
					t.Fatalf("snapshot epoch ingested commit_ts %d, want S=%d (N41)", ts, st.Ts)
				}
				atS++
			}
			if int64(atS) != r.rows {
				t.Errorf("snapshot ingested %d rows, the table held %d at S", atS, r.rows)
			}
			for k, n := range cs.perKey {
				if n != 1 && strings.HasSuffix(k, fmt.Sprintf("@%d", st.Ts)) {
					t.Errorf("%s ingested %d times", k, n)
				}
			}
			for _, ts := range cs.tsOf[2] {
				if ts <= st.Ts {
					t.Fatalf("stream ingested commit_ts %d <= S=%d", ts, st.Ts)
				}
			}
			rep := prog.Report(time.Now())
			if len(rep) != 1 || rep[0].State != "done" || rep[0].Rows != uint64(r.rows) || rep[0].RangesDone != rep[0].RangesTotal || rep[0].RangesTotal < 4 {
				t.Errorf("progress %+v", rep)
			}
			if !strings.Contains(log.String(), "snapshot shop.items at ts") {
				t.Errorf("no progress line in %q", log.String())
			}
		})
	}
}

// checkHeld plays TiDB's GC worker (once: announce a target far ahead)
// and checks PD's minimum service safe point is the snapshot's hold, S − 1.
// Concurrent callers wait for the announcement (sync.Once). The fake PD
// seeds gc_worker at 0, so a check after a failed announcement reads 0:
// the announcement is retried (a PD call can time out under load) and its
// error is returned to every caller, so the report names it instead of
// "minimum service safe point 0".
func checkHeld(r *snapRig, prog *snapshot.Progress, announce *sync.Once, announceErr *error) error {
	pdc := r.up.PD.PD.PD()
	announce.Do(func() {
		var err error
		for try := 0; try < 3; try++ {
			var far uint64
			if far, err = r.up.CurrentTs(r.ctx); err == nil {
				if _, err = pdc.UpdateServiceGCSafePoint(r.ctx, "gc_worker", 3600, far+1<<40); err == nil {
					break
				}
			}
		}
		if err != nil {
			*announceErr = fmt.Errorf("announcing the GC worker's target: %w", err)
		}
	})
	if *announceErr != nil {
		return *announceErr
	}
	min, err := pd.GCSafePoint(r.ctx, pdc)
	if err != nil {
		return err
	}
	if s := prog.Report(time.Now())[0].Ts; min != s-1 {
		return fmt.Errorf("PD's minimum service safe point %d during the snapshot at %d, want %d", min, s, s-1)
	}
	return nil
}

// phaseRec records PhaseHook calls.
type phaseRec struct {
	snapshotting atomic.Int64
	streaming    atomic.Bool
}

func (p *phaseRec) Snapshotting(PhaseProgress) { p.snapshotting.Add(1) }
func (p *phaseRec) Streaming()                 { p.streaming.Store(true) }

// startSupervisor starts a supervisor over the rig with cfg, closed at
// the end of the test, and checks that its snapshot read every row the
// table held at S (SN10: a DDL committed during the snapshot does not
// change what is read at S); the log collects its lines.
func (r *snapRig) startSupervisor(t *testing.T, cfg Config) (*Supervisor, *syncWriter) {
	t.Helper()
	log := &syncWriter{w: &bytes.Buffer{}}
	sup, err := StartSupervisor(r.ctx, r.up, r.emu, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Close() })
	if st := r.state(t); st.Tables[0].Rows() != uint64(r.rows) {
		t.Errorf("%d rows read at S, the table had %d", st.Tables[0].Rows(), r.rows)
	}
	return sup, log
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

var errKill = errors.New("killed by the test")

// TestSN_KillAndResume (SN6, SN7): the adapter stops at a random chunk of
// the snapshot (seeded; the seed is printed on failure), writes go on, and
// a new adapter on the same data dir resumes the ranges not acknowledged at
// the same S; the collection ends equal to the table.
func TestSN_KillAndResume(t *testing.T) {
	seeds := []int64{1, 2, 3}
	if s := os.Getenv("SFEMU_SNAPSHOT_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad SFEMU_SNAPSHOT_SEED %q", s)
		}
		seeds = []int64{v}
	}
	rows := snapRows(t) / 4
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d (rerun with SFEMU_SNAPSHOT_SEED=%d)", seed, seed)
				}
			})
			r := newSnapRig(t, false, seed, rows)
			r.split(t, 6)
			total := int(rows/200) + 6 // chunks of 200 rows over 6 ranges
			killAt := 1 + rand.New(rand.NewSource(seed)).Intn(total-1)
			var mu sync.Mutex
			n := 0
			kill := func(snapshot.Task, int) error {
				mu.Lock()
				defer mu.Unlock()
				n++
				if n == killAt {
					return errKill
				}
				return nil
			}
			_, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Concurrency: 3, ChunkRows: 200, AfterChunk: kill}))
			if !errors.Is(err, errKill) {
				t.Fatalf("start: %v, want the kill at chunk %d", err, killAt)
			}
			before := r.state(t)
			if before.Complete {
				t.Fatal("state complete after a kill")
			}
			for i := 0; i < 10; i++ {
				r.step(t)
			}
			a, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Concurrency: 3, ChunkRows: 200}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			after := r.state(t)
			if after.Ts != before.Ts || !after.Complete || after.Epoch <= before.Epoch {
				t.Fatalf("resumed state ts %d complete %v epoch %d; before ts %d epoch %d", after.Ts, after.Complete, after.Epoch, before.Ts, before.Epoch)
			}
			// Ranges acknowledged before the kill were not read again.
			var resent int
			cs := r.sinks[1]
			cs.mu.Lock() // the stream is ingesting meanwhile
			for k, c := range cs.perKey {
				if c > 0 && strings.HasSuffix(k, fmt.Sprintf("@%d", before.Ts)) {
					resent++
				}
			}
			cs.mu.Unlock()
			var acked uint64
			for _, tb := range before.Tables {
				acked += tb.Rows()
			}
			if uint64(resent)+acked != uint64(rows) {
				t.Errorf("resumed run ingested %d rows at S, %d were acknowledged before the kill, table has %d", resent, acked, rows)
			}
			r.finish(t, a)
		})
	}
}

// TestSN_RegionsSplitDuringSnapshot (SN2): over gRPC (PD's region cache,
// client-go's scans), a table of 16 regions is planned as 16 ranges; a
// region splits while the snapshot runs; every row arrives.
func TestSN_RegionsSplitDuringSnapshot(t *testing.T) {
	r := newSnapRig(t, true, 5, snapRows(t)/2)
	r.split(t, 16)
	var once sync.Once
	a, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Concurrency: 4, ChunkRows: 300, AfterChunk: func(snapshot.Task, int) error {
		once.Do(func() {
			// Split the last range's region in its middle: not read yet
			// (ranges are fed in key order).
			h := r.rows*15/16 + r.rows/32
			if _, _, err := r.up.Cluster.SplitRaw(tablecodec.EncodeIntRecordKey(nil, r.tid, h)); err != nil {
				t.Error(err)
			}
		})
		return nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	st := r.state(t)
	if n := len(st.Tables[0].Ranges); n != 16 {
		t.Errorf("%d ranges planned, want 16", n)
	}
	if st.Tables[0].Rows() != uint64(r.rows) {
		t.Errorf("%d rows read, want %d", st.Tables[0].Rows(), r.rows)
	}
	r.finish(t, a)
}

// TestSN_DDLDuringSnapshot (SN9, SN10): an ADD COLUMN in the middle of the
// snapshot (rows at S decoded with the schema at S, the stream applies the
// DDL after), and a TRUNCATE TABLE in the middle of another (the stream
// handles it as without a snapshot: the new table is followed in place,
// LT2).
func TestSN_DDLDuringSnapshot(t *testing.T) {
	for _, ddl := range []string{"add-column", "truncate"} {
		t.Run(ddl, func(t *testing.T) {
			r := newSnapRig(t, false, 9, snapRows(t)/4)
			r.split(t, 4)
			var once sync.Once
			cfg := r.config(t, SnapshotConfig{Concurrency: 2, ChunkRows: 300, AfterChunk: func(snapshot.Task, int) error {
				once.Do(func() {
					if ddl == "add-column" {
						r.exec(t, "ALTER TABLE shop.items ADD COLUMN extra INT DEFAULT 7")
						r.exec(t, fmt.Sprintf("INSERT INTO shop.items (id, v, note, body, extra) VALUES (%d, 1, 'after', 'ddl', 9)", r.rows+1000))
						r.exec(t, "UPDATE shop.items SET extra = 3 WHERE id = 1")
					} else {
						r.exec(t, "TRUNCATE TABLE shop.items")
						r.exec(t, "INSERT INTO shop.items VALUES (1, 1, 'after', 'truncate')")
					}
				})
				return nil
			}})
			sup, log := r.startSupervisor(t, cfg)
			first := sup.Adapter()
			r.exec(t, fmt.Sprintf("INSERT INTO shop.items (id, v, note, body) VALUES (%d, 2, 'later', 'x')", r.rows+2000))
			final, err := r.up.CurrentTs(r.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.WaitSafe(r.ctx, r.emu, snapTables, final, 60*time.Second); err != nil {
				t.Fatalf("%v (supervisor: %v)", err, sup.Err())
			}
			expectConsistent(t, r.ctx, r.up, r.emu, snapTables, final)
			changes := strings.Count(log.String(), "changed the tables of collection")
			if want := map[string]int{"truncate": 1}[ddl]; changes != want || sup.Adapter() != first {
				t.Errorf("%d table-set changes followed, want %d, in place", changes, want)
			}
			if err := sup.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSN_GCExpiredRestartsSnapshot (SN7): the snapshot stops, GC passes S
// while nothing holds it, and the next start says so, drops the
// collection and snapshots again at a new S; the collection ends equal to
// the table (rows deleted in between are gone).
func TestSN_GCExpiredRestartsSnapshot(t *testing.T) {
	r := newSnapRig(t, false, 4, snapRows(t)/8)
	r.split(t, 3)
	n := 0
	_, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Concurrency: 1, ChunkRows: 200, AfterChunk: func(snapshot.Task, int) error {
		n++
		if n == 3 {
			return errKill
		}
		return nil
	}}))
	if !errors.Is(err, errKill) {
		t.Fatalf("start: %v", err)
	}
	old := r.state(t)
	// Rows read before the stop are deleted upstream: after the restart
	// they must not survive in the collection.
	r.exec(t, "DELETE FROM shop.items WHERE id < 100")
	now, err := r.up.CurrentTs(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.up.Cluster.GC(now)
	var log syncWriter
	log.w = &bytes.Buffer{}
	a, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Concurrency: 2, ChunkRows: 200, Log: &log}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	st := r.state(t)
	if st.Ts <= now || !st.Complete {
		t.Fatalf("new snapshot ts %d (GC at %d), complete %v", st.Ts, now, st.Complete)
	}
	msg := fmt.Sprintf("the snapshot at ts %d of shop.items cannot resume: the GC safe point %d passed it", old.Ts, now)
	if !strings.Contains(log.String(), msg) || !strings.Contains(log.String(), "restarting their snapshot at a new ts") {
		t.Errorf("log %q lacks %q", log.String(), msg)
	}
	r.finish(t, a)
}

// TestSN_NeverAndStartTs (SN1): --snapshot=never keeps today's behaviour
// (no initial load), and so does an explicit start ts; an interrupted
// snapshot refuses never.
func TestSN_NeverAndStartTs(t *testing.T) {
	r := newSnapRig(t, false, 2, 500)
	cfg := r.config(t, SnapshotConfig{})
	cfg.Snapshot.Mode = SnapshotNever
	a, err := Start(r.ctx, r.up, r.emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if _, err := os.Stat(filepath.Join(r.dir, snapshot.FileName)); !os.IsNotExist(err) {
		t.Errorf("never wrote a snapshot state: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	docs, err := verify.Documents(r.ctx, r.emu, "shop.items")
	if err != nil || len(docs) != 0 {
		t.Fatalf("never loaded %d documents (%v)", len(docs), err)
	}

	r2 := newSnapRig(t, false, 2, 500)
	_, err = Start(r2.ctx, r2.up, r2.emu, r2.config(t, SnapshotConfig{ChunkRows: 100, AfterChunk: func(snapshot.Task, int) error { return errKill }}))
	if !errors.Is(err, errKill) {
		t.Fatal(err)
	}
	cfg = r2.config(t, SnapshotConfig{})
	cfg.Snapshot.Mode = SnapshotNever
	if _, err := Start(r2.ctx, r2.up, r2.emu, cfg); err == nil || !strings.Contains(err.Error(), "is not complete") {
		t.Fatalf("never over an interrupted snapshot: %v", err)
	}
}

// TestSN_AlwaysResnapshots (SN1): always drops the collection and reads
// the table again at a new S, so a document whose row was deleted while
// no adapter ran is gone.
func TestSN_AlwaysResnapshots(t *testing.T) {
	r := newSnapRig(t, false, 3, 2000)
	a, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	first := r.state(t)
	r.exec(t, "DELETE FROM shop.items WHERE id < 10")
	a, err = Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Mode: SnapshotAlways}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if st := r.state(t); st.Ts <= first.Ts {
		t.Fatalf("always kept S %d", st.Ts)
	}
	r.finish(t, a)
}

// TestSN_PartitionedTable (SN2, SN5, N41): every physical partition of a
// partitioned table is read as its own partition, one progress line for
// the table; the collection equals the table.
func TestSN_PartitionedTable(t *testing.T) {
	r := newSnapRig(t, false, 6, 100)
	r.exec(t, "CREATE TABLE shop.events (id BIGINT PRIMARY KEY, kind VARCHAR(16)) PARTITION BY HASH (id) PARTITIONS 4")
	for i := 0; i < 300; i += 50 {
		var vals []string
		for j := i; j < i+50; j++ {
			vals = append(vals, fmt.Sprintf("(%d, 'k%d')", j, j%3))
		}
		r.exec(t, "INSERT INTO shop.events VALUES "+strings.Join(vals, ", "))
	}
	tables := []TableRef{{DB: "shop", Table: "events"}}
	prog := &snapshot.Progress{}
	cfg := r.config(t, SnapshotConfig{Progress: prog})
	cfg.Tables = tables
	a, err := Start(r.ctx, r.up, r.emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	st := r.state(t)
	if len(st.Tables) != 4 {
		t.Fatalf("%d physical tables planned, want 4", len(st.Tables))
	}
	if rep := prog.Report(time.Now()); len(rep) != 1 || rep[0].Rows != 300 || rep[0].State != "done" {
		t.Fatalf("progress %+v", rep)
	}
	r.exec(t, "UPDATE shop.events SET kind = 'late' WHERE id < 10")
	final, err := r.up.CurrentTs(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(r.ctx, r.emu, tables, final, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSN14_SingleRegionReadByEveryWorker: a table of one region (the
// region TiDB gives a new table) is planned as the concurrency's number of
// ranges split by keys at S, over gRPC as in process; every range holds
// rows, and the collection equals the table after the stream.
func TestSN14_SingleRegionReadByEveryWorker(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(fmt.Sprintf("wire=%v", wire), func(t *testing.T) {
			r := newSnapRig(t, wire, 14, 4000)
			a, err := Start(r.ctx, r.up, r.emu, r.config(t, SnapshotConfig{Concurrency: 3}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			st := r.state(t)
			if n := len(st.Tables[0].Ranges); n != 3 {
				t.Fatalf("SN14: a one-region table at concurrency 3 was planned as %d ranges, want 3", n)
			}
			for i, rg := range st.Tables[0].Ranges {
				if rg.Rows < 4000/3/2 {
					t.Errorf("SN14: range %d holds %d of 4000 rows", i, rg.Rows)
				}
			}
			r.finish(t, a)
		})
	}
}
