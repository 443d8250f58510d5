package grpcserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/pdpb"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/tso"
)

// TestG28BackgroundGCHonoursServiceSafePoints: with GCLifeTime set, the
// durable cluster's background GC moves the safe point to now − lifetime
// but never past a live service safe point (the adapter's hold), and once
// the service is gone it catches up; the versions it frees are swept and
// the log keeps only the live state once compacted. rule: G28
func TestG28BackgroundGCHonoursServiceSafePoints(t *testing.T) {
	dir := t.TempDir()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Dir: dir,
		Maintain: fakeupstream.MaintainConfig{Off: true, MinBytes: 1}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s, err := Start(c, Config{GCLifeTime: time.Minute})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	key := []byte("t\x80row")
	var tss []uint64
	for i := 0; i < 50; i++ {
		ts, err := c.Put(key, []byte(fmt.Sprintf("v%d", i)))
		require.NoError(t, err)
		tss = append(tss, ts)
		require.NoError(t, c.Advance(10*time.Second))
	}
	hold := tss[20]
	ctx := context.Background()
	hdr := &pdpb.RequestHeader{ClusterId: s.ClusterID()}
	_, err = s.pd.UpdateServiceGCSafePoint(ctx, &pdpb.UpdateServiceGCSafePointRequest{Header: hdr, ServiceId: []byte("sfemu-x"), TTL: 3600, SafePoint: hold})
	require.NoError(t, err)
	before := c.LogSize()
	require.NoError(t, c.RunMaintenance())
	sp, _ := c.GCSafePoint(ctx)
	require.Equal(t, hold, sp, "GC stops at the service safe point")
	v, err := c.Get(ctx, key, hold)
	require.NoError(t, err)
	require.Equal(t, "v20", string(v), "the held snapshot still reads")
	require.Less(t, c.LogSize(), before, "the log was compacted")

	_, err = s.pd.UpdateServiceGCSafePoint(ctx, &pdpb.UpdateServiceGCSafePointRequest{Header: hdr, ServiceId: []byte("sfemu-x"), TTL: 0})
	require.NoError(t, err)
	require.NoError(t, c.RunMaintenance())
	sp, _ = c.GCSafePoint(ctx)
	require.Equal(t, tso.Compose(c.NowMs()-time.Minute.Milliseconds(), 0), sp, "without a service GC moves to now − lifetime")
	_, err = c.Get(ctx, key, hold)
	require.Error(t, err, "below the safe point reads fail")
	last := -1
	for i, ts := range tss {
		if ts <= sp {
			last = i
		}
	}
	v, err = c.Get(ctx, key, sp)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("v%d", last), string(v), "the newest version at the safe point stays")
}
