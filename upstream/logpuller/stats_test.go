package logpuller

import (
	"context"
	"testing"
	"time"
)

// T16: the gRPC transport publishes its live regions (span, store,
// initialized, resolved ts) for any goroutine to read, and nothing once
// Run returned.
func TestGRPCRegionStats(t *testing.T) {
	c := newDblCluster(t, 2, false)
	c.split(1, 2, rawKey(1, 50))
	src, err := NewGRPCSource(TransportConfig{ClusterID: c.clusterID, Locator: c.locator, StoreReconnectBackoff: 20 * time.Millisecond, RegionRetryInterval: 10 * time.Millisecond, BusyBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src.regions.every = time.Nanosecond // copy on every round
	if got := src.RegionStats(); got != nil {
		t.Fatalf("before Run: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	rec := newSyncRecorder()
	if err := src.Subscribe(context.Background(), 7, tableSpan(1), tsAt(1000), rec); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two registrations", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.regs) == 2 })
	c.resolve(tsAt(1010))
	eventually(t, "both regions initialized at resolved ts 1010 in the stats", func() bool {
		rs := src.RegionStats()
		if len(rs) != 2 {
			return false
		}
		for _, r := range rs {
			if r.SubID != 7 || !r.Initialized || r.ResolvedTs != tsAt(1010) || r.Store == "" {
				return false
			}
		}
		return rs[0].RegionID < rs[1].RegionID
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	if got := src.RegionStats(); got != nil {
		t.Errorf("after Run returned: %v", got)
	}
}
