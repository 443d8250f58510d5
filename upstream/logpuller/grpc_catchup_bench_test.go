package logpuller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// catchUpConsumer counts rows and stamps the first row, the last row and
// the resolved ts passing a target.
type catchUpConsumer struct {
	want     int64
	target   uint64
	rows     atomic.Int64
	first    atomic.Int64 // unix ns
	allRows  atomic.Int64
	resolved atomic.Int64
}

func (c *catchUpConsumer) ConsumeKV(es []kvevent.RawKVEntry) {
	now := time.Now().UnixNano()
	c.first.CompareAndSwap(0, now)
	if c.rows.Add(int64(len(es))) >= c.want {
		c.allRows.CompareAndSwap(0, now)
	}
}

func (c *catchUpConsumer) AdvanceResolvedTs(ts uint64) {
	if ts >= c.target {
		c.resolved.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// BenchmarkGRPCCatchUp: one region's backlog of b.N rows (written before
// the timer starts) read over loopback gRPC by a fresh GRPCSource with the
// default transport settings, as the wire pipeline's catch-up does: from
// Subscribe to the span's resolved ts passing the last commit. Reports the
// time to the first row, to the last row and to the resolved ts.
func BenchmarkGRPCCatchUp(b *testing.B) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Stores: 1, RealClock: true,
		Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancelOpen := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelOpen()
	cli, err := pd.Open(ctx, pd.Config{Endpoints: []string{s.PDAddr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	loc := pd.NewRegionLocator(cli)
	defer loc.Close()
	start, err := cli.CurrentTs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 48)
	var last uint64
	for h := 0; h < b.N; {
		tx := c.Begin()
		for i := 0; i < 512 && h < b.N; i++ {
			h++
			value[0], value[1], value[2] = byte(h), byte(h>>8), byte(h>>16)
			tx.Set(key(int64(h)), value)
		}
		if last, err = tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	src, err := logpuller.NewGRPCSource(logpuller.TransportConfig{ClusterID: cli.ClusterID(), Locator: loc})
	if err != nil {
		b.Fatal(err)
	}
	cons := &catchUpConsumer{want: int64(b.N), target: last}
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	if err := src.Subscribe(context.Background(), 1, tableSpan(), start, cons); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	deadline := time.Now().Add(120 * time.Second)
	for cons.resolved.Load() == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("catch-up did not finish: %d of %d rows", cons.rows.Load(), b.N)
		}
		time.Sleep(200 * time.Microsecond)
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	_ = src.Close()
	if got := cons.rows.Load(); got != int64(b.N) {
		b.Fatalf("consumer got %d rows, want %d", got, b.N)
	}
	ms := func(ns int64) float64 { return float64(time.Duration(ns-t0.UnixNano())) / 1e6 }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(ms(cons.first.Load()), "first-row-ms")
	b.ReportMetric(ms(cons.allRows.Load()), "last-row-ms")
	b.ReportMetric(ms(cons.resolved.Load()), "resolved-ms")
}
