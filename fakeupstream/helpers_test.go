package fakeupstream_test

import (
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/internal/cputime"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

func cdcfeedConfig(intervalMs int64) cdcfeed.Config {
	return cdcfeed.Config{ResolvedTsIntervalMs: intervalMs}
}

// syncRecorder is a consumer read from another goroutine.
type syncRecorder struct {
	mu       sync.Mutex
	n        int
	resolved uint64
}

func (r *syncRecorder) ConsumeKV(entries []kvevent.RawKVEntry) {
	r.mu.Lock()
	r.n += len(entries)
	r.mu.Unlock()
}

func (r *syncRecorder) AdvanceResolvedTs(ts uint64) {
	r.mu.Lock()
	r.resolved = ts
	r.mu.Unlock()
}

func (r *syncRecorder) get() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolved
}

func (r *syncRecorder) rows() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

type countRecorder struct{ n, resolved uint64 }

func (r *countRecorder) ConsumeKV(entries []kvevent.RawKVEntry) { r.n += uint64(len(entries)) }
func (r *countRecorder) AdvanceResolvedTs(ts uint64)            { r.resolved = ts }

// cpuTime is the process's user+system CPU time. Benchmarks report rows
// per CPU-second beside rows per wall-second because the shared build
// machine is often oversubscribed, which inflates wall time only.
func cpuTime() time.Duration { return cputime.Process() }

func reportRows(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "rows/cpu-s")
	}
}
