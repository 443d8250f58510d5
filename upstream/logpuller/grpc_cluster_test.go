package logpuller_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/internal/testlog"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// These tests run the real transport (GRPCSource), the real PD client and
// client-go (upstream/pd) against fakeupstream's gRPC servers on loopback:
// the same code path as a TiDB cluster. After each fault the consumer's
// state must equal the upstream snapshot at the final resolved ts, no row
// may arrive twice, and resolved ts never regresses.

var clusterSeed = flag.Int64("cluster-seed", 0, "seed for the fault tests over fakeupstream's gRPC servers (0: time-based)")

// TestMain quiets the PD client's and client-go's logs (testlog).
func TestMain(m *testing.M) {
	testlog.Quiet()
	os.Exit(m.Run())
}

const tableID = 120

func key(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tableID, h) }

func tableSpan() kvevent.Span {
	p := tablecodec.EncodeRecordPrefix(nil, tableID)
	return kvevent.Span{StartKey: codec.EncodeBytes(nil, p), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(p))}
}

// stateRecorder keeps, per key, every delivered version, and checks the
// consume contract as rows arrive.
type stateRecorder struct {
	mu         sync.Mutex
	rows       []kvevent.RawKVEntry
	seen       map[string]int
	resolved   uint64
	violations []string
}

func (r *stateRecorder) ConsumeKV(es []kvevent.RawKVEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range es {
		if e.CRTs <= r.resolved {
			r.violations = append(r.violations, fmt.Sprintf("row %x@%d after resolved %d", e.Key, e.CRTs, r.resolved))
		}
		id := fmt.Sprintf("%x@%d/%d", e.Key, e.CRTs, e.StartTs)
		r.seen[id]++
		if r.seen[id] > 1 {
			r.violations = append(r.violations, "duplicate delivery of "+id)
		}
		e.Key = append([]byte(nil), e.Key...)
		e.Value = append([]byte(nil), e.Value...)
		e.OldValue = nil
		r.rows = append(r.rows, e)
	}
}

func (r *stateRecorder) AdvanceResolvedTs(ts uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts <= r.resolved {
		r.violations = append(r.violations, fmt.Sprintf("resolved %d after %d", ts, r.resolved))
	}
	r.resolved = ts
}

func (r *stateRecorder) resolvedTs() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolved
}

// stateAt folds every row with commit ts <= ts into key -> value (absent:
// deleted), taking each key's newest version.
func (r *stateRecorder) stateAt(ts uint64, base map[string]string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type ver struct {
		ts  uint64
		del bool
		v   string
	}
	last := map[string]ver{}
	for k, v := range base {
		last[k] = ver{v: v}
	}
	for _, e := range r.rows {
		if e.CRTs > ts {
			continue
		}
		if v, ok := last[string(e.Key)]; ok && v.ts > e.CRTs {
			continue
		}
		last[string(e.Key)] = ver{ts: e.CRTs, del: e.OpType == kvevent.OpTypeDelete, v: string(e.Value)}
	}
	out := map[string]string{}
	for k, v := range last {
		if !v.del {
			out[k] = v.v
		}
	}
	return out
}

type env struct {
	t      testing.TB
	seed   int64
	c      *fakeupstream.Cluster
	s      *grpcserver.Servers
	pd     *pd.Client
	loc    *pd.RegionLocator
	kv     *pd.KVStore
	src    *logpuller.GRPCSource
	rec    *stateRecorder
	start  uint64
	cancel context.CancelFunc
	done   chan error
	rng    *rand.Rand
	// base holds rows written before the subscription's start ts.
	base map[string]string
}

