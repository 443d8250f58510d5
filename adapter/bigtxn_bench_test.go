package adapter

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/verify"
)

// BenchmarkRS_BigTransaction (issue 15): one transaction of b.N rows
// through the in-process pipeline with a 256 MiB memory quota, from its
// commit until safe_ts covers it (run with -benchtime=1000000x for the
// issue's 1M rows). Reports rows/s, the peak Go heap (runtime/metrics,
// sampled every 10 ms) and the process's peak RSS (VmHWM, reset before
// the transaction) in MiB; the targets are peak RSS <= quota + 128 MiB
// and >= 100k rows/s through spill on 2 cores.
func BenchmarkRS_BigTransaction(b *testing.B) {
	const quota = 256 << 20
	r := newBigTxnRig(b, quota)
	resetPeakRSS()
	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peakHeap.Load() {
				peakHeap.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	b.ResetTimer()
	start := time.Now()
	r.bigTxn(b, 1, int64(b.N), 8)
	final, err := r.up.Cluster.CurrentTs(r.ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := verify.WaitSafe(r.ctx, r.emu, bulkTables, final, 30*time.Minute); err != nil {
		b.Fatalf("%v (runtime: %v)", err, r.a.RT.Err())
	}
	wall := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "rows/s")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(r.mem.Quota.Peak())/(1<<20), "quota-peak-MiB")
	b.ReportMetric(float64(r.spillRuns()), "spill-runs")
}

// resetPeakRSS resets the kernel's peak RSS (VmHWM) of this process, so
// peakRSS measures from here (Linux; a no-op elsewhere).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM in bytes (0 when unknown).
func peakRSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
