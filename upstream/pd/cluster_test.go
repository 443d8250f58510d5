package pd_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/internal/testlog"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// TestMain quiets the PD client's and client-go's logs (testlog).
func TestMain(m *testing.M) {
	testlog.Quiet()
	os.Exit(m.Run())
}

func start(t *testing.T) (*fakeupstream.Cluster, *grpcserver.Servers, *pd.Client) {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Stores: 3, LockTTLMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := pd.Open(ctx, pd.Config{Endpoints: []string{s.PDAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	return c, s, cli
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// P1, P2: cluster id, TSO from PD (increasing, from the cluster's oracle),
// store addresses.
func TestClientTSOAndStores(t *testing.T) {
	c, s, cli := start(t)
	ctx := testCtx(t)
	if cli.ClusterID() != s.ClusterID() {
		t.Fatalf("cluster id %d, want %d", cli.ClusterID(), s.ClusterID())
	}
	a, err := cli.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cli.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b <= a || c.Oracle().Peek() < b {
		t.Fatalf("TSO %d then %d (oracle at %d)", a, b, c.Oracle().Peek())
	}
	for id := uint64(1); id <= 3; id++ {
		addr, err := cli.StoreAddr(ctx, id)
		if err != nil || addr != s.StoreAddr(id) {
			t.Fatalf("store %d: %q %v, want %q", id, addr, err, s.StoreAddr(id))
		}
	}
	if _, err := cli.StoreAddr(ctx, 99); err == nil {
		t.Fatal("unknown store resolved")
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pd.Open(cancelled, pd.Config{Endpoints: []string{s.PDAddr()}}); err == nil {
		t.Fatal("Open with a done context succeeded")
	}
	if _, err := pd.Open(ctx, pd.Config{}); err == nil {
		t.Fatal("Open without endpoints succeeded")
	}
}

// P8, P9: the locator returns comparable boundaries, epochs and leader
// addresses; after a split and a leader move, Invalidate / UpdateLeader
// make the next lookup see the new layout.
func TestRegionLocator(t *testing.T) {
	c, s, cli := start(t)
	ctx := testCtx(t)
	loc := pd.NewRegionLocator(cli)
	t.Cleanup(loc.Close)
	rawSplit := tablecodec.EncodeIntRecordKey(nil, 5, 100)
	if _, _, err := c.SplitRaw(rawSplit); err != nil {
		t.Fatal(err)
	}
	p := tablecodec.EncodeRecordPrefix(nil, 5)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, p), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(p))}
	regions, err := loc.LocateSpan(ctx, span)
	if err != nil {
		t.Fatal(err)
	}
	if len(regions) != 2 || !bytes.Equal(regions[0].EndKey, codec.EncodeBytes(nil, rawSplit)) || !bytes.Equal(regions[1].StartKey, regions[0].EndKey) {
		t.Fatalf("regions %+v: want two, split at the comparable key", regions)
	}
	for _, r := range regions {
		truth, _ := c.Region(r.ID)
		if r.LeaderStoreID != truth.Leader || r.LeaderAddr != s.StoreAddr(truth.Leader) || r.Epoch.Version != truth.Version {
			t.Fatalf("region %+v, cluster says %+v", r, truth)
		}
	}
	// Leader move: the cache still has the old leader until told.
	right := regions[1]
	newLeader := right.LeaderStoreID%3 + 1
	if err := c.TransferLeader(right.ID, newLeader); err != nil {
		t.Fatal(err)
	}
	loc.UpdateLeader(right, nil) // unknown leader: reload
	again, err := loc.LocateSpan(ctx, kvevent.Span{StartKey: right.StartKey, EndKey: right.EndKey})
	if err != nil {
		t.Fatal(err)
	}
	if again[0].LeaderStoreID != newLeader {
		t.Fatalf("leader %d after reload, want %d", again[0].LeaderStoreID, newLeader)
	}
	// Split again: after Invalidate the new epoch shows.
	if _, _, err := c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, 5, 200)); err != nil {
		t.Fatal(err)
	}
	loc.Invalidate(again[0])
	third, err := loc.LocateSpan(ctx, span)
	if err != nil {
		t.Fatal(err)
	}
	if len(third) != 3 {
		t.Fatalf("%d regions after the second split, want 3", len(third))
	}
	var _ logpuller.RegionLocator = loc
}

