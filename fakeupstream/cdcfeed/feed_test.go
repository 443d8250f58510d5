package cdcfeed_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
	"github.com/searchfabric/sfemu/internal/cputime"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

var seedFlag = flag.Int64("seed", 7, "seed for the feed scheduler in randomized tests")

func newCluster(t testing.TB, seed int64) *fakeupstream.Cluster {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: seed, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cmp(raw string) []byte {
	if raw == "" {
		return nil
	}
	return codec.EncodeBytes(nil, []byte(raw))
}

type client struct {
	t       testing.TB
	c       *fakeupstream.Cluster
	streams map[uint64]*cdcfeed.Stream
}

func newClient(t testing.TB, c *fakeupstream.Cluster) *client {
	return &client{t: t, c: c, streams: map[uint64]*cdcfeed.Stream{}}
}

func (cl *client) stream(store uint64) *cdcfeed.Stream {
	if s := cl.streams[store]; s != nil && s.Err() == nil {
		return s
	}
	s, err := cl.c.OpenStream(store)
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.streams[store] = s
	return s
}

func (cl *client) register(r topology.Region, store, reqID, checkpoint uint64, oldValue bool) {
	req := &cdcpb.ChangeDataRequest{
		RegionId: r.ID, RegionEpoch: r.Epoch(), CheckpointTs: checkpoint, RequestId: reqID,
		StartKey: r.StartKey, EndKey: r.EndKey,
	}
	if oldValue {
		req.ExtraOp = kvrpcpb.ExtraOp_ReadOldValue
	}
	if err := cl.stream(store).Send(req); err != nil {
		cl.t.Fatal(err)
	}
}

// drain delivers everything and renders the messages of store's stream.
func (cl *client) drain(store uint64) []string {
	cl.c.DeliverAll()
	evs, err := cl.streams[store].Recv()
	if err != nil {
		cl.t.Fatalf("recv: %v", err)
	}
	return render(evs)
}

func render(evs []*cdcpb.ChangeDataEvent) []string {
	var out []string
	for _, m := range evs {
		if m.ResolvedTs != nil {
			out = append(out, fmt.Sprintf("resolved %v", m.ResolvedTs.Regions))
			continue
		}
		for _, ev := range m.Events {
			switch e := ev.Event.(type) {
			case *cdcpb.Event_Entries_:
				for _, r := range e.Entries.Entries {
					out = append(out, fmt.Sprintf("r%d %s %s %s v=%s old=%s", ev.RegionId, r.Type, r.OpType, r.Key, r.Value, r.OldValue))
				}
			case *cdcpb.Event_Error:
				out = append(out, fmt.Sprintf("r%d error %s", ev.RegionId, errKind(e.Error)))
			}
		}
	}
	return out
}

func errKind(e *cdcpb.Error) string {
	switch {
	case e.NotLeader != nil:
		return fmt.Sprintf("not_leader(leader store %d)", e.NotLeader.GetLeader().GetStoreId())
	case e.EpochNotMatch != nil:
		return fmt.Sprintf("epoch_not_match(%d regions)", len(e.EpochNotMatch.CurrentRegions))
	case e.RegionNotFound != nil:
		return "region_not_found"
	case e.DuplicateRequest != nil:
		return "duplicate_request"
	}
	return "unknown"
}

func resolvedTs(evs []*cdcpb.ChangeDataEvent) []uint64 {
	var out []uint64
	for _, m := range evs {
		if m.ResolvedTs != nil {
			out = append(out, m.ResolvedTs.Ts)
		}
	}
	return out
}

func put(t testing.TB, c *fakeupstream.Cluster, k, v string) uint64 {
	t.Helper()
	ts, err := c.Put([]byte(k), []byte(v))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Rule F-1: the incremental scan sends COMMITTED rows (with old values) for
// commits above the checkpoint and PREWRITE rows for locks, then
// INITIALIZED; nothing at or below the checkpoint.
func TestIncrementalScan(t *testing.T) {
	c := newCluster(t, 1)
	put(t, c, "a", "1")
	cp := put(t, c, "b", "1")
	put(t, c, "a", "2")
	txn := c.Begin()
	txn.Set([]byte("c"), []byte("locked"))
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, cp, true)
	equal(t, cl.drain(r.Leader), []string{
		"r1 COMMITTED PUT a v=2 old=1",
		"r1 PREWRITE PUT c v=locked old=",
		"r1 INITIALIZED UNKNOWN  v= old=",
	})
}

// Rule F-2: live rows: PREWRITE (value, old value), COMMIT (no value),
// ROLLBACK (op UNKNOWN, commit ts 0), COMMITTED for 1PC; old values only
// when the request asked for them.
func TestLiveRows(t *testing.T) {
	for _, old := range []bool{true, false} {
		c := newCluster(t, 1)
		put(t, c, "k", "0")
		cl := newClient(t, c)
		r := c.Regions()[0]
		cl.register(r, r.Leader, 1, c.Oracle().Next(), old)
		cl.drain(r.Leader)
		tx := c.Begin()
		tx.Set([]byte("k"), []byte("1"))
		if _, err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx = c.Begin()
		tx.Delete([]byte("k"))
		tx.Prewrite()
		tx.Rollback()
		put(t, c, "k", "2")
		o := func(s string) string {
			if old {
				return s
			}
			return ""
		}
		equal(t, cl.drain(r.Leader), []string{
			"r1 PREWRITE PUT k v=1 old=" + o("0"),
			"r1 COMMIT PUT k v= old=",
			"r1 PREWRITE DELETE k v= old=" + o("1"),
			"r1 ROLLBACK UNKNOWN k v= old=",
			"r1 COMMITTED PUT k v=2 old=" + o("1"),
		})
	}
}

// Rule F-3: resolved ts = min(TSO, min lock start_ts), sent only after
// INITIALIZED, only on a tick, only when it grows; an abandoned lock stalls
// it until the lock is resolved.
func TestResolvedTs(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, c.Oracle().Next(), true)
	c.ResolvedRound() // before INITIALIZED is delivered: nothing
	s := cl.stream(r.Leader)
	c.DeliverAll()
	evs, _ := s.Recv()
	if got := resolvedTs(evs); len(got) != 0 {
		t.Fatalf("resolved ts before INITIALIZED: %v", got)
	}
	c.Advance(50 * time.Millisecond) // below the interval
	c.DeliverAll()
	if evs, _ := s.Recv(); len(resolvedTs(evs)) != 0 {
		t.Fatal("resolved ts without a tick")
	}
	c.Advance(60 * time.Millisecond)
	c.DeliverAll()
	evs, _ = s.Recv()
	first := resolvedTs(evs)
	if len(first) != 1 {
		t.Fatalf("want one resolved ts, got %v", first)
	}
	lock := c.Begin()
	lock.SetTTL(10)
	lock.Set([]byte("x"), []byte("abandoned"))
	lock.Prewrite()
	for i := 0; i < 3; i++ {
		c.Advance(100 * time.Millisecond)
	}
	c.DeliverAll()
	evs, _ = s.Recv()
	got := resolvedTs(evs)
	if len(got) != 1 || got[0] != lock.StartTs() {
		t.Fatalf("stalled resolved ts: got %v, want one at lock start %d (first %d)", got, lock.StartTs(), first[0])
	}
	n, err := c.ResolveLocks(nil, nil, c.Oracle().Next())
	if err != nil || n != 1 {
		t.Fatalf("resolve: n=%d err=%v", n, err)
	}
	c.Advance(100 * time.Millisecond)
	c.DeliverAll()
	evs, _ = s.Recv()
	got = resolvedTs(evs)
	if len(got) != 1 || got[0] <= lock.StartTs() {
		t.Fatalf("resolved ts after lock resolution: %v", got)
	}
	// The ROLLBACK row precedes the resolved ts.
	rows := render(evs)
	if rows[0] != "r1 ROLLBACK UNKNOWN x v= old=" {
		t.Fatalf("rows %v", rows)
	}
}

