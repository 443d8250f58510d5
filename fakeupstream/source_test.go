package fakeupstream_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomized source tests (0: a fixed set of seeds)")

const tableID = 100

func rowKey(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tableID, h) }

// recorder is a kvevent.Consumer that checks the consume contract as rows
// arrive: resolved ts only increases, and no row at or below an emitted
// resolved ts arrives later.
type recorder struct {
	rows       []string
	log        []string
	resolved   uint64
	violations []string
	seen       map[string]int
}

func newRecorder() *recorder { return &recorder{seen: map[string]int{}} }

func (r *recorder) ConsumeKV(entries []kvevent.RawKVEntry) {
	for _, e := range entries {
		if e.CRTs <= r.resolved {
			r.violations = append(r.violations, fmt.Sprintf("row %x@%d after resolved %d", e.Key, e.CRTs, r.resolved))
		}
		id := fmt.Sprintf("%x@%d %s v=%s", e.Key, e.CRTs, e.OpType, e.Value)
		r.seen[id]++
		r.rows = append(r.rows, id)
		r.log = append(r.log, id+fmt.Sprintf(" old=%s region=%d", e.OldValue, e.RegionID))
	}
}

func (r *recorder) AdvanceResolvedTs(ts uint64) {
	if ts <= r.resolved {
		r.violations = append(r.violations, fmt.Sprintf("resolved ts %d after %d", ts, r.resolved))
	}
	r.resolved = ts
	r.log = append(r.log, fmt.Sprintf("resolved %d", ts))
}

func newCluster(t testing.TB, seed int64) *fakeupstream.Cluster {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: seed, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 50}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Rule SRC-1: rows of the span (and only of the span) arrive, resolved ts
// passes the last commit.
func TestSourceBasic(t *testing.T) {
	c := newCluster(t, 1)
	c.Put(rowKey(1), []byte("before"))
	start := c.Oracle().Next()
	c.SplitRaw(rowKey(50))
	src := c.NewSource(fakeupstream.SourceConfig{})
	rec := newRecorder()
	span := tablecodec.TableRecordSpan(0, false, tableID)
	if err := src.Subscribe(context.Background(), 1, span, start, rec); err != nil {
		t.Fatal(err)
	}
	ts1, _ := c.Put(rowKey(1), []byte("a"))
	ts2, _ := c.Put(rowKey(60), []byte("b"))
	c.Put(tablecodec.EncodeIntRecordKey(nil, tableID+1, 1), []byte("other table"))
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	c.Advance(100 * time.Millisecond)
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(rec.rows)
	want := []string{
		fmt.Sprintf("%x@%d put v=a", rowKey(1), ts1),
		fmt.Sprintf("%x@%d put v=b", rowKey(60), ts2),
	}
	sort.Strings(want)
	if strings.Join(rec.rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(rec.rows, "\n"), strings.Join(want, "\n"))
	}
	if rec.resolved <= ts2 {
		t.Fatalf("resolved ts %d did not pass the last commit %d", rec.resolved, ts2)
	}
	if len(rec.violations) > 0 {
		t.Fatal(rec.violations)
	}
}

// Rule SRC-3: a start ts below the GC safe point is refused.
func TestSourceRejectsStartBelowGC(t *testing.T) {
	c := newCluster(t, 1)
	old := c.Oracle().Next()
	c.GC(c.Oracle().Next())
	src := c.NewSource(fakeupstream.SourceConfig{})
	err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), old, newRecorder())
	if err == nil || !strings.Contains(err.Error(), "GC safe point") {
		t.Fatalf("want GC error, got %v", err)
	}
}

type change struct {
	id string
}

