package grpcserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/stretchr/testify/require"
	"github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
	"github.com/tikv/client-go/v2/txnkv"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// newKVStore builds client-go's KVStore over the fake PD, as TiCDC does
// for snapshot reads and lock resolution.
func newKVStore(t testing.TB, s *Servers) *tikv.KVStore {
	t.Helper()
	// The real PD client may fail the first timestamp with Canceled while
	// its TSO stream is still being set up; the adapter's pd.OpenKVStore
	// retries that (logpuller.md P14), and so does this helper, with a fresh
	// PD client each time.
	var store *tikv.KVStore
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		pdCli := newPDClient(t, s)
		store, err = tikv.NewKVStore("grpcserver-test", tikv.NewCodecPDClient(tikv.ModeTxn, pdCli), tikv.NewMockSafePointKV(), tikv.NewRPCClient())
		if err == nil || status.Code(err) != codes.Canceled && !strings.Contains(err.Error(), "context canceled") {
			break
		}
		t.Logf("NewKVStore attempt %d: %v", attempt, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// sqlTable creates db.t with n rows through the SQL front and returns its
// table id.
func sqlTable(t testing.TB, c *fakeupstream.Cluster, n int) (*sqlfront.Server, int64) {
	t.Helper()
	fe, err := sqlfront.New(context.Background(), c)
	require.NoError(t, err)
	ss := fe.NewSession("")
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(32))")
	for i := 1; i <= n; i++ {
		mustExec(t, ss, fmt.Sprintf("INSERT INTO t VALUES (%d, 'v%d')", i, i))
	}
	ti, _, err := fe.TableInfo("d", "t")
	require.NoError(t, err)
	return fe, ti.ID
}

// TestClientGoSnapshotReads: client-go takes a snapshot and reads rows
// written by sqlfront with Get, BatchGet and Iter across several regions
// led by different stores. (G31-G36, G43)
func TestClientGoSnapshotReads(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 3, Stores: 3})
	_, tid := sqlTable(t, c, 20)
	key := func(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tid, h) }
	// Three regions inside the table, the middle one led by store 2.
	_, mid, err := c.SplitRaw(key(8))
	require.NoError(t, err)
	_, _, err = c.SplitRaw(key(15))
	require.NoError(t, err)
	require.NoError(t, c.TransferLeader(c.LocateRaw(key(10)).ID, 2))
	_ = mid

	store := newKVStore(t, s)
	ctx := testCtx(t)
	ts, err := store.CurrentTimestamp("global")
	require.NoError(t, err)
	snap := store.GetSnapshot(ts)

	for _, h := range []int64{1, 10, 20} {
		got, err := snap.Get(ctx, key(h))
		require.NoError(t, err, "handle %d", h)
		want, err := c.Get(ctx, key(h), ts)
		require.NoError(t, err)
		require.Equal(t, want, got.Value, "handle %d", h)
	}
	_, err = snap.Get(ctx, key(99))
	require.Error(t, err, "a missing key is not found")

	keys := [][]byte{key(2), key(9), key(16), key(99)}
	m, err := snap.BatchGet(ctx, keys)
	require.NoError(t, err)
	require.Len(t, m, 3)

	want, err := c.Scan(ctx, tablecodec.EncodeRecordPrefix(nil, tid), tablecodec.PrefixNext(tablecodec.EncodeRecordPrefix(nil, tid)), ts, 0)
	require.NoError(t, err)
	require.Len(t, want, 20)
	it, err := snap.Iter(tablecodec.EncodeRecordPrefix(nil, tid), tablecodec.PrefixNext(tablecodec.EncodeRecordPrefix(nil, tid)))
	require.NoError(t, err)
	defer it.Close()
	i := 0
	for it.Valid() {
		require.Less(t, i, len(want))
		require.Equal(t, want[i].Key, it.Key())
		require.Equal(t, want[i].Value, it.Value())
		i++
		require.NoError(t, it.Next())
	}
	require.Equal(t, len(want), i, "iterator saw every row across the three regions")

	// A region moved after the client cached it: the region error makes
	// client-go reload and the read still succeeds.
	_, _, err = c.SplitRaw(key(5))
	require.NoError(t, err)
	require.NoError(t, c.TransferLeader(c.LocateRaw(key(3)).ID, 3))
	got, err := store.GetSnapshot(ts).Get(ctx, key(3))
	require.NoError(t, err)
	require.Equal(t, want[2].Value, got.Value)
}