// Rule F-4: a commit at or below an issued resolved ts is refused.
func TestCommitBelowIssuedResolvedRefused(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, c.Oracle().Next(), true)
	tx := c.Begin()
	tx.Set([]byte("k"), []byte("v"))
	tx.Prewrite()
	c.DeliverAll()
	c.ResolvedRound()
	// resolved is pinned at the lock start; a commit just above it is fine
	if err := tx.CommitAt(tx.StartTs() + 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second) // resolved ts now far above the lock
	late := c.BeginAt(tx.StartTs() + 2)
	late.Set([]byte("z"), []byte("v"))
	if err := late.Commit1PCAt(tx.StartTs() + 3); !errors.Is(err, fakeupstream.ErrCommitBelowResolved) {
		t.Fatalf("want ErrCommitBelowResolved, got %v", err)
	}
}

// Rule F-5: register errors: unknown region, wrong store, stale epoch,
// duplicate request.
func TestRegisterErrors(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	ghost := r
	ghost.ID = 999
	cl.register(ghost, r.Leader, 1, 1, true)
	cl.register(r, 2, 2, 1, true)
	stale := r
	stale.Version = 0
	cl.register(stale, r.Leader, 3, 1, true)
	cl.register(r, r.Leader, 4, 1, true)
	cl.register(r, r.Leader, 4, 1, true)
	got := append(cl.drain(r.Leader), cl.drain(2)...)
	want := map[string]bool{
		"r999 error region_not_found":         true,
		"r1 error not_leader(leader store 1)": true,
		"r1 error epoch_not_match(1 regions)": true,
		"r1 error duplicate_request":          true,
		"r1 INITIALIZED UNKNOWN  v= old=":     true,
	}
	for _, g := range got {
		if !want[g] {
			t.Errorf("unexpected %q", g)
		}
		delete(want, g)
	}
	if len(want) != 0 {
		t.Fatalf("missing %v in %v", want, got)
	}
}