// chaos runs a seeded workload with every fault hook against one
// subscription and returns the consumer's log and the expected rows.
func chaos(t *testing.T, seed int64, steps int) (*recorder, map[string]bool, uint64) {
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t, seed)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	for h := int64(0); h < 20; h++ {
		c.Put(rowKey(h), []byte("old"))
	}
	start := c.Oracle().Next()
	src := c.NewSource(fakeupstream.SourceConfig{})
	rec := newRecorder()
	if err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), start, rec); err != nil {
		fail("%v", err)
	}
	want := map[string]bool{}
	var maxCommit uint64
	record := func(key []byte, ts uint64, del bool, v string) {
		if del {
			want[fmt.Sprintf("%x@%d delete v=", key, ts)] = true
		} else {
			want[fmt.Sprintf("%x@%d put v=%s", key, ts, v)] = true
		}
		maxCommit = max(maxCommit, ts)
	}
	type open struct {
		txn  *fakeupstream.Txn
		vals map[string]string
	}
	var inflight []open
	down := uint64(0)
	for step := 0; step < steps; step++ {
		h := int64(rng.Intn(40))
		switch op := rng.Intn(16); op {
		case 0, 1, 2: // 1PC put or delete
			tx := c.Begin()
			del := rng.Intn(4) == 0
			v := fmt.Sprintf("s%d", step)
			if del {
				tx.Delete(rowKey(h))
			} else {
				tx.Set(rowKey(h), []byte(v))
			}
			ts, err := tx.Commit1PC()
			if err == nil {
				record(rowKey(h), ts, del, v)
			}
		case 3, 4: // start a 2PC txn, prewrite now, commit later
			tx := c.Begin()
			vals := map[string]string{}
			for i := 0; i < 1+rng.Intn(3); i++ {
				k := rowKey(int64(rng.Intn(40)))
				v := fmt.Sprintf("t%d.%d", step, i)
				tx.Set(k, []byte(v))
				vals[string(k)] = v
			}
			if rng.Intn(2) == 0 {
				tx.UseAsyncCommit()
			}
			if err := tx.Prewrite(); err != nil {
				tx.Rollback()
				continue
			}
			inflight = append(inflight, open{tx, vals})
		case 5: // finish an in-flight txn: commit, rollback, or primary only
			if len(inflight) == 0 {
				continue
			}
			i := rng.Intn(len(inflight))
			o := inflight[i]
			inflight = append(inflight[:i], inflight[i+1:]...)
			switch rng.Intn(4) {
			case 0:
				var ce *mvcc.TxnCommittedError
				if err := o.txn.Rollback(); errors.As(err, &ce) {
					// A resolver already committed the async txn.
					for k, v := range o.vals {
						record([]byte(k), ce.CommitTs, false, v)
					}
				}
			case 1: // commit the primary only; the resolver finishes the rest
				ts := c.Oracle().Next()
				if o.txn.MinCommitTs() != 0 {
					ts = o.txn.MinCommitTs() // async: the commit ts is fixed
				}
				if err := o.txn.CommitKeys(ts, o.txn.Primary()); err != nil {
					if errors.As(err, new(*mvcc.TxnRolledBackError)) {
						continue // a resolver rolled the expired txn back
					}
					fail("primary commit: %v", err)
				}
				for k, v := range o.vals {
					record([]byte(k), ts, false, v)
				}
			default:
				ts, err := o.txn.Commit()
				if errors.As(err, new(*mvcc.TxnRolledBackError)) {
					continue
				}
				if err != nil {
					fail("commit: %v", err)
				}
				for k, v := range o.vals {
					record([]byte(k), ts, false, v)
				}
			}
		case 6: // split
			c.SplitRaw(rowKey(h))
		case 7: // merge two neighbours
			rs := c.Regions()
			if len(rs) > 1 {
				i := rng.Intn(len(rs) - 1)
				c.Merge(rs[i].ID, rs[i+1].ID)
			}
		case 8: // leader move
			rs := c.Regions()
			r := rs[rng.Intn(len(rs))]
			c.TransferLeader(r.ID, uint64(1+rng.Intn(3)))
		case 9: // store down / up
			if down == 0 {
				down = uint64(1 + rng.Intn(3))
				c.StoreDown(down)
			} else {
				c.StoreUp(down)
				down = 0
			}
		case 10:
			c.DropStreams(uint64(1 + rng.Intn(3)))
		case 11:
			rs := c.Regions()
			c.DuplicateWindow(rs[rng.Intn(len(rs))].ID, 1+rng.Intn(10))
		case 12:
			rs := c.Regions()
			c.HoldRegion(rs[rng.Intn(len(rs))].ID, time.Duration(1+rng.Intn(300))*time.Millisecond)
		case 13:
			c.Advance(time.Duration(1+rng.Intn(120)) * time.Millisecond)
		case 14:
			for i := 0; i < rng.Intn(5); i++ {
				c.Step()
			}
		case 15:
			if rng.Intn(3) == 0 {
				// Resolve what is stuck (expired abandoned locks).
				if _, err := c.ResolveLocks(nil, nil, c.Oracle().Next()); err != nil {
					fail("resolve: %v", err)
				}
			}
		}
		if rng.Intn(3) == 0 {
			if err := src.Pump(); err != nil {
				fail("step %d: %v", step, err)
			}
		}
		if err := c.CheckTopology(); err != nil {
			fail("%v", err)
		}
	}
	// Finish: every in-flight txn commits, stores up, locks resolved.
	for _, o := range inflight {
		ts, err := o.txn.Commit()
		if errors.As(err, new(*mvcc.TxnRolledBackError)) {
			continue
		}
		if err != nil {
			fail("final commit: %v", err)
		}
		for k, v := range o.vals {
			record([]byte(k), ts, false, v)
		}
	}
	if down != 0 {
		c.StoreUp(down)
	}
	for _, r := range c.Regions() {
		c.ReleaseRegion(r.ID)
	}
	c.Advance(10 * time.Second)
	if _, err := c.ResolveLocks(nil, nil, c.Oracle().Next()); err != nil {
		fail("resolve: %v", err)
	}
	for i := 0; i < 5; i++ {
		c.Advance(100 * time.Millisecond)
		if err := src.Pump(); err != nil {
			fail("final pump: %v", err)
		}
	}
	return rec, want, maxCommit
}

