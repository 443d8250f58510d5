package adapter

import (
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/verify"
)

// BenchmarkRS_BigTransaction (issue 15): one transaction of b.N rows
// through the in-process pipeline with a 256 MiB memory quota
// (SFEMU_BIGTXN_BENCH_QUOTA_MIB sets another), from its prewrite until
// safe_ts covers it; run with -benchtime=1000000x for the 1M rows.
//
// The embedded upstream runs in the same process, so what is measured is
// named apart:
//   - the upstream's transaction is built (rows encoded and buffered in
//     its Txn) before the timer; the heap and RSS it holds then are the
//     baseline;
//   - upstream-cpu-µs/row is the CPU of the goroutine that prewrites and
//     commits it (locked to one thread, RUSAGE_THREAD): the upstream's
//     MVCC work and the CDC feed events it emits;
//   - pipeline-cpu-µs/row is the rest of the process's CPU (getrusage)
//     over the same interval: log puller, matcher, mounter, normalize,
//     reorder, spill, the emulator's ingest and indexes, and the garbage
//     collector (whose work is shared with the upstream's allocations);
//   - heap-growth-MiB / RSS-growth-MiB are the peaks above the baseline
//     (the upstream's MVCC copy of the transaction is in them: it holds
//     the prewritten and committed rows), quota-peak-MiB is what the
//     adapter itself held by its own accounting (RS1, LP13), which the
//     spill keeps under the quota.
//
// The targets (peak RSS <= quota + 128 MiB, >= 100k rows/s through
// spill on 2 cores) are about the adapter: compare them with quota-peak,
// heap/RSS growth minus the upstream's share, and 1/pipeline-cpu.
func BenchmarkRS_BigTransaction(b *testing.B) {
	quota := benchQuota(b)
	r := newBigTxnRig(b, quota)
	txn := r.buildBigTxn(b, 1, int64(b.N), 8)
	runtime.GC()
	baseHeap, baseRSS := heapObjects(), currentRSS()
	resetPeakRSS()
	peak := watchHeap()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuSeconds()
	upCPU := onOneThread(func() { r.finishBigTxn(b, 1, txn) })
	final, err := r.up.Cluster.CurrentTs(r.ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := verify.WaitSafe(r.ctx, r.emu, bulkTables, final, 30*time.Minute); err != nil {
		b.Fatalf("%v (runtime: %v)", err, r.a.RT.Err())
	}
	wall, cpu := time.Since(start), cpuSeconds()-cpu0
	b.StopTimer()
	peakHeap := peak()
	perRow := func(s float64) float64 { return s * 1e6 / float64(b.N) }
	_, mruns := r.a.MatcherSpill()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "rows/s")
	b.ReportMetric(perRow(cpu), "cpu-µs/row")
	b.ReportMetric(perRow(upCPU), "upstream-cpu-µs/row")
	b.ReportMetric(perRow(cpu-upCPU), "pipeline-cpu-µs/row")
	b.ReportMetric(mib(int64(peakHeap)-int64(baseHeap)), "heap-growth-MiB")
	b.ReportMetric(mib(peakRSS()-baseRSS), "RSS-growth-MiB")
	b.ReportMetric(mib(peakRSS()), "peak-RSS-MiB")
	b.ReportMetric(mib(r.mem.Quota.Peak()), "quota-peak-MiB")
	b.ReportMetric(float64(r.spillRuns()), "reorder-runs")
	b.ReportMetric(float64(mruns), "matcher-runs")
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// benchQuota is the big-transaction benchmarks' memory quota: 256 MiB, or
// SFEMU_BIGTXN_BENCH_QUOTA_MIB.
func benchQuota(b *testing.B) int64 {
	n := os.Getenv("SFEMU_BIGTXN_BENCH_QUOTA_MIB")
	if n == "" {
		return 256 << 20
	}
	mib, err := strconv.ParseInt(n, 10, 64)
	if err != nil || mib <= 0 {
		b.Fatalf("SFEMU_BIGTXN_BENCH_QUOTA_MIB=%q: want a positive number of MiB", n)
	}
	return mib << 20
}

// onOneThread runs f locked to one OS thread and returns the CPU seconds
// that thread spent in it (0 where per-thread CPU is unknown).
func onOneThread(f func()) float64 {
	var cpu float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := threadCPUSeconds()
		f()
		cpu = threadCPUSeconds() - t0
	}()
	<-done
	return cpu
}

// heapObjects is the Go heap's live and not yet swept object bytes.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchHeap samples heapObjects every 10 ms until the returned function
// is called; that returns the peak. With SFEMU_BIGTXN_PEAK_PROFILE set to
// a file, a heap profile (live objects as of the last GC, by allocation
// site) is written there whenever the peak grew by 1/16 since the last
// one: the last is the heap at about the peak.
func watchHeap() func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	profile := os.Getenv("SFEMU_BIGTXN_PEAK_PROFILE")
	var profiled uint64
	go func() {
		defer wg.Done()
		for {
			if v := heapObjects(); v > peak.Load() {
				peak.Store(v)
				if profile != "" && v > profiled+profiled/16 {
					profiled = v
					writeHeapProfile(profile)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(stop); wg.Wait(); return peak.Load() }
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	_ = pprof.WriteHeapProfile(f)
	_ = f.Close()
}

// resetPeakRSS resets the kernel's peak RSS (VmHWM) of this process, so
// peakRSS measures from here (Linux; a no-op elsewhere).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM in bytes, currentRSS VmRSS (0 when unknown).
func peakRSS() int64    { return procStatus("self", "VmHWM:") }
func currentRSS() int64 { return procStatus("self", "VmRSS:") }

// procStatus reads a field of /proc/<pid>/status in bytes (Linux; 0
// elsewhere).
func procStatus(pid, field string) int64 {
	raw, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