// Rule F-6: topology changes end subscriptions: split/merge with
// epoch_not_match naming the current regions, leader move with not_leader
// naming the new leader, store down by breaking the stream. Pending rows
// are delivered before the error.
func TestTopologyErrors(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, c.Oracle().Next(), true)
	cl.drain(r.Leader)
	put(t, c, "a", "1")
	if _, _, err := c.SplitRaw([]byte("m")); err != nil {
		t.Fatal(err)
	}
	put(t, c, "b", "after split") // not delivered: the subscription ended
	equal(t, cl.drain(r.Leader), []string{
		"r1 COMMITTED PUT a v=1 old=",
		"r1 error epoch_not_match(2 regions)",
	})
	rs := c.Regions()
	for i, x := range rs {
		cl.register(x, x.Leader, uint64(10+i), c.Oracle().Next(), true)
	}
	cl.drain(1)
	if err := c.TransferLeader(rs[1].ID, 2); err != nil {
		t.Fatal(err)
	}
	equal(t, cl.drain(1), []string{fmt.Sprintf("r%d error not_leader(leader store 2)", rs[1].ID)})
	if _, err := c.Merge(rs[0].ID, rs[1].ID); err != nil {
		t.Fatal(err)
	}
	equal(t, cl.drain(1), []string{fmt.Sprintf("r%d error epoch_not_match(1 regions)", rs[0].ID)})
	merged := c.Regions()[0]
	cl.register(merged, 2, 20, c.Oracle().Next(), true)
	s2 := cl.stream(2)
	if err := c.StoreDown(2); err != nil {
		t.Fatal(err)
	}
	c.DeliverAll()
	if _, err := s2.Recv(); !errors.Is(err, cdcfeed.ErrStoreDown) {
		t.Fatalf("stream to a down store: %v", err)
	}
	if err := s2.Send(&cdcpb.ChangeDataRequest{}); err == nil {
		t.Fatal("send on a broken stream must fail")
	}
	if got, _ := c.Region(merged.ID); got.Leader == 2 || got.Leader == 0 {
		t.Fatalf("leader not re-elected: %+v", got)
	}
	if _, err := c.OpenStream(2); !errors.Is(err, cdcfeed.ErrStoreDown) {
		t.Fatalf("open to a down store: %v", err)
	}
	if err := c.CheckTopology(); err != nil {
		t.Fatal(err)
	}
}

// Rule F-7: re-subscribing from the region's resolved ts re-delivers rows
// committed above it, even if they were delivered before.
func TestResubscribeRedelivers(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cp := c.Oracle().Next()
	cl.register(r, r.Leader, 1, cp, true)
	cl.drain(r.Leader)
	put(t, c, "a", "1")
	put(t, c, "b", "1")
	first := cl.drain(r.Leader)
	if len(first) != 2 {
		t.Fatalf("first delivery %v", first)
	}
	c.DropStreams(r.Leader)
	cl.register(r, r.Leader, 2, cp, true)
	equal(t, cl.drain(r.Leader), []string{
		"r1 COMMITTED PUT a v=1 old=",
		"r1 COMMITTED PUT b v=1 old=",
		"r1 INITIALIZED UNKNOWN  v= old=",
	})
}

