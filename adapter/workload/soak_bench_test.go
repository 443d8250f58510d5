package workload_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/adapter/workload"
	"github.com/searchfabric/sfemu/fakeupstream/demo"
	"github.com/searchfabric/sfemu/internal/cputime"
)

// soakEnv reads a soak parameter from the environment (def when unset).
func soakEnv(b *testing.B, name string, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func cpuTime() time.Duration { return cputime.Process() }

// rssBytes is the process's resident set (Linux /proc; 0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// BenchmarkSoak (issue 16's soak, upstream side): the demo workload at
// SFEMU_SOAK_RATE tx/s (default 200) against the durable embedded
// upstream (PD and TiKV servers, background GC with a
// SFEMU_SOAK_GC_LIFETIME window, default 1m, and log compaction) whose
// products table was first filled to SFEMU_SOAK_ROWS rows (default
// 100000), for SFEMU_SOAK_DURATION (default 30s; the soak is
// SFEMU_SOAK_DURATION=10m SFEMU_SOAK_ROWS=1000000). It logs one line per
// window (a minute, or a fifth of a shorter run): tx/s, CPU of the process
// (the workload, SQL front, MVCC, log and maintenance all run in it),
// heap, RSS, log size, fsyncs, compactions and the load average; and
// reports the first and last window's rate, their ratio, CPU, and
// heap/RSS/log growth. SFEMU_SOAK_LANES sets the runner's lanes (default
// workload.DefaultLanes). The fill runs with the default compaction
// trigger; then the log is compacted once (so the window starts from the
// live state) and the trigger is set to SFEMU_SOAK_COMPACT_GROWTH
// (MaintainConfig.Growth, default here 1.1: with 1M rows, about 200 MiB
// live, the demo's +5 MiB/min passes it within about 4 minutes, so a
// 10-minute window shows the sawtooth; the product default 2 compacts
// about once an hour). Numbers, not asserts: the machine's load decides
// them.
func BenchmarkSoak(b *testing.B) {
	dur, err := time.ParseDuration(soakEnv(b, "SFEMU_SOAK_DURATION", "30s"))
	if err != nil {
		b.Fatalf("SFEMU_SOAK_DURATION: %v", err)
	}
	rows, err := strconv.Atoi(soakEnv(b, "SFEMU_SOAK_ROWS", "100000"))
	if err != nil {
		b.Fatalf("SFEMU_SOAK_ROWS: %v", err)
	}
	rate, err := strconv.Atoi(soakEnv(b, "SFEMU_SOAK_RATE", "200"))
	if err != nil {
		b.Fatalf("SFEMU_SOAK_RATE: %v", err)
	}
	life, err := time.ParseDuration(soakEnv(b, "SFEMU_SOAK_GC_LIFETIME", "1m"))
	if err != nil {
		b.Fatalf("SFEMU_SOAK_GC_LIFETIME: %v", err)
	}
	lanes, err := strconv.Atoi(soakEnv(b, "SFEMU_SOAK_LANES", "0"))
	if err != nil {
		b.Fatalf("SFEMU_SOAK_LANES: %v", err)
	}
	growth, err := strconv.ParseFloat(soakEnv(b, "SFEMU_SOAK_COMPACT_GROWTH", "1.1"), 64)
	if err != nil {
		b.Fatalf("SFEMU_SOAK_COMPACT_GROWTH: %v", err)
	}
	window := time.Minute
	if dur < 3*time.Minute {
		window = dur / 5
	}
	for i := 0; i < b.N; i++ {
		ctx := context.Background()
		cfg := adapter.UpstreamConfig{Seed: 1, RealClock: true, Wire: true, Dir: b.TempDir()}
		cfg.Servers.GCLifeTime = life
		up, err := adapter.NewUpstream(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		ss := up.SQL.NewSession("")
		if err := demo.Setup(ctx, ss); err != nil {
			b.Fatal(err)
		}
		fill := time.Now()
		const batch = 500
		var sb strings.Builder
		for lo := 1; lo <= rows; lo += batch {
			sb.Reset()
			sb.WriteString("INSERT INTO demo.products (id, title, description, category, price, stock, attrs, embedding, updated_at) VALUES ")
			for id := lo; id < lo+batch && id <= rows; id++ {
				if id > lo {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "(%d,'soak %d','a preloaded product','tools',%d.50,%d,'{\"rating\": 3}','[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8]','2024-01-01 00:00:00.000')", id, id, 1+id%500, id%100)
			}
			if _, err := ss.Exec(ctx, sb.String()); err != nil {
				b.Fatal(err)
			}
		}
		soakLog(b, "filled demo.products with %d rows in %v; log %.1f MiB", rows, time.Since(fill).Round(time.Second), float64(up.Cluster.LogSize())/(1<<20))
		cst, err := up.Cluster.Compact()
		if err != nil {
			b.Fatal(err)
		}
		up.Cluster.SetCompactGrowth(growth)
		soakLog(b, "compacted after the fill: %.1f -> %.1f MiB in %v; trigger %.2f x", float64(cst.Before)/(1<<20), float64(cst.After)/(1<<20), cst.Took.Round(time.Millisecond), growth)
		r, err := workload.New(ctx, up.SQL, up.Cluster, workload.Config{Seed: 1, Rate: rate, DDLEvery: 500, Lanes: lanes})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		rctx, cancel := context.WithCancel(ctx)
		var pause sync.Mutex
		runErr := make(chan error, 1)
		go func() { runErr <- r.Run(rctx, &pause) }()

		type sample struct {
			rate, cpu           float64
			heap, rss, logBytes int64
		}
		var series []sample
		var ms runtime.MemStats
		steps0, cpu0, t0, syncs0 := r.Steps(), cpuTime(), time.Now(), up.Cluster.LogSyncs()
		runtime.ReadMemStats(&ms)
		heap0, rss0, log0 := int64(ms.HeapInuse), rssBytes(), up.Cluster.LogSize()
		soakLog(b, "start: heap %.0f MiB rss %.0f MiB log %.1f MiB", float64(heap0)/(1<<20), float64(rss0)/(1<<20), float64(log0)/(1<<20))
		prof := startWindowProfile(b, 1)
		end := time.Now().Add(dur)
		for time.Now().Before(end) {
			select {
			case err := <-runErr:
				b.Fatalf("workload stopped: %v", err)
			case <-time.After(window):
			}
			steps, cpu, now, syncs := r.Steps(), cpuTime(), time.Now(), up.Cluster.LogSyncs()
			prof.stop()
			prof = startWindowProfile(b, len(series)+2)
			runtime.ReadMemStats(&ms)
			el := now.Sub(t0).Seconds()
			s := sample{rate: float64(steps-steps0) / el, cpu: float64(cpu-cpu0) / float64(now.Sub(t0)),
				heap: int64(ms.HeapInuse), rss: rssBytes(), logBytes: up.Cluster.LogSize()}
			series = append(series, s)
			nc, lc := up.Cluster.Compactions()
			soakLog(b, "window %d: %.0f tx/s cpu %.0f%% heap %.0f MiB rss %.0f MiB log %.1f MiB fsyncs %.0f/s compactions %d (last %.0f -> %.0f MiB in %v) load %s",
				len(series), s.rate, 100*s.cpu, float64(s.heap)/(1<<20), float64(s.rss)/(1<<20), float64(s.logBytes)/(1<<20),
				float64(syncs-syncs0)/el, nc, float64(lc.Before)/(1<<20), float64(lc.After)/(1<<20), lc.Took.Round(time.Millisecond), loadAvg())
			steps0, cpu0, t0, syncs0 = steps, cpu, now, syncs
		}
		prof.stop()
		cancel()
		if err := <-runErr; err != nil {
			b.Fatalf("workload: %v", err)
		}
		if err := up.Cluster.MaintainErr(); err != nil {
			b.Fatalf("background maintenance: %v", err)
		}
		if err := up.Close(); err != nil {
			b.Fatal(err)
		}
		if len(series) > 0 {
			first, last := series[0], series[len(series)-1]
			b.ReportMetric(first.rate, "first-tx/s")
			b.ReportMetric(last.rate, "last-tx/s")
			b.ReportMetric(100*last.rate/first.rate, "last/first-%")
			b.ReportMetric(100*last.cpu, "last-cpu-%")
			b.ReportMetric(float64(last.heap-heap0)/(1<<20), "heap-growth-MiB")
			b.ReportMetric(float64(last.rss-rss0)/(1<<20), "rss-growth-MiB")
			b.ReportMetric(float64(last.logBytes-log0)/(1<<20), "log-growth-MiB")
		}
	}
}

// soakLog logs a line of the soak to the benchmark's log and to stderr
// as it happens: the testing package keeps only the first lines of a
// benchmark's log, and a 10-minute soak has more.
func soakLog(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "soak: "+format+"\n", args...)
}

// loadAvg is the machine's 1-minute load average (Linux /proc; "?"
// elsewhere): a window's rate means little without it on a shared box.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// windowProfile is the CPU profile of one soak window
// (SFEMU_SOAK_PROFILE_DIR/cpu-window-N.pprof): comparing the first and the
// last window's profiles shows what grows when the rate decays.
type windowProfile struct{ f *os.File }

func startWindowProfile(b *testing.B, n int) windowProfile {
	dir := os.Getenv("SFEMU_SOAK_PROFILE_DIR")
	if dir == "" {
		return windowProfile{}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-window-%d.pprof", n)))
	if err != nil {
		b.Fatalf("SFEMU_SOAK_PROFILE_DIR: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("cpu profile: %v", err)
	}
	return windowProfile{f: f}
}

func (p windowProfile) stop() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	p.f.Close()
}