// TestClientGoResolvesAbandonedLocks: a snapshot read meeting an expired
// lock resolves it through client-go's lock resolver (rolled back when
// the primary never committed, committed when it did), and TiCDC's
// explicit path (ScanLock + LockResolver.ResolveLocks) clears a region.
// (G35, G37, G38, G41)
func TestClientGoResolvesAbandonedLocks(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 4, Stores: 3, LockTTLMs: 500})
	_, tid := sqlTable(t, c, 5)
	key := func(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tid, h) }
	store := newKVStore(t, s)
	ctx := testCtx(t)

	old1, err := c.Get(ctx, key(1), c.Oracle().Next())
	require.NoError(t, err)

	// Txn A: prewrite only, then abandoned.
	a := c.Begin()
	a.Set(key(1), []byte("abandoned"))
	require.NoError(t, a.Prewrite())
	// Txn B: primary committed, secondary left locked.
	b := c.Begin()
	b.Set(key(2), []byte("b-primary"))
	b.Set(key(3), []byte("b-secondary"))
	require.NoError(t, b.Prewrite())
	bCommit := c.Oracle().Next()
	require.NoError(t, b.CommitKeys(bCommit, key(2)))
	require.Len(t, c.ScanLocks(nil, nil, ^uint64(0)), 2)

	require.NoError(t, c.Advance(2*time.Second)) // TTLs expire
	ts, err := store.CurrentTimestamp("global")
	require.NoError(t, err)
	snap := store.GetSnapshot(ts)
	got, err := snap.Get(ctx, key(1))
	require.NoError(t, err)
	require.Equal(t, old1, got.Value, "A was rolled back")
	got, err = snap.Get(ctx, key(3))
	require.NoError(t, err)
	require.Equal(t, []byte("b-secondary"), got.Value, "B's secondary was committed")
	require.Eventually(t, func() bool { return len(c.ScanLocks(nil, nil, ^uint64(0))) == 0 },
		5*time.Second, 10*time.Millisecond, "locks left: %v", c.ScanLocks(nil, nil, ^uint64(0)))

	// TiCDC's explicit resolve: scan the region's locks, resolve them.
	d := c.Begin()
	d.Set(key(4), []byte("d"))
	require.NoError(t, d.Prewrite())
	require.NoError(t, c.Advance(2*time.Second))
	maxTs, err := store.CurrentTimestamp("global")
	require.NoError(t, err)
	bo := tikv.NewGcResolveLockMaxBackoffer(ctx)
	loc, err := store.GetRegionCache().LocateKey(bo, key(4))
	require.NoError(t, err)
	req := tikvrpc.NewRequest(tikvrpc.CmdScanLock, &kvrpcpb.ScanLockRequest{MaxVersion: maxTs, Limit: 1024, StartKey: loc.StartKey, EndKey: loc.EndKey})
	resp, err := store.SendReq(bo, req, loc.Region, 5*time.Second)
	require.NoError(t, err)
	regionErr, err := resp.GetRegionError()
	require.NoError(t, err)
	require.Nil(t, regionErr)
	scan := resp.Resp.(*kvrpcpb.ScanLockResponse)
	require.Len(t, scan.Locks, 1)
	locks := []*txnkv.Lock{txnkv.NewLock(scan.Locks[0])}
	_, err = store.GetLockResolver().ResolveLocks(bo, 0, locks)
	require.NoError(t, err)
	require.Empty(t, c.ScanLocks(nil, nil, ^uint64(0)))
}

// TestClientGoResolvesAsyncCommit: an abandoned async-commit txn is
// decided from its secondaries (every key still locked means committed at
// the max min_commit_ts), through KvCheckSecondaryLocks. (G38, G39, G41)
func TestClientGoResolvesAsyncCommit(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 12, Stores: 3, LockTTLMs: 500})
	_, tid := sqlTable(t, c, 4)
	key := func(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tid, h) }
	// The secondary lives in another region led by another store.
	_, _, err := c.SplitRaw(key(3))
	require.NoError(t, err)
	require.NoError(t, c.TransferLeader(c.LocateRaw(key(3)).ID, 2))
	store := newKVStore(t, s)
	ctx := testCtx(t)

	a := c.Begin()
	a.UseAsyncCommit()
	a.Set(key(1), []byte("async-1"))
	a.Set(key(3), []byte("async-3"))
	require.NoError(t, a.Prewrite())
	require.NoError(t, c.Advance(2*time.Second))
	ts, err := store.CurrentTimestamp("global")
	require.NoError(t, err)
	got, err := store.GetSnapshot(ts).Get(ctx, key(3))
	require.NoError(t, err)
	require.Equal(t, []byte("async-3"), got.Value, "all keys locked: the txn counts as committed")
	got, err = store.GetSnapshot(ts).Get(ctx, key(1))
	require.NoError(t, err)
	require.Equal(t, []byte("async-1"), got.Value)
	require.Eventually(t, func() bool { return len(c.ScanLocks(nil, nil, ^uint64(0))) == 0 }, 5*time.Second, 10*time.Millisecond)
	v, err := c.Get(ctx, key(1), c.Oracle().Next())
	require.NoError(t, err)
	require.Equal(t, []byte("async-1"), v)
	require.Empty(t, s.Unimplemented())
}

