package cdcfeed_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// recordKey is the raw record key of handle h in table 1.
func recordKey(h int64) []byte {
	k := []byte{'t'}
	k = binary.BigEndian.AppendUint64(k, 1^(1<<63))
	k = append(k, '_', 'r')
	return binary.BigEndian.AppendUint64(k, uint64(h)^(1<<63))
}

func recordSpan() kvevent.Span {
	p := []byte{'t'}
	p = binary.BigEndian.AppendUint64(p, 1^(1<<63))
	return kvevent.Span{StartKey: codec.EncodeBytes(nil, append(append([]byte{}, p...), '_', 'r')),
		EndKey: codec.EncodeBytes(nil, append(append([]byte{}, p...), '_', 's'))}
}

type countConsumer struct {
	rows     int
	resolved uint64
}

func (c *countConsumer) ConsumeKV(es []kvevent.RawKVEntry) { c.rows += len(es) }
func (c *countConsumer) AdvanceResolvedTs(ts uint64)       { c.resolved = ts }

// BenchmarkCatchUpScan: one region's catch-up, as the in-process Source
// runs it: a backlog of b.N committed rows in one region, one register
// (incremental scan), then DeliverAll and every message handed to the
// puller core until the resolved ts passes the last commit. One op = one
// row; the backlog is written before the timer starts.
func BenchmarkCatchUpScan(b *testing.B) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 100}})
	if err != nil {
		b.Fatal(err)
	}
	start := c.Oracle().Next()
	value := make([]byte, 48)
	var last uint64
	for h := 0; h < b.N; {
		tx := c.Begin()
		for i := 0; i < 512 && h < b.N; i++ {
			h++
			binary.BigEndian.PutUint64(value, uint64(h))
			tx.Set(recordKey(int64(h)), value)
		}
		if last, err = tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	cons := &countConsumer{}
	p, err := logpuller.NewSpanPuller(logpuller.Config{Span: recordSpan(), StartTs: start, Consumer: cons})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	r := c.RegionsInSpan(recordSpan())[0]
	piece, _ := logpuller.Intersect(kvevent.Span{StartKey: r.StartKey, EndKey: r.EndKey}, recordSpan())
	st, err := c.OpenStream(r.Leader)
	if err != nil {
		b.Fatal(err)
	}
	ts, err := p.AddRegion(r.ID, 1, piece)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Send(&cdcpb.ChangeDataRequest{RegionId: r.ID, RegionEpoch: r.Epoch(), CheckpointTs: ts,
		StartKey: piece.StartKey, EndKey: piece.EndKey, RequestId: 1, ExtraOp: kvrpcpb.ExtraOp_ReadOldValue,
		Request: &cdcpb.ChangeDataRequest_Register_{Register: &cdcpb.ChangeDataRequest_Register{}}}); err != nil {
		b.Fatal(err)
	}
	for p.ResolvedTs() <= last {
		c.DeliverAll()
		msgs, err := st.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) == 0 {
			c.ResolvedRound()
			continue
		}
		for _, m := range msgs {
			if m.ResolvedTs != nil {
				p.HandleResolvedTs(m.ResolvedTs)
				continue
			}
			for _, ev := range m.Events {
				if _, err := p.HandleEvent(ev); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	if cons.rows != b.N {
		b.Fatal(fmt.Sprintf("consumer got %d rows, want %d", cons.rows, b.N))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
