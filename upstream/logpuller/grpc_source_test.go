package logpuller

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// syncRecorder is a concurrency-safe consumer that checks the consume
// contract as it goes: resolved ts only increases and no row at or below
// an emitted resolved ts arrives later; it counts each row identity.
type syncRecorder struct {
	mu         sync.Mutex
	seen       map[string]int
	order      []string
	resolved   uint64
	violations []string
}

func newSyncRecorder() *syncRecorder { return &syncRecorder{seen: map[string]int{}} }

func (r *syncRecorder) ConsumeKV(es []kvevent.RawKVEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range es {
		if e.CRTs <= r.resolved {
			r.violations = append(r.violations, fmt.Sprintf("row %x@%d after resolved %d", e.Key, e.CRTs, r.resolved))
		}
		id := fmt.Sprintf("%x@%d=%s", e.Key, e.CRTs, e.Value)
		r.seen[id]++
		r.order = append(r.order, id)
	}
}

func (r *syncRecorder) AdvanceResolvedTs(ts uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts <= r.resolved {
		r.violations = append(r.violations, fmt.Sprintf("resolved %d after %d", ts, r.resolved))
	}
	r.resolved = ts
}

func (r *syncRecorder) rows() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *syncRecorder) resolvedTs() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolved
}

// check fails on contract violations and on any row delivered twice.
func (r *syncRecorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		t.Error(v)
	}
	for id, n := range r.seen {
		if n != 1 {
			t.Errorf("row %s delivered %d times", id, n)
		}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type runningSource struct {
	src    *GRPCSource
	cancel context.CancelFunc
	done   chan error
}

func startGRPCSource(t *testing.T, cfg TransportConfig) *runningSource {
	t.Helper()
	if cfg.StoreReconnectBackoff == 0 {
		cfg.StoreReconnectBackoff = 20 * time.Millisecond
	}
	if cfg.RegionRetryInterval == 0 {
		cfg.RegionRetryInterval = 10 * time.Millisecond
	}
	if cfg.BusyBackoff == 0 {
		cfg.BusyBackoff = 20 * time.Millisecond
	}
	src, err := NewGRPCSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningSource{src: src, cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- src.Run(ctx) }()
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

func (rs *runningSource) stop(t *testing.T) error {
	t.Helper()
	rs.cancel()
	select {
	case err, ok := <-rs.done:
		if ok {
			close(rs.done)
		}
		_ = rs.src.Close()
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

func (rs *runningSource) subscribe(t *testing.T, ctx context.Context, id uint64, span kvevent.Span, startTs uint64) *syncRecorder {
	t.Helper()
	rec := newSyncRecorder()
	if err := rs.src.Subscribe(ctx, id, span, startTs, rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func tsAt(ms int64) uint64 { return uint64(ms) << 18 }

// T1, T3-T6: over EventFeedV2 rows (scan and live) and resolved ts arrive
// for a span covering regions on two stores; every request carries the
// required fields; both spans share one stream per store.
func TestGRPCRowsAndResolvedV2(t *testing.T) {
	c := newDblCluster(t, 2, false)
	c.split(1, 2, rawKey(1, 50))
	c.mu.Lock()
	c.region(2).leader = 2
	c.mu.Unlock()
	start := tsAt(1000)
	c.commit(rawKey(1, 1), []byte("old"), tsAt(900), tsAt(950)) // below start
	c.commit(rawKey(1, 2), []byte("scan"), tsAt(1001), tsAt(1002))
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	rec := rs.subscribe(t, context.Background(), 7, tableSpan(1), start)
	rec2 := rs.subscribe(t, context.Background(), 8, tableSpan(2), start)
	eventually(t, "three registrations", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 3 })
	c.commit(rawKey(1, 60), []byte("live-right"), tsAt(1003), tsAt(1004))
	c.commit(rawKey(1, 3), []byte("live-left"), tsAt(1005), tsAt(1006))
	c.commit(rawKey(2, 3), []byte("other-table"), tsAt(1005), tsAt(1006))
	c.resolve(tsAt(1010))
	eventually(t, "resolved ts", func() bool { return rec.resolvedTs() == tsAt(1010) && rec2.resolvedTs() == tsAt(1010) })
	if rec.rows() != 3 || rec2.rows() != 1 {
		t.Fatalf("rows: span1 %v span2 %v", rec.order, rec2.order)
	}
	rec.check(t)
	rec2.check(t)
	for _, v := range c.violations() {
		t.Error(v)
	}
	if n := c.streamCount(); n != 2 {
		t.Errorf("want one multiplexed stream per store, got %d streams", n)
	}
	if got := c.requestCount(func(r *cdcpb.ChangeDataRequest) bool { return r.CheckpointTs == start && r.RegionId != 0 }); got != 3 {
		t.Errorf("want 3 requests with checkpoint = start ts, got %d", got)
	}
}

// T2: a server answering EventFeedV2 with Unimplemented is spoken to with
// v1 EventFeed: one stream per (span, store), so two spans sharing a
// region never register it twice on one stream; fresh request ids.
func TestGRPCFallbackToV1(t *testing.T) {
	c := newDblCluster(t, 1, true)
	start := tsAt(1000)
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	rec := rs.subscribe(t, context.Background(), 1, tableSpan(1), start)
	rec2 := rs.subscribe(t, context.Background(), 2, tableSpan(2), start)
	eventually(t, "two v1 registrations", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })
	c.commit(rawKey(1, 1), []byte("a"), tsAt(1001), tsAt(1002))
	c.commit(rawKey(2, 1), []byte("b"), tsAt(1001), tsAt(1002))
	c.resolve(tsAt(1005))
	eventually(t, "resolved on both", func() bool { return rec.resolvedTs() == tsAt(1005) && rec2.resolvedTs() == tsAt(1005) })
	if rec.rows() != 1 || rec2.rows() != 1 {
		t.Fatalf("rows %v / %v", rec.order, rec2.order)
	}
	for _, v := range c.violations() {
		t.Error(v)
	}
	if n := c.streamCount(); n != 2 {
		t.Errorf("want a v1 stream per span, got %d", n)
	}
	if st := rs.src.Stats(); st.V1Fallbacks != 1 {
		t.Errorf("v1 fallbacks = %d, want 1", st.V1Fallbacks)
	}
	ids := map[uint64]bool{}
	c.mu.Lock()
	for _, r := range c.requests {
		if ids[r.RequestId] {
			t.Errorf("request id %d reused on v1", r.RequestId)
		}
		ids[r.RequestId] = true
	}
	c.mu.Unlock()
	rec.check(t)
	rec2.check(t)
}

// T7: not_leader moves the region to the named store (UpdateLeader);
// epoch_not_match after a split re-locates and subscribes both halves
// from the failed region's resolved ts; server_is_busy waits backoff_ms;
// an error kind the proto does not know (all fields nil) is retried.
func TestGRPCRegionErrors(t *testing.T) {
	c := newDblCluster(t, 2, false)
	start := tsAt(1000)
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	rec := rs.subscribe(t, context.Background(), 1, tableSpan(1), start)
	eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 1 })
	c.commit(rawKey(1, 1), []byte("v1"), tsAt(1001), tsAt(1002))
	c.resolve(tsAt(1003))
	eventually(t, "resolved 1003", func() bool { return rec.resolvedTs() == tsAt(1003) })

	// Leader move.
	c.setLeader(1, 2)
	eventually(t, "re-registered on store 2", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.regs) == 1 && c.regs[0].st.store.id == 2
	})
	if got := c.requestCount(func(r *cdcpb.ChangeDataRequest) bool { return r.RegionId == 1 && r.CheckpointTs == tsAt(1003) }); got != 1 {
		t.Errorf("re-subscription must start at the region's resolved ts 1003: %d requests", got)
	}

	// Split: both halves subscribed.
	c.split(1, 2, rawKey(1, 50))
	eventually(t, "two halves", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })

	// Busy with backoff_ms, then unknown error, on the next re-subscribe.
	c.queueError(2, &cdcpb.Error{ServerIsBusy: &errorpb.ServerIsBusy{Reason: "too many scans", BackoffMs: 30}})
	c.queueError(2, &cdcpb.Error{})
	c.queueError(2, &cdcpb.Error{Congested: &cdcpb.Congested{RegionId: 2}})
	c.failRegion(2, &cdcpb.Error{RegionNotFound: nil}) // unknown: retried
	eventually(t, "region 2 back", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })
	c.commit(rawKey(1, 60), []byte("v2"), tsAt(1010), tsAt(1011))
	c.resolve(tsAt(1020))
	eventually(t, "resolved 1020", func() bool { return rec.resolvedTs() == tsAt(1020) })
	if rec.rows() != 2 {
		t.Fatalf("rows %v", rec.order)
	}
	rec.check(t)
	st := rs.src.Stats()
	for _, r := range []RetryReason{RetryNotLeader, RetryEpochNotMatch, RetryServerIsBusy, RetryUnknownError, RetryCongested} {
		if st.RegionRetries[r] == 0 {
			t.Errorf("no %s retry counted: %v", r, st.RegionRetries)
		}
	}
	c.locator.mu.Lock()
	if len(c.locator.leaderCalls) == 0 || len(c.locator.invalidated) == 0 {
		t.Errorf("locator not told: leader calls %v invalidated %v", c.locator.leaderCalls, c.locator.invalidated)
	}
	c.locator.mu.Unlock()
	for _, v := range c.violations() {
		t.Error(v)
	}
}

