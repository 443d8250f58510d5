package grpcserver

import (
	"errors"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/pdpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stretchr/testify/require"
	"github.com/tikv/pd/client/clients/router"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// TestPDClientAcceptance: the real pd client connects and reads cluster
// id, TSO, regions, stores and GC safe points. (G1, G11-G15, G20-G24)
//
// Rule G16: GetRegion, GetPrevRegion and GetRegionByID go through the pinned
// client's QueryRegion stream (a missing id is absent: nil).
func TestPDClientAcceptance(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 1, Stores: 3})
	cli := newPDClient(t, s)
	ctx := testCtx(t)

	require.Equal(t, s.ClusterID(), cli.GetClusterID(ctx))

	// TSO: strictly increasing, from the cluster oracle.
	before := c.Oracle().Peek()
	p1, l1, err := cli.GetTS(ctx)
	require.NoError(t, err)
	ts1 := tso.Compose(p1, l1)
	require.Greater(t, ts1, before)
	p2, l2, err := cli.GetTS(ctx)
	require.NoError(t, err)
	require.Greater(t, tso.Compose(p2, l2), ts1)
	require.GreaterOrEqual(t, c.Oracle().Peek(), tso.Compose(p2, l2), "PD handed out a ts the oracle did not allocate")

	// Regions: split twice and look them up by comparable key.
	_, _, err = c.SplitRaw([]byte("m"))
	require.NoError(t, err)
	_, _, err = c.SplitRaw([]byte("t"))
	require.NoError(t, err)
	regions := c.Regions()
	require.Len(t, regions, 3)
	r, err := cli.GetRegion(ctx, codec.EncodeBytes(nil, []byte("n")))
	require.NoError(t, err)
	require.Equal(t, regions[1].ID, r.Meta.Id)
	require.Equal(t, codec.EncodeBytes(nil, []byte("m")), r.Meta.StartKey, "boundaries are comparable keys")
	require.Equal(t, codec.EncodeBytes(nil, []byte("t")), r.Meta.EndKey)
	require.Equal(t, regions[1].Version, r.Meta.RegionEpoch.Version)
	require.Len(t, r.Meta.Peers, 3)
	require.NotNil(t, r.Leader)
	require.Equal(t, regions[1].Leader, r.Leader.StoreId)

	prev, err := cli.GetPrevRegion(ctx, codec.EncodeBytes(nil, []byte("n")))
	require.NoError(t, err)
	require.Equal(t, regions[0].ID, prev.Meta.Id)

	byID, err := cli.GetRegionByID(ctx, regions[2].ID)
	require.NoError(t, err)
	require.Equal(t, regions[2].ID, byID.Meta.Id)
	missing, err := cli.GetRegionByID(ctx, 999999)
	require.NoError(t, err)
	require.Nil(t, missing)

	scanned, err := cli.ScanRegions(ctx, nil, nil, 10)
	require.NoError(t, err)
	require.Len(t, scanned, 3)
	scanned, err = cli.ScanRegions(ctx, codec.EncodeBytes(nil, []byte("n")), nil, 1)
	require.NoError(t, err)
	require.Len(t, scanned, 1)
	require.Equal(t, regions[1].ID, scanned[0].Meta.Id)

	batch, err := cli.BatchScanRegions(ctx, []router.KeyRange{
		{StartKey: codec.EncodeBytes(nil, []byte("a")), EndKey: codec.EncodeBytes(nil, []byte("b"))},
		{StartKey: codec.EncodeBytes(nil, []byte("u")), EndKey: nil},
	}, 10)
	require.NoError(t, err)
	require.Len(t, batch, 2)
	require.Equal(t, regions[0].ID, batch[0].Meta.Id)
	require.Equal(t, regions[2].ID, batch[1].Meta.Id)

	// Stores: the address routes to that store's TiKV server.
	stores, err := cli.GetAllStores(ctx)
	require.NoError(t, err)
	require.Len(t, stores, 3)
	for _, st := range stores {
		require.Equal(t, s.StoreAddr(st.Id), st.Address)
		require.NotEmpty(t, st.Address)
	}
	st, err := cli.GetStore(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, s.StoreAddr(2), st.Address)
	_, err = cli.GetStore(ctx, 42)
	require.Error(t, err)

	// A down store shows as a down peer of its regions.
	require.NoError(t, c.StoreDown(3))
	r, err = cli.GetRegion(ctx, codec.EncodeBytes(nil, []byte("n")))
	require.NoError(t, err)
	require.Len(t, r.DownPeers, 1)
	require.Equal(t, uint64(3), r.DownPeers[0].StoreId)
}