type envOpts struct {
	lockTTLMs uint64
	// resolvedMs is the feed's resolved-ts interval (default 20 ms).
	resolvedMs int64
	now        func() time.Time
	resolver   bool
	v1         bool
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	if o.resolvedMs == 0 {
		o.resolvedMs = 20
	}
	seed := *clusterSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -cluster-seed=%d)", seed, seed)
	c, err := fakeupstream.New(fakeupstream.Config{Seed: seed, Stores: 3, RealClock: true, LockTTLMs: o.lockTTLMs,
		Feed: cdcfeed.Config{ResolvedTsIntervalMs: o.resolvedMs}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancelOpen := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelOpen()
	cli, err := pd.Open(ctx, pd.Config{Endpoints: []string{s.PDAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	loc := pd.NewRegionLocator(cli)
	t.Cleanup(loc.Close)
	e := &env{t: t, seed: seed, c: c, s: s, pd: cli, loc: loc, rec: &stateRecorder{seen: map[string]int{}},
		rng: rand.New(rand.NewSource(seed)), base: map[string]string{}}
	for h := int64(1); h <= 10; h++ {
		e.put(h, "base")
	}
	cfg := logpuller.TransportConfig{
		ClusterID:             cli.ClusterID(),
		Locator:               loc,
		Now:                   o.now,
		CheckStartTs:          func(ctx context.Context, ts uint64) error { return pd.CheckStartTs(ctx, cli.PD(), ts) },
		StoreReconnectBackoff: 30 * time.Millisecond,
		RegionRetryInterval:   10 * time.Millisecond,
		BusyBackoff:           20 * time.Millisecond,
		ResolveLockInterval:   20 * time.Millisecond,
		DisableV2:             o.v1,
	}
	if o.resolver {
		kv, err := pd.OpenKVStore(cli)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kv.Close() })
		e.kv = kv
		cfg.Resolver = kv
		cfg.Clock = cli
	}
	src, err := logpuller.NewGRPCSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.src = src
	if e.start, err = cli.CurrentTs(ctx); err != nil {
		t.Fatal(err)
	}
	for k, v := range e.snapshot(e.start) {
		e.base[k] = v
	}
	if err := src.Subscribe(context.Background(), 1, tableSpan(), e.start, e.rec); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- src.Run(runCtx) }()
	t.Cleanup(func() { e.stop() })
	return e
}

func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.cancel = nil
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("Run: %v (seed %d)", err, e.seed)
		}
	case <-time.After(10 * time.Second):
		e.t.Errorf("Run did not return (seed %d)", e.seed)
	}
	_ = e.src.Close()
}