// T8: a stream reset by the server fails every region on it; after the
// reconnect backoff they are re-subscribed from their resolved ts, and the
// rows TiKV re-sends (above the resolved ts) are suppressed.
func TestGRPCStreamResetDuplicatesSuppressed(t *testing.T) {
	c := newDblCluster(t, 1, false)
	c.split(1, 2, rawKey(1, 50))
	start := tsAt(1000)
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	rec := rs.subscribe(t, context.Background(), 1, tableSpan(1), start)
	eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })
	c.resolve(tsAt(1001))
	eventually(t, "resolved 1001", func() bool { return rec.resolvedTs() == tsAt(1001) })
	c.commit(rawKey(1, 1), []byte("a"), tsAt(1002), tsAt(1003))
	c.commit(rawKey(1, 70), []byte("b"), tsAt(1002), tsAt(1004))
	eventually(t, "two rows", func() bool { return rec.rows() == 2 })
	streamsBefore := rs.src.Stats().StreamsOpened
	if n := c.resetStreams(1); n != 1 {
		t.Fatalf("reset %d streams", n)
	}
	eventually(t, "re-registered", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.regs) == 2 && rs.src.Stats().StreamsOpened > streamsBefore
	})
	// The re-scan from checkpoint 1001 re-sent both rows as COMMITTED.
	c.commit(rawKey(1, 2), []byte("c"), tsAt(1005), tsAt(1006))
	c.resolve(tsAt(1010))
	eventually(t, "resolved 1010", func() bool { return rec.resolvedTs() == tsAt(1010) })
	if rec.rows() != 3 {
		t.Fatalf("rows %v", rec.order)
	}
	rec.check(t)
	if rs.src.Stats().StreamFailures == 0 {
		t.Error("stream failure not counted")
	}
	if got := c.requestCount(func(r *cdcpb.ChangeDataRequest) bool { return r.CheckpointTs == tsAt(1001) }); got != 2 {
		t.Errorf("want both regions re-subscribed from 1001, got %d", got)
	}
}

