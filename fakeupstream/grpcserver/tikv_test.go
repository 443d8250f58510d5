package grpcserver

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/pingcap/kvproto/pkg/tikvpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/fakeupstream"
)

// TestTiKVRegionErrors: a request whose context does not match the
// topology gets the region error TiKV sends. (G31-G34)
func TestTiKVRegionErrors(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 9, Stores: 2})
	_, err := c.Put([]byte("k1"), []byte("v1"))
	require.NoError(t, err)
	_, _, err = c.SplitRaw([]byte("m"))
	require.NoError(t, err)
	left := c.LocateRaw([]byte("k1"))
	ctx := testCtx(t)
	kv1 := tikvpb.NewTikvClient(dialStore(t, s, 1))
	kv2 := tikvpb.NewTikvClient(dialStore(t, s, 2))
	rc := func(r uint64, ep *metapb.RegionEpoch) *kvrpcpb.Context {
		return &kvrpcpb.Context{RegionId: r, RegionEpoch: ep}
	}
	ts := c.Oracle().Next()

	resp, err := kv1.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(left.ID, left.Epoch()), Key: []byte("k1"), Version: ts})
	require.NoError(t, err)
	require.Nil(t, resp.RegionError)
	require.Equal(t, []byte("v1"), resp.Value)

	wrongStore := rc(left.ID, left.Epoch())
	wrongStore.Peer = &metapb.Peer{StoreId: 2}
	resp, err = kv1.KvGet(ctx, &kvrpcpb.GetRequest{Context: wrongStore, Key: []byte("k1"), Version: ts})
	require.NoError(t, err)
	require.Equal(t, uint64(1), resp.RegionError.GetStoreNotMatch().GetActualStoreId(), "G31")

	resp, err = kv1.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(999, left.Epoch()), Key: []byte("k1"), Version: ts})
	require.NoError(t, err)
	require.NotNil(t, resp.RegionError.GetRegionNotFound(), "G31")

	resp, err = kv2.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(left.ID, left.Epoch()), Key: []byte("k1"), Version: ts})
	require.NoError(t, err)
	require.Equal(t, uint64(1), resp.RegionError.GetNotLeader().GetLeader().GetStoreId(), "G32")

	stale := &metapb.RegionEpoch{ConfVer: left.ConfVer, Version: left.Version - 1}
	resp, err = kv1.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(left.ID, stale), Key: []byte("k1"), Version: ts})
	require.NoError(t, err)
	require.NotNil(t, resp.RegionError.GetEpochNotMatch(), "G33")

	resp, err = kv1.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(left.ID, left.Epoch()), Key: []byte("z"), Version: ts})
	require.NoError(t, err)
	require.NotNil(t, resp.RegionError.GetKeyNotInRegion(), "G34")

	// A lock is reported as KeyError.Locked. (G35)
	txn := c.Begin()
	txn.Set([]byte("k1"), []byte("v2"))
	require.NoError(t, txn.Prewrite())
	resp, err = kv1.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(left.ID, left.Epoch()), Key: []byte("k1"), Version: c.Oracle().Next()})
	require.NoError(t, err)
	require.Equal(t, txn.StartTs(), resp.Error.GetLocked().GetLockVersion())

	// Scans stay inside the region, forward and reverse. (G36)
	_, err = c.Put([]byte("a"), []byte("1"))
	require.NoError(t, err)
	_, err = c.Put([]byte("b"), []byte("2"))
	require.NoError(t, err)
	_, err = c.Put([]byte("n"), []byte("3"))
	require.NoError(t, err)
	sresp, err := kv1.KvScan(ctx, &kvrpcpb.ScanRequest{Context: rc(left.ID, left.Epoch()), StartKey: []byte("a"), Limit: 10, Version: c.Oracle().Next()})
	require.NoError(t, err)
	require.Equal(t, txn.StartTs(), sresp.Error.GetLocked().GetLockVersion(), "the scan meets k1's lock")
	require.NoError(t, txn.Rollback())
	sresp, err = kv1.KvScan(ctx, &kvrpcpb.ScanRequest{Context: rc(left.ID, left.Epoch()), StartKey: []byte("a"), Limit: 10, Version: c.Oracle().Next()})
	require.NoError(t, err)
	require.Len(t, sresp.Pairs, 3, "a, b, k1; n is in the right region: %v", sresp.Pairs)
	sresp, err = kv1.KvScan(ctx, &kvrpcpb.ScanRequest{Context: rc(left.ID, left.Epoch()), StartKey: []byte("c"), Limit: 1, Version: c.Oracle().Next(), Reverse: true})
	require.NoError(t, err)
	require.Len(t, sresp.Pairs, 1)
	require.Equal(t, []byte("b"), sresp.Pairs[0].Key)

	// A down store answers Unavailable. (G30)
	require.NoError(t, c.StoreDown(2))
	_, err = kv2.KvGet(ctx, &kvrpcpb.GetRequest{Context: rc(left.ID, left.Epoch()), Key: []byte("k1"), Version: ts})
	require.Equal(t, codes.Unavailable, status.Code(err))
}