// TestPDServiceGCSafePoints: service safe points with TTL, min over
// services, ttl 0 removes, a lower value is refused, and the GC safe
// point cannot pass a service's safe point. (G20-G25)
func TestPDServiceGCSafePoints(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 1})
	cli := newPDClient(t, s)
	ctx := testCtx(t)

	min, err := cli.UpdateServiceGCSafePoint(ctx, "cdc", 60, 100)
	require.NoError(t, err)
	require.Equal(t, uint64(0), min, "gc_worker at 0 is the minimum of a fresh cluster")

	// The GC worker may advance up to the cdc service's safe point only.
	sp, err := cli.UpdateGCSafePoint(ctx, 500)
	require.NoError(t, err)
	require.Equal(t, uint64(100), sp)
	got, err := c.GCSafePoint(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(100), got, "the fake TiKV collected up to the new safe point")

	min, err = cli.UpdateServiceGCSafePoint(ctx, "cdc", 60, 200)
	require.NoError(t, err)
	require.Equal(t, uint64(100), min, "min over services (gc_worker is at 100)")

	min, err = cli.UpdateServiceGCSafePoint(ctx, "late", 60, 50)
	require.NoError(t, err)
	require.Equal(t, uint64(100), min, "a service below the minimum is refused and told the minimum")

	// Another service at 150 pins the minimum once gc_worker moves past.
	_, err = cli.UpdateServiceGCSafePoint(ctx, "other", 60, 150)
	require.NoError(t, err)
	sp, err = cli.UpdateGCSafePoint(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, uint64(150), sp)

	// ttl 0 removes: now cdc at 200 is the smallest service.
	min, err = cli.UpdateServiceGCSafePoint(ctx, "other", 0, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(150), min, "gc_worker is at 150 now")
	sp, err = cli.UpdateGCSafePoint(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, uint64(200), sp)

	// GC states API (what client-go's KVStore reads). (G26)
	st, err := cli.GetGCStatesClient(0).GetGCState(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(200), st.TxnSafePoint)
	require.Equal(t, uint64(200), st.GCSafePoint)
	require.Len(t, st.GCBarriers, 1, "only cdc: late was refused, other removed")
	require.Equal(t, "cdc", st.GCBarriers[0].BarrierID)
	require.Equal(t, uint64(200), st.GCBarriers[0].BarrierTS)

	// TTL runs on the cluster clock: after 61 s the cdc entry lapses.
	require.NoError(t, c.Advance(61*time.Second))
	sp, err = cli.UpdateGCSafePoint(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, uint64(1000), sp)
}

// TestPDClusterIDHeader: a request of another cluster is refused. (G10)
func TestPDClusterIDHeader(t *testing.T) {
	_, s := startCluster(t, fakeupstream.Config{Seed: 1})
	cc, err := grpc.NewClient(s.PDAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	cli := pdpb.NewPDClient(cc)
	ctx := testCtx(t)
	_, err = cli.GetRegion(ctx, &pdpb.GetRegionRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID() + 1}})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	resp, err := cli.GetRegion(ctx, &pdpb.GetRegionRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID()}, RegionKey: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, s.ClusterID(), resp.Header.ClusterId)
	require.NotNil(t, resp.Region)

	ts, err := cli.Tso(ctx)
	require.NoError(t, err)
	require.NoError(t, ts.Send(&pdpb.TsoRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID()}, Count: 5}))
	r, err := ts.Recv()
	require.NoError(t, err)
	require.Equal(t, uint32(5), r.Count)
	require.GreaterOrEqual(t, r.Timestamp.Logical, int64(4), "G12: the last of 5 consecutive logicals")
	require.NoError(t, ts.Send(&pdpb.TsoRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID()}, Count: 1 << 20}))
	_, err = ts.Recv()
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

// TestPDTsoOracleFailure: when the oracle stops (its durable high-water
// mark could not be saved) a TSO request gets an error naming why, never a
// zero timestamp and never a server spinning on the batch. (G12)
func TestPDTsoOracleFailure(t *testing.T) {
	c, s := startCluster(t, fakeupstream.Config{Seed: 1})
	c.Oracle().SetWindow(c.Oracle().Peek(), 1, func(uint64) error { return errors.New("disk full") })
	cc, err := grpc.NewClient(s.PDAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	ctx := testCtx(t)
	ts, err := pdpb.NewPDClient(cc).Tso(ctx)
	require.NoError(t, err)
	require.NoError(t, ts.Send(&pdpb.TsoRequest{Header: &pdpb.RequestHeader{ClusterId: s.ClusterID()}, Count: 8}))
	_, err = ts.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "disk full")
}

// TestG27ServiceSafePointsPersist: on a durable cluster the service GC
// safe points (ids, safe points, expiry) survive a restart of the cluster
// and its servers, so a registered reader's history stays protected; a
// later GC is still clamped by them.
func TestG27ServiceSafePointsPersist(t *testing.T) {
	dir := t.TempDir()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Dir: dir})
	require.NoError(t, err)
	s, err := Start(c, Config{})
	require.NoError(t, err)
	cli := newPDClient(t, s)
	ctx := testCtx(t)
	_, err = cli.UpdateServiceGCSafePoint(ctx, "cdc", 3600, 100)
	require.NoError(t, err)
	_, err = cli.UpdateServiceGCSafePoint(ctx, "gone", 3600, 120)
	require.NoError(t, err)
	_, err = cli.UpdateServiceGCSafePoint(ctx, "gone", 0, 0)
	require.NoError(t, err)
	cli.Close()
	s.Close()
	require.NoError(t, c.Close())

	c, s = startCluster(t, fakeupstream.Config{Seed: 1, Dir: dir})
	t.Cleanup(func() { _ = c.Close() })
	cli = newPDClient(t, s)
	st, err := cli.GetGCStatesClient(0).GetGCState(ctx)
	require.NoError(t, err)
	require.Len(t, st.GCBarriers, 1, "cdc kept, gone stays removed")
	require.Equal(t, "cdc", st.GCBarriers[0].BarrierID)
	require.Equal(t, uint64(100), st.GCBarriers[0].BarrierTS)
	require.Greater(t, st.GCBarriers[0].TTL, time.Duration(0))
	sp, err := cli.UpdateGCSafePoint(ctx, 500)
	require.NoError(t, err)
	require.Equal(t, uint64(100), sp, "GC after the restart is clamped by the restored service")
	min, err := cli.UpdateServiceGCSafePoint(ctx, "late", 60, 50)
	require.NoError(t, err)
	require.Equal(t, uint64(100), min)
}