// T7: an epoch_not_match storm (PD keeps handing out the old epoch for a
// while) ends once the locator catches up; nothing is lost or repeated.
func TestGRPCEpochNotMatchStorm(t *testing.T) {
	c := newDblCluster(t, 1, false)
	c.locator.stale = map[uint64]int{1: 25}
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	c.commit(rawKey(1, 1), []byte("a"), tsAt(1001), tsAt(1002))
	rec := rs.subscribe(t, context.Background(), 1, tableSpan(1), tsAt(1000))
	eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 1 })
	c.resolve(tsAt(1003))
	eventually(t, "resolved", func() bool { return rec.resolvedTs() == tsAt(1003) })
	if got := rs.src.Stats().RegionRetries[RetryEpochNotMatch]; got != 25 {
		t.Errorf("epoch_not_match retries = %d, want 25", got)
	}
	if rec.rows() != 1 {
		t.Fatalf("rows %v", rec.order)
	}
	rec.check(t)
}

// T11: a fatal answer (duplicate_request, cluster id mismatch) stops Run
// with an error naming it.
func TestGRPCFatalStopsRun(t *testing.T) {
	c := newDblCluster(t, 1, false)
	c.queueError(1, &cdcpb.Error{ClusterIdMismatch: &cdcpb.ClusterIDMismatch{Current: 1, Request: 2}})
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	rs.subscribe(t, context.Background(), 1, tableSpan(1), tsAt(1000))
	select {
	case err := <-rs.done:
		close(rs.done)
		var fe *FatalError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "cluster_id_mismatch") {
			t.Fatalf("want a FatalError naming cluster_id_mismatch, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop on a fatal error")
	}
}

