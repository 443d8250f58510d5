package grpcserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// BenchmarkEventFeedLoopback measures live rows/s from a write on the
// cluster to a raw EventFeedV2 client over loopback gRPC: each op commits
// one 1PC transaction of txnRows rows and waits until all of its COMMITTED
// rows have been received.
//
// wake=true calls Servers.Wake after each commit (write-to-wire cost);
// wake=false leaves it to the stream's poll (default 2 ms interval).
func BenchmarkEventFeedLoopback(b *testing.B) {
	for _, wake := range []bool{false, true} {
		for _, txnRows := range []int{1, 256} {
			b.Run(fmt.Sprintf("wake=%v/txn=%d", wake, txnRows), func(b *testing.B) { benchEventFeed(b, txnRows, wake) })
		}
	}
}

func benchEventFeed(b *testing.B, txnRows int, wake bool) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Stores: 1})
	require.NoError(b, err)
	s, err := Start(c, Config{})
	require.NoError(b, err)
	defer s.Close()
	const tid = 100
	prefix := tablecodec.EncodeRecordPrefix(nil, tid)
	start, end := codec.EncodeBytes(nil, prefix), codec.EncodeBytes(nil, tablecodec.PrefixNext(prefix))
	r := c.RegionsInSpan(spanOf(start, end))[0]

	cli := cdcpb.NewChangeDataClient(dialStore(b, s, 1))
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), FeaturesKey, StreamMultiplexing))
	defer cancel()
	st, err := cli.EventFeedV2(ctx)
	require.NoError(b, err)
	require.NoError(b, st.Send(&cdcpb.ChangeDataRequest{
		Header: &cdcpb.Header{ClusterId: s.ClusterID(), TicdcVersion: "8.5.0"}, RegionId: r.ID, RegionEpoch: r.Epoch(),
		CheckpointTs: c.Oracle().Next(), StartKey: start, EndKey: end, RequestId: 1, ExtraOp: kvrpcpb.ExtraOp_ReadOldValue,
	}))
	recvRows := func(want int) {
		got := 0
		for got < want {
			ev, err := st.Recv()
			if err != nil {
				b.Fatalf("recv: %v", err)
			}
			for _, e := range ev.Events {
				for _, row := range e.GetEntries().GetEntries() {
					if row.Type == cdcpb.Event_COMMITTED || row.Type == cdcpb.Event_INITIALIZED {
						got++
					}
				}
			}
		}
	}
	recvRows(1) // INITIALIZED
	value := make([]byte, 64)
	handle := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		txn := c.Begin()
		for j := 0; j < txnRows; j++ {
			handle++
			txn.Set(tablecodec.EncodeIntRecordKey(nil, tid, handle), value)
		}
		if _, err := txn.Commit1PC(); err != nil {
			b.Fatal(err)
		}
		if wake {
			s.Wake()
		}
		recvRows(txnRows)
	}
	el := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(b.N*txnRows)/el.Seconds(), "rows/s")
}

// BenchmarkPDGetRegion10k: the real pd client looking up regions of a
// cluster with 10k regions (what subscribing 10k regions costs PD).
func BenchmarkPDGetRegion10k(b *testing.B) {
	c, s := startCluster(b, fakeupstream.Config{Seed: 1, Stores: 3})
	const n = 10_000
	for h := int64(1); h < n; h++ {
		if _, _, err := c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, 100, h*10)); err != nil {
			b.Fatal(err)
		}
	}
	cli := newPDClient(b, s)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := codec.EncodeBytes(nil, tablecodec.EncodeIntRecordKey(nil, 100, int64(i%n)*10+5))
		r, err := cli.GetRegion(ctx, k)
		if err != nil || r == nil {
			b.Fatalf("GetRegion: %v %v", r, err)
		}
	}
}

// BenchmarkSubscribe10kRegions: one EventFeedV2 stream registers 10k
// regions of one table; an op is the time until every region reported
// INITIALIZED (no data, so this is the per-region protocol cost).
func BenchmarkSubscribe10kRegions(b *testing.B) {
	const n = 10_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Stores: 1})
		require.NoError(b, err)
		const tid = 100
		for h := int64(1); h < n; h++ {
			if _, _, err := c.SplitRaw(tablecodec.EncodeIntRecordKey(nil, tid, h*10)); err != nil {
				b.Fatal(err)
			}
		}
		s, err := Start(c, Config{})
		require.NoError(b, err)
		prefix := tablecodec.EncodeRecordPrefix(nil, tid)
		start, end := codec.EncodeBytes(nil, prefix), codec.EncodeBytes(nil, tablecodec.PrefixNext(prefix))
		regions := c.RegionsInSpan(spanOf(start, end))
		cli := cdcpb.NewChangeDataClient(dialStore(b, s, 1))
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), FeaturesKey, StreamMultiplexing))
		st, err := cli.EventFeedV2(ctx)
		require.NoError(b, err)
		cp := c.Oracle().Next()
		b.StartTimer()
		t0 := time.Now()
		for _, r := range regions {
			if err := st.Send(&cdcpb.ChangeDataRequest{
				Header: &cdcpb.Header{ClusterId: s.ClusterID(), TicdcVersion: "8.5.0"}, RegionId: r.ID, RegionEpoch: r.Epoch(),
				CheckpointTs: cp, StartKey: start, EndKey: end, RequestId: 1, ExtraOp: kvrpcpb.ExtraOp_ReadOldValue,
			}); err != nil {
				b.Fatal(err)
			}
		}
		inited := 0
		for inited < len(regions) {
			ev, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range ev.Events {
				for _, row := range e.GetEntries().GetEntries() {
					if row.Type == cdcpb.Event_INITIALIZED {
						inited++
					}
				}
			}
		}
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms-to-all-initialized")
		b.StopTimer()
		cancel()
		s.Close()
	}
}