// Rule F-8: deregister stops one request id's rows.
func TestDeregister(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, 1, false)
	cl.drain(r.Leader)
	cl.stream(r.Leader).Send(&cdcpb.ChangeDataRequest{RequestId: 1, Request: &cdcpb.ChangeDataRequest_Deregister_{Deregister: &cdcpb.ChangeDataRequest_Deregister{}}})
	put(t, c, "a", "1")
	if got := cl.drain(r.Leader); len(got) != 0 {
		t.Fatalf("rows after deregister: %v", got)
	}
}

// workload writes n keys spread over 4 regions and returns the event log
// of one client subscribed to all regions, as bytes.
func workloadLog(t testing.TB, seed int64, n int) ([]byte, []string) {
	c := newCluster(t, seed)
	for _, k := range []string{"g", "n", "t"} {
		if _, _, err := c.SplitRaw([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	c.SetFeedTap(func(store, stream uint64, ev *cdcpb.ChangeDataEvent) {
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&log, "%d/%d %x\n", store, stream, b)
	})
	cl := newClient(t, c)
	cp := c.Oracle().Next()
	for i, r := range c.Regions() {
		cl.register(r, r.Leader, uint64(i+1), cp, true)
	}
	var rows []string
	for i := 0; i < n; i++ {
		k := string(rune('a'+i%26)) + fmt.Sprint(i)
		tx := c.Begin()
		tx.Set([]byte(k), []byte(fmt.Sprint(i)))
		if i%3 == 0 {
			tx.Commit1PC()
		} else {
			tx.Commit()
		}
		if i%10 == 0 {
			c.Advance(100 * time.Millisecond)
		}
		if i%2 == 0 {
			c.Step()
		}
	}
	c.DeliverAll()
	evs, _ := cl.streams[1].Recv()
	rows = render(evs)
	return log.Bytes(), rows
}

// Rule F-9: the same seed gives the same event bytes; different seeds
// differ; regions interleave out of commit_ts order.
func TestDeterminism(t *testing.T) {
	seed := *seedFlag
	a, rows := workloadLog(t, seed, 200)
	b, _ := workloadLog(t, seed, 200)
	if !bytes.Equal(a, b) {
		t.Fatalf("seed %d: two runs differ (%x vs %x)", seed, sha256.Sum256(a), sha256.Sum256(b))
	}
	c, _ := workloadLog(t, seed+1, 200)
	if bytes.Equal(a, c) {
		t.Fatalf("seeds %d and %d gave identical logs", seed, seed+1)
	}
	// Out of commit order across regions: some row of a later key group is
	// delivered before an earlier-committed row of another region.
	var order []int
	for _, r := range rows {
		var region int
		var typ, op, key string
		if n, _ := fmt.Sscanf(r, "r%d %s %s %s", &region, &typ, &op, &key); n == 4 && (typ == "COMMITTED" || typ == "COMMIT") {
			var i int
			fmt.Sscanf(key[1:], "%d", &i)
			order = append(order, i)
		}
	}
	inversions := 0
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			inversions++
		}
	}
	if inversions == 0 {
		t.Fatalf("seed %d: no cross-region reordering in %d rows", seed, len(order))
	}
}

