package logpuller

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// countingConsumer counts rows and keeps the last resolved ts; it copies
// nothing, so the benchmark measures the transport and the core.
type countingConsumer struct {
	rows     atomic.Int64
	resolved atomic.Uint64
}

func (c *countingConsumer) ConsumeKV(es []kvevent.RawKVEntry) { c.rows.Add(int64(len(es))) }
func (c *countingConsumer) AdvanceResolvedTs(ts uint64)       { c.resolved.Store(ts) }

func waitFor(b *testing.B, cond func() bool) {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatal("benchmark timed out")
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkGRPCLiveRows: live PREWRITE/COMMIT pairs over loopback gRPC
// through EventFeedV2 to a consumer (one op = one row).
func BenchmarkGRPCLiveRows(b *testing.B) {
	c := newDblCluster(b, 1, false)
	src, err := NewGRPCSource(TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() { cancel(); <-done; _ = src.Close() }()
	cons := &countingConsumer{}
	if err := src.Subscribe(context.Background(), 1, tableSpan(1), tsAt(1000), cons); err != nil {
		b.Fatal(err)
	}
	waitFor(b, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 1 })
	value := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	const txnRows = 2048
	ts := int64(1001)
	for sent := 0; sent < b.N; sent += txnRows {
		n := min(txnRows, b.N-sent)
		c.commitMany(1, int64(sent), n, value, tsAt(ts), tsAt(ts+1))
		ts += 2
		if sent%(txnRows*16) == 0 {
			// A resolved-ts tick (TiKV sends one per second per region;
			// here every 32k rows) lets the core prune its delivered set.
			c.resolve(tsAt(ts - 1))
			c.mu.Lock()
			c.rows = c.rows[:0] // keep the double's memory flat
			c.mu.Unlock()
		}
	}
	waitFor(b, func() bool { return cons.rows.Load() >= int64(b.N) })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkGRPCSubscribe10kRegions: subscribing one span of 10k regions
// until every region is initialized and the span resolved ts moves; reports
// the heap held per region.
func BenchmarkGRPCSubscribe10kRegions(b *testing.B) {
	const regions = 10000
	c := newDblCluster(b, 1, false)
	c.splitMany(1, regions)
	b.ReportAllocs()
	var heapPerRegion float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		src, err := NewGRPCSource(TransportConfig{ClusterID: c.clusterID, Locator: c.locator})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		go func() { done <- src.Run(ctx) }()
		cons := &countingConsumer{}
		if err := src.Subscribe(context.Background(), 1, tableSpan(1), tsAt(1000), cons); err != nil {
			b.Fatal(err)
		}
		waitFor(b, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == regions })
		c.resolve(tsAt(1001))
		waitFor(b, func() bool { return cons.resolved.Load() == tsAt(1001) })
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heapPerRegion = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / regions
		cancel()
		<-done
		_ = src.Close()
		b.StartTimer()
	}
	b.ReportMetric(heapPerRegion, "heapB/region")
}