// TestBatchCommands: inner requests are answered under their ids by the
// unary handlers; an unserved command ends the stream Unimplemented. (G43)
func TestBatchCommands(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 10, Stores: 1})
	_, err := c.Put([]byte("k"), []byte("v"))
	require.NoError(t, err)
	r := c.LocateRaw([]byte("k"))
	ctx := testCtx(t)
	st, err := tikvpb.NewTikvClient(dialStore(t, s, 1)).BatchCommands(ctx)
	require.NoError(t, err)
	rc := &kvrpcpb.Context{RegionId: r.ID, RegionEpoch: r.Epoch()}
	require.NoError(t, st.Send(&tikvpb.BatchCommandsRequest{
		RequestIds: []uint64{11, 12},
		Requests: []*tikvpb.BatchCommandsRequest_Request{
			{Cmd: &tikvpb.BatchCommandsRequest_Request_Get{Get: &kvrpcpb.GetRequest{Context: rc, Key: []byte("k"), Version: c.Oracle().Next()}}},
			{Cmd: &tikvpb.BatchCommandsRequest_Request_Empty{Empty: &tikvpb.BatchCommandsEmptyRequest{TestId: 77}}},
		},
	}))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, []uint64{11, 12}, resp.RequestIds)
	require.Equal(t, []byte("v"), resp.Responses[0].GetGet().GetValue())
	require.Equal(t, uint64(77), resp.Responses[1].GetEmpty().GetTestId())

	require.NoError(t, st.Send(&tikvpb.BatchCommandsRequest{
		RequestIds: []uint64{13},
		Requests:   []*tikvpb.BatchCommandsRequest_Request{{Cmd: &tikvpb.BatchCommandsRequest_Request_PessimisticLock{PessimisticLock: &kvrpcpb.PessimisticLockRequest{}}}},
	}))
	_, err = st.Recv()
	require.Equal(t, codes.Unimplemented, status.Code(err))
	require.Equal(t, 1, s.Unimplemented()["/tikvpb.Tikv/BatchCommands"], "G3: recorded")
	require.Equal(t, 1, s.Unimplemented()["/tikvpb.Tikv/BatchCommands(*tikvpb.BatchCommandsRequest_Request_PessimisticLock)"], "G3: names the command")
}

// TestCloseLeaksNothing: Close ends open streams and every server
// goroutine. (G2)
func TestCloseLeaksNothing(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 11, Stores: 2})
	require.NoError(t, err)
	s, err := Start(c, Config{})
	require.NoError(t, err)
	_, tid := emptyTable(t, c)
	start, end := tableSpan(tid)
	r := c.RegionsInSpan(spanOf(start, end))[0]
	fc := openFeed(t, s, 1, feedV2Mux)
	fc.send(register(s, r, 1, c.Oracle().Next(), start, end, "8.5.0"))
	fc.waitFor("INITIALIZED", func(evs []*cdcpbEvents) bool { return countType(rowsOf(evs, r.ID, 1), cdcpbInitialized) == 1 })
	s.Close()
	select {
	case <-fc.done:
	case <-time.After(5 * time.Second):
		t.Fatal("stream not ended by Close")
	}
	s.Close() // idempotent
	var stacks string
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 4<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !serverGoroutine(stacks) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, serverGoroutine(stacks), "server goroutines left after Close:\n%s", stacks)
}

// serverGoroutine reports whether any goroutine runs server code.
func serverGoroutine(stacks string) bool {
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "grpcserver.(*") || strings.Contains(g, "grpc.(*Server)") || strings.Contains(g, "grpcserver.(*Servers)") {
			if !strings.Contains(g, "TestCloseLeaksNothing") {
				return true
			}
		}
	}
	return false
}