// T9: cancelling a subscription sends Deregister with its request id on
// V2 and stops delivery; on v1 its streams are closed.
func TestGRPCDeregisterOnCancel(t *testing.T) {
	for _, v1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			c := newDblCluster(t, 1, v1)
			rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
			ctx, cancel := context.WithCancel(context.Background())
			rec := rs.subscribe(t, ctx, 1, tableSpan(1), tsAt(1000))
			keep := rs.subscribe(t, context.Background(), 2, tableSpan(2), tsAt(1000))
			eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })
			cancel()
			rs.subscribe(t, context.Background(), 3, tableSpan(3), tsAt(1000)) // wakes the loop
			eventually(t, "dropped on the server", func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, r := range c.regs {
					if r.st.store != nil && r.reqID == 1 && !v1 {
						return false
					}
				}
				return len(c.regs) == 2
			})
			if !v1 {
				if got := c.requestCount(func(r *cdcpb.ChangeDataRequest) bool {
					_, ok := r.Request.(*cdcpb.ChangeDataRequest_Deregister_)
					return ok && r.RequestId == 1
				}); got != 1 {
					t.Errorf("deregister requests for id 1: %d", got)
				}
			}
			c.commit(rawKey(1, 1), []byte("x"), tsAt(1001), tsAt(1002))
			c.commit(rawKey(2, 1), []byte("y"), tsAt(1001), tsAt(1002))
			c.resolve(tsAt(1003))
			eventually(t, "kept span resolved", func() bool { return keep.resolvedTs() == tsAt(1003) })
			if rec.rows() != 0 || keep.rows() != 1 {
				t.Fatalf("cancelled span got %v, kept got %v", rec.order, keep.order)
			}
		})
	}
}

// fakeClock is a kvevent.Clock and wall clock the test moves.
// fakeClock is the wall clock and the TSO at one settable millisecond;
// it counts the TSO fetches (one per stuck check, T10).
type fakeClock struct {
	ms     atomic.Int64
	polled atomic.Int64
}

func (f *fakeClock) CurrentTs(context.Context) (uint64, error) {
	f.polled.Add(1)
	return tsAt(f.ms.Load()), nil
}
func (f *fakeClock) now() time.Time { return time.UnixMilli(f.ms.Load()) }

// setAndObserve moves the clock to ms and returns once a stuck check has
// run with it. The source fetches one TSO at a time and reads the wall
// clock before each fetch: the first fetch counted after the store may
// still carry the old wall clock, the second reads ms, and the third
// starts only after the check of the second ran.
func (f *fakeClock) setAndObserve(t *testing.T, ms int64) {
	t.Helper()
	f.ms.Store(ms)
	from := f.polled.Load()
	eventually(t, fmt.Sprintf("a stuck check at %d ms", ms), func() bool { return f.polled.Load() >= from+3 })
}

type fakeResolver struct {
	mu    sync.Mutex
	tasks []LockResolveTask
	after func(LockResolveTask)
}

func (f *fakeResolver) ResolveLocks(_ context.Context, task LockResolveTask) error {
	f.mu.Lock()
	f.tasks = append(f.tasks, task)
	after := f.after
	f.mu.Unlock()
	if after != nil {
		after(task)
	}
	return nil
}

func (f *fakeResolver) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tasks)
}

// T10: a span whose resolved ts is stuck (a lock pins TiKV's resolver) has
// its regions' locks resolved with target min(TSO, resolved + 4 s); once
// the lock is gone resolved ts moves again.
func TestGRPCStuckResolvedTsResolvesLocks(t *testing.T) {
	c := newDblCluster(t, 1, false)
	clk := &fakeClock{}
	clk.ms.Store(1000)
	res := &fakeResolver{}
	res.after = func(task LockResolveTask) { c.resolve(task.TargetTs) } // the lock is gone: TiKV resolves past it
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator, Resolver: res, Clock: clk, Now: clk.now,
		ResolveLockInterval: 5 * time.Millisecond})
	rec := rs.subscribe(t, context.Background(), 1, tableSpan(1), tsAt(900))
	eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 1 })
	c.resolve(tsAt(1000))
	eventually(t, "resolved 1000", func() bool { return rec.resolvedTs() == tsAt(1000) })
	// The planner must see resolved ts 1000 unchanged before the clock
	// jumps, or it would start timing the stall at the jump (T10: stuck
	// after 4 s of no movement).
	clk.setAndObserve(t, 3000) // 2 s: not stuck yet
	if res.count() != 0 {
		t.Fatalf("resolved locks before the 4 s threshold: %v", res.tasks)
	}
	clk.ms.Store(9000)
	eventually(t, "lock resolution", func() bool { return res.count() > 0 })
	res.mu.Lock()
	task := res.tasks[0]
	res.mu.Unlock()
	if task.RegionID != 1 || task.TargetTs != tsAt(5000) {
		t.Fatalf("task %+v, want region 1 target ts(5000) = resolved time + 4 s", task)
	}
	eventually(t, "resolved ts moves after the lock is resolved", func() bool { return rec.resolvedTs() == tsAt(5000) })
}