// Rule F-10: fault hooks: a held region is overtaken by others and
// delivers after release; a duplicate window re-sends delivered rows.
func TestHoldAndDuplicate(t *testing.T) {
	c := newCluster(t, 3)
	c.SplitRaw([]byte("m"))
	cl := newClient(t, c)
	rs := c.Regions()
	cp := c.Oracle().Next()
	for i, r := range rs {
		cl.register(r, r.Leader, uint64(i+1), cp, true)
	}
	cl.drain(1)
	c.HoldRegion(rs[0].ID, 0)
	put(t, c, "a", "1") // region 0, held
	put(t, c, "z", "1") // region 1
	equal(t, cl.drain(1), []string{fmt.Sprintf("r%d COMMITTED PUT z v=1 old=", rs[1].ID)})
	c.ReleaseRegion(rs[0].ID)
	equal(t, cl.drain(1), []string{fmt.Sprintf("r%d COMMITTED PUT a v=1 old=", rs[0].ID)})
	if n := c.DuplicateWindow(rs[0].ID, 5); n != 1 {
		t.Fatalf("duplicated %d rows", n)
	}
	equal(t, cl.drain(1), []string{fmt.Sprintf("r%d COMMITTED PUT a v=1 old=", rs[0].ID)})
	// Timed hold expires with virtual time.
	c.HoldRegion(rs[1].ID, 200*time.Millisecond)
	put(t, c, "y", "1")
	if got := cl.drain(1); len(got) != 0 {
		t.Fatalf("held region delivered: %v", got)
	}
	c.Advance(250 * time.Millisecond)
	got := cl.drain(1)
	if !strings.Contains(strings.Join(got, "|"), fmt.Sprintf("r%d COMMITTED PUT y v=1 old=", rs[1].ID)) {
		t.Fatalf("after hold expiry: %v", got)
	}
}

func BenchmarkFeedFanout(b *testing.B) {
	c := newCluster(b, 1)
	for i := 1; i < 16; i++ {
		c.SplitRaw([]byte{byte(i * 16)})
	}
	cl := newClient(b, c)
	cp := c.Oracle().Next()
	for i, r := range c.Regions() {
		cl.register(r, r.Leader, uint64(i+1), cp, true)
	}
	c.DeliverAll()
	key := make([]byte, 8)
	val := bytes.Repeat([]byte("v"), 64)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key[0], key[1], key[2], key[3] = byte(i*37), byte(i>>16), byte(i>>8), byte(i)
		if _, err := c.Put(key, val); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 {
			c.DeliverAll()
			cl.streams[1].Recv()
		}
	}
	c.DeliverAll()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "rows/cpu-s")
	}
}

// cpuTime is the process's user+system CPU time: the shared build machine
// is often oversubscribed, which inflates wall time only.
func cpuTime() time.Duration { return cputime.Process() }

// Rule F-11: request keys that are not comparable keys make TiKV observe
// the whole region.
func TestUndecodableRangeObservesRegion(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	put(t, c, "a", "1")
	req := &cdcpb.ChangeDataRequest{RegionId: r.ID, RegionEpoch: r.Epoch(), CheckpointTs: 1, RequestId: 1,
		StartKey: []byte{0x01, 0x02}, EndKey: []byte{0xff, 0x00}}
	if err := cl.stream(1).Send(req); err != nil {
		t.Fatal(err)
	}
	equal(t, cl.drain(1), []string{"r1 COMMITTED PUT a v=1 old=", "r1 INITIALIZED UNKNOWN  v= old="})
}

// Rule F-10: a duplicated window keeps PREWRITE/COMMIT pairs together and
// leaves out rows a client could not take twice.
func TestDuplicateWindowKeepsPairs(t *testing.T) {
	c := newCluster(t, 1)
	cl := newClient(t, c)
	r := c.Regions()[0]
	cl.register(r, r.Leader, 1, c.Oracle().Next(), false)
	cl.drain(1)
	tx := c.Begin()
	tx.Set([]byte("a"), []byte("1"))
	tx.Commit()
	open := c.Begin()
	open.Set([]byte("b"), []byte("2"))
	open.Prewrite()
	cl.drain(1)
	// Window of 3 holds the whole pair of a and the PREWRITE of b.
	if n := c.DuplicateWindow(r.ID, 3); n != 3 {
		t.Fatalf("duplicated %d rows", n)
	}
	equal(t, cl.drain(1), []string{"r1 PREWRITE PUT a v=1 old=", "r1 COMMIT PUT a v= old=", "r1 PREWRITE PUT b v=2 old="})
	// Window of 2: COMMIT a (without its PREWRITE) and PREWRITE b (still
	// locked): only the PREWRITE of b may be repeated.
	if n := c.DuplicateWindow(r.ID, 2); n != 1 {
		t.Fatalf("duplicated %d rows", n)
	}
	equal(t, cl.drain(1), []string{"r1 PREWRITE PUT b v=2 old="})
	// Once b commits, its old PREWRITE alone is no longer repeated.
	open.Commit()
	cl.drain(1)
	if n := c.DuplicateWindow(r.ID, 1); n != 0 {
		t.Fatalf("duplicated %d rows after commit", n)
	}
}