func (e *env) put(h int64, v string) uint64 {
	e.t.Helper()
	ts, err := e.c.Put(key(h), []byte(v))
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

func (e *env) snapshot(ts uint64) map[string]string {
	e.t.Helper()
	p := tablecodec.EncodeRecordPrefix(nil, tableID)
	kvs, err := e.c.Scan(context.Background(), p, tablecodec.PrefixNext(p), ts, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// randomWrites commits n single-row changes on random handles.
func (e *env) randomWrites(n int) {
	for i := 0; i < n; i++ {
		h := int64(e.rng.Intn(40) + 1)
		if e.rng.Intn(5) == 0 {
			if _, err := e.c.Delete(key(h)); err != nil {
				e.t.Fatal(err)
			}
			continue
		}
		e.put(h, fmt.Sprintf("v%d-%d", h, e.rng.Int()))
	}
}

// caughtUp waits until the span resolved past everything written so far
// and compares the consumer's state with the upstream snapshot there.
func (e *env) caughtUp(what string) {
	e.t.Helper()
	e.caughtUpOn(e.rec, what)
}

// caughtUpOn is caughtUp for the span rec consumes. Spans progress on
// their own: one span having resolved says nothing of another's.
func (e *env) caughtUpOn(rec *stateRecorder, what string) {
	e.t.Helper()
	target := e.c.Oracle().Next()
	deadline := time.Now().Add(15 * time.Second)
	for rec.resolvedTs() < target {
		select {
		case err := <-e.done:
			e.cancel = nil
			e.t.Fatalf("%s: Run stopped: %v (seed %d)", what, err, e.seed)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: resolved ts %d never reached %d (seed %d, stats %+v)", what, rec.resolvedTs(), target, e.seed, e.src.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := rec.resolvedTs()
	want := e.snapshot(r)
	got := rec.stateAt(r, e.base)
	if fmt.Sprint(sortedMap(want)) != fmt.Sprint(sortedMap(got)) {
		e.t.Fatalf("%s: state at resolved ts %d differs (seed %d)\nupstream: %v\nconsumer: %v", what, r, e.seed, sortedMap(want), sortedMap(got))
	}
	rec.mu.Lock()
	for _, v := range rec.violations {
		e.t.Errorf("%s: %s (seed %d)", what, v, e.seed)
	}
	rec.mu.Unlock()
}

func sortedMap(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%x=%s", k, v))
	}
	sort.Strings(out)
	return out
}

func (e *env) regionOf(h int64) uint64 { return e.c.LocateRaw(key(h)).ID }

// T1/T3: rows and resolved ts arrive for a table span spread over
// regions led by different stores; a start ts below the GC safe point is
// refused.
func TestClusterRowsAndResolved(t *testing.T) {
	e := newEnv(t, envOpts{})
	if _, _, err := e.c.SplitRaw(key(20)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.TransferLeader(e.regionOf(25), 2); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(50)
	e.caughtUp("initial")

	e.c.GC(e.c.Oracle().Next())
	err := e.src.Subscribe(context.Background(), 2, tableSpan(), e.start, &stateRecorder{seen: map[string]int{}})
	if err == nil {
		t.Fatal("subscription below the GC safe point accepted")
	}
	t.Log(err)
}

// T7: region split and merge while a multi-region transaction is between
// prewrite and commit.
func TestClusterSplitMergeMidTransaction(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.randomWrites(10)
	txn := e.c.Begin()
	for h := int64(1); h <= 40; h += 3 {
		txn.Set(key(h), []byte(fmt.Sprintf("txn-%d", h)))
	}
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.SplitRaw(key(20)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.SplitRaw(key(30)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(10)
	e.caughtUp("after split")
	txn2 := e.c.Begin()
	txn2.Set(key(5), []byte("txn2-a"))
	txn2.Set(key(25), []byte("txn2-b"))
	if err := txn2.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Merge(e.regionOf(25), e.regionOf(15)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn2.Commit(); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(10)
	e.caughtUp("after merge")
	if e.src.Stats().RegionRetries[logpuller.RetryEpochNotMatch] == 0 {
		t.Error("split/merge produced no epoch_not_match retry")
	}
}

// T7/T8: leader move, then a store down and back up.
func TestClusterLeaderMoveAndStoreDown(t *testing.T) {
	e := newEnv(t, envOpts{})
	if _, _, err := e.c.SplitRaw(key(20)); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(10)
	e.caughtUp("start")
	if err := e.c.TransferLeader(e.regionOf(5), 3); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(10)
	e.caughtUp("leader moved")
	down := e.c.LocateRaw(key(25)).Leader
	if err := e.c.StoreDown(down); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(10)
	e.caughtUp("store down")
	if err := e.c.StoreUp(down); err != nil {
		t.Fatal(err)
	}
	if err := e.c.TransferLeader(e.regionOf(25), down); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(10)
	e.caughtUp("store back")
	if e.src.Stats().StreamFailures == 0 {
		t.Error("store down did not fail a stream")
	}
}

// T8: streams reset by the server, and rows re-delivered after the
// reconnect (TiKV's re-scan plus an explicit duplicate window), are
// suppressed: each change reaches the consumer once.
func TestClusterStreamResetAndDuplicates(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.randomWrites(20)
	e.caughtUp("start")
	for i := 0; i < 3; i++ {
		e.randomWrites(10)
		for store := uint64(1); store <= 3; store++ {
			e.c.DropStreams(store)
		}
		e.c.DuplicateWindow(e.regionOf(1), 8)
		e.randomWrites(5)
		e.caughtUp(fmt.Sprintf("reset %d", i))
	}
	if e.src.Stats().StreamFailures == 0 {
		t.Error("no stream failure observed")
	}
}

// T7: an error kind the pinned proto does not know (decodes with every
// field nil) and an epoch_not_match storm are retried until they stop.
func TestClusterUnknownErrorAndEpochStorm(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.randomWrites(10)
	e.caughtUp("start")
	for i := 0; i < 5; i++ {
		e.c.FailRegion(e.regionOf(1), &cdcpb.Error{})
		time.Sleep(5 * time.Millisecond)
	}
	e.randomWrites(10)
	e.caughtUp("unknown errors")
	for i := 0; i < 30; i++ {
		e.c.FailRegion(e.regionOf(1), &cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{}})
		if i%3 == 0 {
			e.randomWrites(1)
		}
		time.Sleep(2 * time.Millisecond)
	}
	e.caughtUp("epoch storm")
	st := e.src.Stats()
	if st.RegionRetries[logpuller.RetryUnknownError] == 0 || st.RegionRetries[logpuller.RetryEpochNotMatch] == 0 {
		t.Errorf("retries not seen: %v", st.RegionRetries)
	}
}

// T10: a lock left by an abandoned transaction stalls resolved ts; the
// stuck detector resolves it through client-go's lock resolver and
// resolved ts moves past it.
func TestClusterAbandonedLockResolved(t *testing.T) {
	var fast atomic.Bool
	base := time.Now()
	now := func() time.Time {
		d := time.Since(base)
		if fast.Load() {
			d *= 100 // 4 s of stuck time pass in 40 ms
		}
		return base.Add(d)
	}
	e := newEnv(t, envOpts{lockTTLMs: 50, now: now, resolver: true})
	e.randomWrites(5)
	e.caughtUp("start")
	txn := e.c.Begin()
	txn.Set(key(100), []byte("abandoned"))
	txn.Set(key(133), []byte("abandoned"))
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(5)
	time.Sleep(200 * time.Millisecond) // many resolved-ts rounds
	// The lock's commit ts will exceed its start ts, so TiKV may resolve
	// up to the start ts but not past it.
	if r := e.rec.resolvedTs(); r > txn.StartTs() {
		t.Fatalf("resolved ts %d passed the lock at %d without resolution", r, txn.StartTs())
	}
	if n := e.src.Stats().LockResolutions; n != 0 {
		t.Fatalf("locks resolved before the span was stuck for 4 s: %d", n)
	}
	fast.Store(true)
	e.caughtUp("lock resolved")
	if e.src.Stats().LockResolutions == 0 {
		t.Error("no lock resolution recorded")
	}
	if got := e.rec.stateAt(e.rec.resolvedTs(), e.base)[string(key(100))]; got == "abandoned" {
		t.Error("the abandoned transaction's row was delivered")
	}
}

// lagRecorder notes when each resolved-ts advance arrives.
type lagRecorder struct {
	mu      sync.Mutex
	advance []struct {
		ts uint64
		at time.Time
	}
}

func (l *lagRecorder) ConsumeKV([]kvevent.RawKVEntry) {}
func (l *lagRecorder) AdvanceResolvedTs(ts uint64) {
	l.mu.Lock()
	l.advance = append(l.advance, struct {
		ts uint64
		at time.Time
	}{ts, time.Now()})
	l.mu.Unlock()
}

// BenchmarkCommitToResolvedLag: the time from a commit to the moment the
// span's resolved ts passes its commit ts, over real gRPC with TiKV's
// default 1 s resolved-ts tick. One op = one commit (10 ms apart); p50/p99
// are reported in ms.
func BenchmarkCommitToResolvedLag(b *testing.B) {
	e := newEnv(b, envOpts{resolvedMs: 1000})
	lag := &lagRecorder{}
	if err := e.src.Subscribe(context.Background(), 9, tableSpan(), e.start, lag); err != nil {
		b.Fatal(err)
	}
	type commit struct {
		ts uint64
		at time.Time
	}
	commits := make([]commit, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts := e.put(int64(i%40+1), "lag")
		commits = append(commits, commit{ts, time.Now()})
		time.Sleep(10 * time.Millisecond)
	}
	last := commits[len(commits)-1].ts
	deadline := time.Now().Add(30 * time.Second)
	for {
		lag.mu.Lock()
		n := len(lag.advance)
		done := n > 0 && lag.advance[n-1].ts >= last
		lag.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("resolved ts never passed the last commit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	lag.mu.Lock()
	defer lag.mu.Unlock()
	lags := make([]float64, 0, len(commits))
	j := 0
	for _, c := range commits {
		for lag.advance[j].ts < c.ts {
			j++
		}
		lags = append(lags, float64(lag.advance[j].at.Sub(c.at).Microseconds())/1000)
	}
	sort.Float64s(lags)
	b.ReportMetric(lags[len(lags)/2], "p50-ms")
	b.ReportMetric(lags[len(lags)*99/100], "p99-ms")
}

// T2 over fakeupstream's servers: on v1 EventFeed, a second span sharing
// the same regions gets its own streams (the server answers a second
// registration of a region on one v1 stream with duplicate_request, which
// would stop Run); faults are survived as on V2.
func TestClusterV1TwoSpansShareRegions(t *testing.T) {
	e := newEnv(t, envOpts{v1: true})
	second := &stateRecorder{seen: map[string]int{}}
	if err := e.src.Subscribe(context.Background(), 2, tableSpan(), e.start, second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.SplitRaw(key(20)); err != nil {
		t.Fatal(err)
	}
	e.randomWrites(20)
	e.caughtUp("v1 start")
	if err := e.c.TransferLeader(e.regionOf(25), 3); err != nil {
		t.Fatal(err)
	}
	for store := uint64(1); store <= 3; store++ {
		e.c.DropStreams(store)
	}
	e.randomWrites(20)
	e.caughtUp("v1 after faults")
	// The second span has its own streams (v1): it catches up on its own
	// time, not when the first did (reading its resolved ts right here
	// failed under load with nothing wrong).
	e.caughtUpOn(second, "second span after faults")
	if st := e.src.Stats(); st.StreamsOpened < 2 {
		t.Errorf("streams opened %d: want separate v1 streams per span", st.StreamsOpened)
	}
}