// T12: keyspace spans carry the 'x' + 3-byte prefix inside the encoding.
func TestKeyspaceSpan(t *testing.T) {
	s, err := KeyspaceSpan(0x010203, []byte("t1"), []byte("t2"))
	if err != nil {
		t.Fatal(err)
	}
	_, start, _ := codec.DecodeBytes(s.StartKey, nil)
	_, end, _ := codec.DecodeBytes(s.EndKey, nil)
	if string(start) != "x\x01\x02\x03t1" || string(end) != "x\x01\x02\x03t2" {
		t.Fatalf("span %q %q", start, end)
	}
	whole, _ := KeyspaceSpan(7, nil, nil)
	_, wend, _ := codec.DecodeBytes(whole.EndKey, nil)
	if string(wend) != "x\x00\x00\x08" {
		t.Fatalf("whole keyspace end %q", wend)
	}
	if _, err := KeyspaceSpan(MaxKeyspaceID+1, nil, nil); err == nil {
		t.Fatal("keyspace id above 24 bits accepted")
	}
	if got := StripKeyspacePrefix([]byte("x\x00\x00\x07t1")); string(got) != "t1" {
		t.Fatalf("strip = %q", got)
	}
	if got := StripKeyspacePrefix([]byte("t1")); string(got) != "t1" {
		t.Fatalf("strip classic = %q", got)
	}
}

// T13: Run returning leaves no goroutine of the source behind.
func TestGRPCNoLeakedGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		c := newDblCluster(t, 2, false)
		src, err := NewGRPCSource(TransportConfig{ClusterID: c.clusterID, Locator: c.locator, RegionRetryInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx) }()
		rec := newSyncRecorder()
		_ = src.Subscribe(context.Background(), 1, tableSpan(1), tsAt(1000), rec)
		eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 1 })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = src.Close()
		for _, s := range c.stores {
			s.srv.Stop()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left (base %d):\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var _ = sort.Strings
var _ = metapb.Peer{}

// T7: server_is_busy holds back only the failed region's sub-span for
// backoff_ms (on the injected clock); other holes of the span are
// re-subscribed at once.
func TestGRPCBusyBackoffIsPerRange(t *testing.T) {
	c := newDblCluster(t, 2, false)
	c.split(1, 2, rawKey(1, 50))
	clk := &fakeClock{}
	clk.ms.Store(1000)
	rs := startGRPCSource(t, TransportConfig{ClusterID: c.clusterID, Locator: c.locator, Now: clk.now})
	rs.subscribe(t, context.Background(), 1, tableSpan(1), tsAt(1000))
	eventually(t, "registered", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })
	regsOf := func(id uint64) int {
		return c.requestCount(func(r *cdcpb.ChangeDataRequest) bool {
			return r.RegionId == id && r.Request != nil && r.GetRegister() != nil
		})
	}
	before2 := regsOf(2)
	c.failRegion(2, &cdcpb.Error{ServerIsBusy: &errorpb.ServerIsBusy{BackoffMs: 1000}})
	c.setLeader(1, 2) // not_leader: retried at once
	eventually(t, "region 1 back", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.regs) == 1 && c.regs[0].regionID == 1
	})
	time.Sleep(50 * time.Millisecond) // many retry ticks
	if regsOf(2) != before2 {
		t.Fatalf("region 2 re-subscribed during its busy backoff")
	}
	clk.ms.Add(1001)
	eventually(t, "region 2 back after backoff_ms", func() bool { return regsOf(2) == before2+1 })
}