// Rule SRC-1: under every fault hook the consumer receives each committed
// change of the span exactly once, never at or below an emitted resolved
// ts, with resolved ts strictly increasing and finally above every commit.
// rule: T15 (the in-process transport under the one logpuller.Driver)
func TestSourceChaos(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5}
	if *seedFlag != 0 {
		seeds = []int64{*seedFlag}
	}
	for _, seed := range seeds {
		rec, want, maxCommit := chaos(t, seed, 1500)
		if len(rec.violations) > 0 {
			t.Fatalf("seed %d: contract violations: %v", seed, rec.violations[:min(5, len(rec.violations))])
		}
		for id, n := range rec.seen {
			if n > 1 {
				t.Errorf("seed %d: %s delivered %d times", seed, id, n)
			}
			if !want[id] {
				t.Errorf("seed %d: unexpected row %s", seed, id)
			}
		}
		for id := range want {
			if rec.seen[id] == 0 {
				t.Errorf("seed %d: missing row %s", seed, id)
			}
		}
		if rec.resolved <= maxCommit {
			t.Errorf("seed %d: final resolved ts %d not above last commit %d", seed, rec.resolved, maxCommit)
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("seed %d: %d rows, resolved %d", seed, len(rec.rows), rec.resolved)
	}
}

// Rule SRC-2: the same seed gives the same consumer log; another seed a
// different one.
func TestSourceDeterminism(t *testing.T) {
	seed := int64(11)
	if *seedFlag != 0 {
		seed = *seedFlag
	}
	a, _, _ := chaos(t, seed, 400)
	b, _, _ := chaos(t, seed, 400)
	if strings.Join(a.log, "\n") != strings.Join(b.log, "\n") {
		t.Fatalf("seed %d: two runs differ", seed)
	}
	d, _, _ := chaos(t, seed+1, 400)
	if strings.Join(a.log, "\n") == strings.Join(d.log, "\n") {
		t.Fatalf("seeds %d and %d gave the same log", seed, seed+1)
	}
}