// P3-P7 against the real PD client: check, register, renew, remove.
func TestGCOverPD(t *testing.T) {
	c, _, cli := start(t)
	ctx := testCtx(t)
	old := c.Oracle().Next()
	c.GC(c.Oracle().Next())
	err := pd.CheckStartTs(ctx, cli.PD(), old)
	if !errors.Is(err, pd.ErrStartTsBeforeGC) {
		t.Fatalf("want ErrStartTsBeforeGC, got %v", err)
	}
	now, err := cli.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.CheckStartTs(ctx, cli.PD(), now); err != nil {
		t.Fatal(err)
	}
	k, err := pd.NewServiceSafePoint(cli.PD(), pd.ServiceSafePointConfig{ServiceID: "sfemu-test", TTL: time.Hour, RefreshEvery: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(ctx, old, 0); !errors.Is(err, pd.ErrStartTsBeforeGC) {
		t.Fatalf("register below GC: %v", err)
	}
	if err := k.Register(ctx, now, 0); err != nil {
		t.Fatal(err)
	}
	// While held, GC (TiDB's GC worker advancing through PD) cannot pass
	// the hold: PD clamps the GC safe point to the minimum service point.
	if sp, err := cli.PD().UpdateGCSafePoint(ctx, c.Oracle().Next()); err != nil || sp != now-1 {
		t.Fatalf("GC advanced to %d (%v) past the hold %d", sp, err, now-1)
	}
	later := c.Oracle().Next()
	k.Advance(later)
	if err := k.Tick(ctx, time.Minute.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if sp, err := cli.PD().UpdateGCSafePoint(ctx, c.Oracle().Next()); err != nil || sp != later-1 {
		t.Fatalf("after renewal GC advanced to %d (%v), want the new hold %d", sp, err, later-1)
	}
	if err := k.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	target := c.Oracle().Next()
	if sp, err := cli.PD().UpdateGCSafePoint(ctx, target); err != nil || sp != target {
		t.Fatalf("after Remove GC advanced to %d (%v), want %d", sp, err, target)
	}
}

// P10, P11: snapshot reads through client-go equal the cluster's MVCC at
// the same ts across regions; an abandoned lock is resolved.
//
// Rule P12: OpenKVStore probes PD's GC states API, which the fake serves, and
// client-go resolves locks with the txn safe point read there (the etcd
// fallback stays untested, as the rule says).
func TestKVStoreSnapshotAndLocks(t *testing.T) {
	c, _, cli := start(t)
	ctx := testCtx(t)
	kv, err := pd.OpenKVStore(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	k := func(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, 9, h) }
	for h := int64(1); h <= 30; h++ {
		if _, err := c.Put(k(h), []byte{byte(h)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.SplitRaw(k(10)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SplitRaw(k(20)); err != nil {
		t.Fatal(err)
	}
	if err := c.TransferLeader(c.LocateRaw(k(15)).ID, 2); err != nil {
		t.Fatal(err)
	}
	ts := c.Oracle().Next()
	if _, err := c.Delete(k(5)); err != nil {
		t.Fatal(err)
	}
	p := tablecodec.EncodeRecordPrefix(nil, 9)
	want, err := c.Scan(ctx, p, tablecodec.PrefixNext(p), ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := kv.Scan(ctx, p, tablecodec.PrefixNext(p), ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 30 || len(got) != len(want) {
		t.Fatalf("scan returned %d rows, cluster %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) {
			t.Fatalf("row %d: %x=%x, want %x=%x", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
	if lim, _ := kv.Scan(ctx, p, tablecodec.PrefixNext(p), ts, 7); len(lim) != 7 {
		t.Fatalf("limit 7 returned %d", len(lim))
	}
	if v, err := kv.Get(ctx, k(5), ts); err != nil || !bytes.Equal(v, []byte{5}) {
		t.Fatalf("get at ts: %x %v", v, err)
	}
	if v, err := kv.Get(ctx, k(5), c.Oracle().Next()); err != nil || v != nil {
		t.Fatalf("get after delete: %x %v", v, err)
	}
	if v, err := kv.Get(ctx, k(99), ts); err != nil || v != nil {
		t.Fatalf("missing key: %x %v", v, err)
	}

	// Abandoned lock, resolved through ScanLock + the lock resolver.
	txn := c.Begin()
	txn.Set(k(12), []byte("abandoned"))
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(time.Second); err != nil { // TTL expires
		t.Fatal(err)
	}
	region := c.LocateRaw(k(12))
	task := logpuller.LockResolveTask{RegionID: region.ID, Span: kvevent.Span{StartKey: region.StartKey, EndKey: region.EndKey}, TargetTs: c.Oracle().Next()}
	if err := kv.ResolveLocks(ctx, task); err != nil {
		t.Fatal(err)
	}
	if locks := c.ScanLocks(nil, nil, ^uint64(0)); len(locks) != 0 {
		t.Fatalf("locks left: %v", locks)
	}

	// Reads below the GC safe point are refused, naming both.
	c.GC(c.Oracle().Next())
	if _, err := kv.Scan(ctx, p, tablecodec.PrefixNext(p), ts, 0); !errors.Is(err, pd.ErrStartTsBeforeGC) || !strings.Contains(err.Error(), "GC safe point") {
		t.Fatalf("scan below GC: %v", err)
	}
}

// P13: a lock of another table in the same region stalls the region's
// resolved ts as much as one in the span, so lock resolution scans the
// whole region, not only the span's part of it.
func TestResolveLocksCoversTheWholeRegion(t *testing.T) {
	c, _, cli := start(t)
	ctx := testCtx(t)
	kv, err := pd.OpenKVStore(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	// Tables 8 and 9 share the one region; the span is table 9's records.
	other := tablecodec.EncodeIntRecordKey(nil, 8, 1)
	txn := c.Begin()
	txn.Set(other, []byte("abandoned"))
	if err := txn.Prewrite(); err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(time.Second); err != nil { // TTL expires
		t.Fatal(err)
	}
	p := tablecodec.EncodeRecordPrefix(nil, 9)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, p), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(p))}
	region := c.LocateRaw(p)
	if c.LocateRaw(other).ID != region.ID {
		t.Fatal("test setup: the two tables are not in one region")
	}
	task := logpuller.LockResolveTask{RegionID: region.ID, Span: span, TargetTs: c.Oracle().Next()}
	if err := kv.ResolveLocks(ctx, task); err != nil {
		t.Fatal(err)
	}
	if locks := c.ScanLocks(nil, nil, ^uint64(0)); len(locks) != 0 {
		t.Fatalf("a lock outside the span but inside the region was left: %v", locks)
	}
}
