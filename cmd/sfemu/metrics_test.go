package main

import (
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listedMetrics reads the metric names of the SR12 table.
func listedMetrics(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../specs/sfemu-run.md")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	re := regexp.MustCompile("^\\s*\\| `([a-z_]+\\*?)` \\|")
	for _, l := range strings.Split(string(raw), "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) < 30 {
		t.Fatalf("SR12 table lists %d metrics: %v", len(names), names)
	}
	return names
}

// SR12: every metric the table lists is in a scrape of the running demo,
// with a sane value.
func TestBinaryMetricsListed(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	names := listedMetrics(t)
	// A low demo rate: the scrape needs rows flowing, not many.
	p, _ := startRun(t, t.TempDir(), "--rate", "50")
	defer p.stop(syscall.SIGINT)
	// Rows flow and the HTTP API has answered once before the scrape.
	getStatus(t, p.httpAddr)
	var body string
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.httpAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if e := resp.Header.Get("X-Sfemu-Metrics-Error"); e != "" {
			t.Fatalf("gathering: %s", e)
		}
		body = string(raw)
		// Families with labels appear with their first sample (the first
		// ingested batch comes after the reorder buffer's first seal):
		// scrape until every listed one is there, or report the missing.
		missing := 0
		for _, name := range names {
			if len(sampleValues(body, name)) == 0 {
				missing++
			}
		}
		if v := sampleValues(body, "sfemu_adapter_rows_total"); missing == 0 && len(v) == 1 && v[0] > 0 {
			break
		}
		if time.Now().After(deadline) {
			break // the checks below name what is missing
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	for _, name := range names {
		vals := sampleValues(body, name)
		if len(vals) == 0 {
			t.Errorf("metric %s (specs/sfemu-run.md SR12) is not in the scrape", name)
			continue
		}
		for _, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Errorf("metric %s has the value %v", name, v)
			}
		}
	}
	for _, name := range []string{"sfemu_adapter_rows_total", "sfemu_adapter_epoch", "sfemu_puller_streams_opened_total", "sfemu_puller_region_requests_total", "sfemu_gc_safe_point_ts", "sfemu_schemastore_tables", "sfemu_schemastore_table_versions", "go_goroutines", "process_resident_memory_bytes"} {
		if v := sampleValues(body, name); len(v) == 0 || v[0] <= 0 {
			t.Errorf("metric %s = %v, want > 0", name, v)
		}
	}
	if v := sampleValues(body, "sfemu_puller_region_resolved_lag_seconds"); len(v) == 0 || len(v) > maxRegionSeries {
		t.Errorf("per-region lag series: %d, want 1..%d", len(v), maxRegionSeries)
	}
	// RS11: sfemu run sets the soft memory limit to at least the default
	// --memory-quota (512 MiB) + 128 MiB less the binary's non-Go memory.
	if v := sampleValues(body, "sfemu_memory_limit_bytes"); len(v) != 1 || v[0] < 512<<20 {
		t.Errorf("sfemu_memory_limit_bytes = %v, want the adapter's soft memory limit (RS11) above the 512 MiB quota", v)
	}
	if !strings.Contains(body, `sfemu_adapter_state{state="streaming"} 1`) {
		t.Errorf("adapter not streaming in the scrape")
	}
}

// sampleValues are the values of the samples of a family (a name ending
// in * is a prefix; histograms count their _count and _sum samples).
func sampleValues(body, name string) []float64 {
	prefix := strings.TrimSuffix(name, "*")
	var out []float64
	for _, l := range strings.Split(body, "\n") {
		if l == "" || strings.HasPrefix(l, "#") || !strings.HasPrefix(l, prefix) {
			continue
		}
		series, val, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		base, _, _ := strings.Cut(series, "{")
		if name == prefix {
			base = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(base, "_bucket"), "_count"), "_sum")
			if base != name {
				continue
			}
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err == nil {
			out = append(out, v)
		}
	}
	return out
}