// Rule SRC-3: cancelling a subscription's ctx stops its deliveries; other
// subscriptions on the same streams continue.
func TestSourceCancelSubscription(t *testing.T) {
	c := newCluster(t, 1)
	src := c.NewSource(fakeupstream.SourceConfig{})
	defer src.Close()
	ctx, cancel := context.WithCancel(context.Background())
	a, b := newRecorder(), newRecorder()
	start := c.Oracle().Next()
	if err := src.Subscribe(ctx, 1, tablecodec.TableRecordSpan(0, false, tableID), start, a); err != nil {
		t.Fatal(err)
	}
	if err := src.Subscribe(context.Background(), 2, tablecodec.TableRecordSpan(0, false, tableID+1), start, b); err != nil {
		t.Fatal(err)
	}
	c.Put(rowKey(1), []byte("x"))
	c.Put(tablecodec.EncodeIntRecordKey(nil, tableID+1, 1), []byte("y"))
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	if len(a.rows) != 1 || len(b.rows) != 1 {
		t.Fatalf("before cancel: %d/%d rows", len(a.rows), len(b.rows))
	}
	cancel()
	c.Put(rowKey(2), []byte("x"))
	c.Put(tablecodec.EncodeIntRecordKey(nil, tableID+1, 2), []byte("y"))
	c.Advance(100 * time.Millisecond)
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	if len(a.rows) != 1 || len(b.rows) != 2 {
		t.Fatalf("after cancel: %d/%d rows", len(a.rows), len(b.rows))
	}
	if _, ok := src.SpanStats(1); ok {
		t.Fatal("cancelled subscription still listed")
	}
	if st, ok := src.SpanStats(2); !ok || st.Rows != 2 {
		t.Fatalf("stats of the live subscription: %+v %v", st, ok)
	}
}

// Rule SRC-3: a protocol violation (a row at or below the region's resolved
// ts, i.e. data loss) is fatal: Pump returns it and keeps returning it.
func TestSourceFatalIsSticky(t *testing.T) {
	c := newCluster(t, 1)
	src := c.NewSource(fakeupstream.SourceConfig{})
	rec := newRecorder()
	start := c.Oracle().Next()
	if err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), start, rec); err != nil {
		t.Fatal(err)
	}
	c.Advance(100 * time.Millisecond)
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	c.Advance(100 * time.Millisecond)
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	if rec.resolved <= start {
		t.Fatalf("resolved ts did not advance: %d", rec.resolved)
	}
	r := c.LocateRaw(rowKey(1))
	late := &cdcpb.Event_Row{Type: cdcpb.Event_COMMITTED, OpType: cdcpb.Event_Row_PUT, Key: rowKey(1), Value: []byte("lost"),
		StartTs: start, CommitTs: start + 1}
	if n := c.InjectRows(r.ID, late); n != 1 {
		t.Fatalf("injected into %d subscriptions", n)
	}
	err := src.Pump()
	if err == nil || !strings.Contains(err.Error(), "resolved") {
		t.Fatalf("want a fatal data-loss error, got %v", err)
	}
	if err2 := src.Pump(); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("fatal error not sticky: %v", err2)
	}
	if len(rec.rows) != 0 {
		t.Fatalf("violating row delivered: %v", rec.rows)
	}
}

// Rule F-10 / SRC-1: a retryable region error (server busy, congested,
// unknown) makes the Source re-subscribe; rows re-sent by the new scan are
// suppressed, nothing is lost.
func TestSourceRetriesRegionErrors(t *testing.T) {
	c := newCluster(t, 1)
	src := c.NewSource(fakeupstream.SourceConfig{})
	rec := newRecorder()
	start := c.Oracle().Next()
	if err := src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, tableID), start, rec); err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, e := range []*cdcpb.Error{
		{ServerIsBusy: &errorpb.ServerIsBusy{Reason: "too many pending incremental scans", BackoffMs: 10}},
		{Congested: &cdcpb.Congested{RegionId: 1}},
		{},
	} {
		c.Put(rowKey(int64(i)), []byte("v"))
		want++
		if err := src.Pump(); err != nil {
			t.Fatal(err)
		}
		if n := c.FailRegion(c.LocateRaw(rowKey(0)).ID, e); n != 1 {
			t.Fatalf("failed %d subscriptions", n)
		}
		c.Put(rowKey(int64(100+i)), []byte("w"))
		want++
		if err := src.Pump(); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(200 * time.Millisecond)
	if err := src.Pump(); err != nil {
		t.Fatal(err)
	}
	if len(rec.rows) != want || len(rec.violations) > 0 {
		t.Fatalf("rows %d want %d, violations %v", len(rec.rows), want, rec.violations)
	}
	st, _ := src.SpanStats(1)
	if st.RegionFailures != 3 {
		t.Fatalf("stats %+v", st)
	}
}