// TestClientGoStoreDown: with the leader's store down, client-go's reads
// fail over: the down store answers Unavailable, PD and the other peers
// lead it to the new leader. (G13, G15, G30, G32)
func TestClientGoStoreDown(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 13, Stores: 3})
	_, tid := sqlTable(t, c, 3)
	key := tablecodec.EncodeIntRecordKey(nil, tid, 2)
	store := newKVStore(t, s)
	ctx := testCtx(t)
	ts, err := store.CurrentTimestamp("global")
	require.NoError(t, err)
	want, err := c.Get(ctx, key, ts)
	require.NoError(t, err)
	got, err := store.GetSnapshot(ts).Get(ctx, key) // caches leader = store 1
	require.NoError(t, err)
	require.Equal(t, want, got.Value)

	require.Equal(t, uint64(1), c.LocateRaw(key).Leader)
	require.NoError(t, c.StoreDown(1))
	require.NotEqual(t, uint64(1), c.LocateRaw(key).Leader)
	got, err = store.GetSnapshot(ts).Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, want, got.Value)
}

// TestTxnKVClient: txnkv.NewClient given only the PD address (what a user
// of client-go writes) starts against the fake and reads a row. (G3, G26)
//
// Rule G17: txnkv.NewClient syncs etcd members from the PD address at start;
// without MemberList that call would be counted in Unimplemented (G3).
func TestTxnKVClient(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 15, Stores: 2})
	_, tid := sqlTable(t, c, 2)
	cli, err := txnkv.NewClient([]string{s.PDAddr()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	ctx := testCtx(t)
	var ts uint64
	require.Eventually(t, func() bool {
		ts, err = cli.CurrentTimestamp("global")
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "no timestamp: %v", err)
	key := tablecodec.EncodeIntRecordKey(nil, tid, 2)
	want, err := c.Get(ctx, key, ts)
	require.NoError(t, err)
	got, err := cli.GetSnapshot(ts).Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, want, got.Value)
	require.Empty(t, s.Unimplemented())
}

// TestClientGoWrites: client-go's optimistic 2PC commits through the fake
// (prewrite, commit, region routing across stores), a conflicting txn is
// refused, and a raw EventFeed sees the PREWRITE/COMMIT pair. (G44)
func TestClientGoWrites(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 17, Stores: 2})
	_, tid := sqlTable(t, c, 0)
	key := func(h int64) []byte { return tablecodec.EncodeIntRecordKey(nil, tid, h) }
	_, _, err := c.SplitRaw(key(50))
	require.NoError(t, err)
	require.NoError(t, c.TransferLeader(c.LocateRaw(key(60)).ID, 2))
	start, end := tableSpan(tid)
	cp := c.Oracle().Next()
	fc := openFeed(t, s, 1, feedV2Mux)
	left := c.LocateRaw(key(1))
	fc.send(register(s, left, 1, cp, start, end, "8.5.0"))
	fc.waitFor("INITIALIZED", func(evs []*cdcpbEvents) bool { return countType(rowsOf(evs, left.ID, 1), cdcpbInitialized) == 1 })

	store := newKVStore(t, s)
	ctx := testCtx(t)
	txn, err := store.Begin()
	require.NoError(t, err)
	require.NoError(t, txn.Set(key(1), []byte("one")))
	require.NoError(t, txn.Set(key(60), []byte("sixty")))
	require.NoError(t, txn.Delete(key(2)))
	require.NoError(t, txn.Commit(ctx))
	commitTs := txn.CommitTS()
	require.NotZero(t, commitTs)
	// client-go commits secondaries in the background after the primary.
	require.Eventually(t, func() bool { return len(c.ScanLocks(nil, nil, ^uint64(0))) == 0 }, 5*time.Second, 5*time.Millisecond)
	for h, want := range map[int64]string{1: "one", 60: "sixty"} {
		v, err := c.Get(ctx, key(h), c.Oracle().Next())
		require.NoError(t, err)
		require.Equal(t, want, string(v))
	}
	fc.waitFor("PREWRITE and COMMIT of key 1", func(evs []*cdcpbEvents) bool {
		rows := rowsOf(evs, left.ID, 1)
		pre, com := false, false
		for _, r := range rows {
			if string(r.Key) == string(key(1)) {
				pre = pre || r.Type == cdcpb.Event_PREWRITE
				com = com || (r.Type == cdcpb.Event_COMMIT && r.CommitTs == commitTs)
			}
		}
		return pre && com
	})

	// Write conflict: a txn that started before the commit above fails.
	old, err := store.Begin(tikv.WithStartTS(commitTs - 1))
	require.NoError(t, err)
	require.NoError(t, old.Set(key(1), []byte("stale")))
	require.Error(t, old.Commit(ctx))
	v, err := c.Get(ctx, key(1), c.Oracle().Next())
	require.NoError(t, err)
	require.Equal(t, "one", string(v))
	require.Empty(t, s.Unimplemented())
}
