package adapter

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/internal/cputime"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// snapBenchUpstreamEnv selects BenchmarkSN_Snapshot's upstream: unset, the
// embedded cluster in this process; "process", sfemu-upstream in its own
// process.
const snapBenchUpstreamEnv = "SFEMU_SNAPSHOT_BENCH_UPSTREAM"

// snapBenchEmulatorEnv=process serves BenchmarkSN_Snapshot's emulator
// from another process (startEmulatorProcess) over gRPC.
const snapBenchEmulatorEnv = "SFEMU_SNAPSHOT_BENCH_EMULATOR"

// snapBenchDDL is the benchmark's 10-column table.
var snapBenchDDL = []string{"CREATE DATABASE bench",
	"CREATE TABLE bench.wide (id BIGINT PRIMARY KEY, a INT, b INT, c BIGINT, d VARCHAR(32), e VARCHAR(32), f DOUBLE, g INT, h VARCHAR(16), i BIGINT)"}

// BenchmarkSN_Snapshot (issue 17): the initial snapshot of b.N rows of a
// 10-column table over loopback gRPC (PD's region cache, client-go's
// snapshot scans) into the document modality (metadata_aux off, no TEXT
// field) of an emulator on disk in this process, with the default
// concurrency of 4. Run it with -benchtime=1000000x for the 1M
// rows. Targets: >= 200k rows/s on 2 cores, first rows within 1 s, memory
// bounded by the quota.
//
// By default the upstream is the embedded cluster in this process (the
// table split into 8 regions, the rows written to its MVCC directly), so
// peak-RSS-MiB holds the upstream's copy of the rows as well.
// SFEMU_SNAPSHOT_BENCH_UPSTREAM=process runs sfemu-upstream in its own
// process instead (startUpstreamProcess): the rows are written through its
// MySQL front (transactions of 20,000 rows) and the adapter reads them
// over PD and client-go as from a real cluster. Its SQL has no SPLIT, so
// the table is the one region TiDB gives a new table.
//
// Reported: rows/s (from Start until the stream runs), cpu-µs/row and
// rows/cpu-s (this process's CPU: in the default mode the embedded
// cluster's servers included, so the two modes' figures differ by that),
// first-doc-s (time until the first rows were searchable), quota-peak-MiB,
// and the memory of this process from just before Start (after the load
// and a GC): peak-RSS-MiB (VmHWM, reset there), peak-heap-MiB (heap
// objects, garbage not yet swept included, sampled every 10 ms),
// peak-live-MiB (the heap each GC found live, sampled alike),
// base-live-MiB (live before Start), emulator-retained-MiB (live after a
// GC at the end minus base: the emulator's documents, plus the stream's
// small state) and transient-live-MiB (peak live minus base minus
// retained: what the snapshot machinery held live on its way, chunks,
// batches and buffers; it must not grow with the rows). In the process
// mode also upstream-cpu-µs/row and upstream-peak-RSS-MiB (/proc).
// SFEMU_BIGTXN_PEAK_PROFILE=file writes a heap profile at about the peak
// (watchHeap), SFEMU_SNAPSHOT_BENCH_END_PROFILE=file one after the final
// GC.
func BenchmarkSN_Snapshot(b *testing.B) {
	ctx := context.Background()
	rows := int64(b.N)
	dir := b.TempDir()
	var up *Upstream
	var upPid string
	switch mode := os.Getenv(snapBenchUpstreamEnv); mode {
	case "":
		up = snapBenchInProcess(b, ctx, rows)
	case "process":
		up, upPid = snapBenchUpstreamProcess(b, ctx, dir, rows)
	default:
		b.Fatalf("%s=%q: want unset or process", snapBenchUpstreamEnv, mode)
	}
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer emu.Close()
	mem, err := NewMemory(DefaultMemoryQuota, -1, dir)
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{DataDir: dir, Tables: []TableRef{{DB: "bench", Table: "wide"}}, Memory: mem,
		Snapshot: SnapshotConfig{Mode: SnapshotAuto, Progress: &snapshot.Progress{}}}
	cfg.Bridge.DisableMetadataAux = true
	firstDoc := func() bool {
		docs, _, err := emu.Scan(ctx, "bench.wide", nil, "", 1)
		return err == nil && len(docs) > 0
	}
	var emuPid string
	switch mode := os.Getenv(snapBenchEmulatorEnv); mode {
	case "":
	case "process":
		remote, pid := startEmulatorProcess(b, filepath.Join(dir, "remote-emulator"))
		emuPid = strconv.Itoa(pid)
		cfg.WrapSink = func(normalize.Sink) normalize.Sink { return remote }
		firstDoc = func() bool {
			st, err := remote.Control.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "bench.wide"})
			return err == nil && st.GetDocCount() > 0
		}
	default:
		b.Fatalf("%s=%q: want unset or process", snapBenchEmulatorEnv, mode)
	}

	runtime.GC()
	baseLive := liveHeap()
	resetPeakRSS()
	peak, peakLive := watchHeap(), watchLiveHeap()
	var firstAt atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	began := time.Now()
	go func() {
		defer wg.Done()
		for {
			if firstDoc() {
				firstAt.Store(int64(time.Since(began)))
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	cpu0, upCPU0 := cpuSeconds(), procCPUSeconds(upPid)
	b.ResetTimer()
	a, err := Start(ctx, up, emu, cfg)
	if err != nil {
		b.Fatal(err)
	}
	wall := time.Since(began)
	cpu, upCPU := cpuSeconds()-cpu0, procCPUSeconds(upPid)-upCPU0
	b.StopTimer()
	close(stop)
	wg.Wait()
	defer a.Close()
	peakHeap, maxLive, hwm := peak(), peakLive(), peakRSS()
	runtime.GC()
	retained := int64(liveHeap()) - int64(baseLive)
	if p := os.Getenv("SFEMU_SNAPSHOT_BENCH_END_PROFILE"); p != "" {
		writeHeapProfile(p) // what the snapshot left live
	}
	perRow := func(s float64) float64 { return s * 1e6 / float64(rows) }
	b.ReportMetric(float64(rows)/wall.Seconds(), "rows/s")
	b.ReportMetric(perRow(cpu), "cpu-µs/row")
	// Rows per CPU second of this process: on a loaded machine rows/s
	// says more about the load than the code, rows per CPU second does
	// not.
	b.ReportMetric(float64(rows)/cpu, "rows/cpu-s")
	b.ReportMetric(time.Duration(firstAt.Load()).Seconds(), "first-doc-s")
	b.ReportMetric(mib(hwm), "peak-RSS-MiB")
	b.ReportMetric(mib(int64(peakHeap)), "peak-heap-MiB")
	b.ReportMetric(mib(int64(maxLive)), "peak-live-MiB")
	b.ReportMetric(mib(int64(baseLive)), "base-live-MiB")
	b.ReportMetric(mib(retained), "emulator-retained-MiB")
	b.ReportMetric(mib(int64(maxLive)-int64(baseLive)-retained), "transient-live-MiB")
	b.ReportMetric(mib(mem.Quota.Peak()), "quota-peak-MiB")
	if upPid != "" {
		b.ReportMetric(perRow(upCPU), "upstream-cpu-µs/row")
		b.ReportMetric(mib(procStatus(upPid, "VmHWM:")), "upstream-peak-RSS-MiB")
	}
	if emuPid != "" {
		b.ReportMetric(mib(procStatus(emuPid, "VmHWM:")), "emulator-peak-RSS-MiB")
	}
}

// snapBenchInProcess is the embedded cluster over loopback gRPC holding
// rows rows of bench.wide, the table split into 8 regions.
func snapBenchInProcess(b *testing.B, ctx context.Context, rows int64) *Upstream {
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: 1, RealClock: true, Wire: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { up.Close() })
	ss := up.SQL.NewSession("")
	for _, q := range snapBenchDDL {
		if _, err := ss.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	ti, _, err := up.SQL.TableInfo("bench", "wide")
	if err != nil {
		b.Fatal(err)
	}
	var cols []int64
	for _, c := range ti.Columns[1:] {
		cols = append(cols, c.ID)
	}
	var val []byte
	for start := int64(0); start < rows; start += 20000 {
		txn := up.Cluster.Begin()
		for i := start; i < min(start+20000, rows); i++ {
			val, err = rowcodec.EncodeV2(val[:0], cols, []value.Datum{
				value.NewIntDatum(i % 1000), value.NewIntDatum(i % 7), value.NewIntDatum(i * 3),
				value.NewStringDatum(fmt.Sprintf("name-%d", i)), value.NewStringDatum("category"), value.NewFloat64Datum(float64(i) / 3),
				value.NewIntDatum(i % 100), value.NewStringDatum("x"), value.NewIntDatum(-i)}, nil)
			if err != nil {
				b.Fatal(err)
			}
			key := tablecodec.EncodeIntRecordKey(nil, ti.ID, i)
			if i == start {
				txn.SetPrimary(key)
			}
			txn.Set(key, val)
		}
		if _, err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	for k := int64(1); k < 8 && rows >= 8; k++ {
		if _, _, err := up.Cluster.SplitRaw(tablecodec.EncodeIntRecordKey(nil, ti.ID, rows*k/8)); err != nil {
			b.Fatal(err)
		}
	}
	return up
}

// snapBenchUpstreamProcess starts sfemu-upstream in its own process,
// writes rows rows of bench.wide through its MySQL front (the same values
// as snapBenchInProcess) and connects to it over PD; it returns the
// upstream and the process's pid.
func snapBenchUpstreamProcess(b *testing.B, ctx context.Context, dir string, rows int64) (*Upstream, string) {
	p := startUpstreamProcess(b, dir)
	db, err := sql.Open("mysql", p.dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	c, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	exec := func(q string) {
		if _, err := c.ExecContext(ctx, q); err != nil {
			b.Fatalf("%.80s: %v", q, err)
		}
	}
	for _, q := range snapBenchDDL {
		exec(q)
	}
	var q strings.Builder
	for start := int64(0); start < rows; start += 20000 {
		exec("BEGIN")
		for from := start; from < min(start+20000, rows); from += 1000 {
			q.Reset()
			q.WriteString("INSERT INTO bench.wide VALUES ")
			for i := from; i < min(from+1000, rows); i++ {
				if i > from {
					q.WriteByte(',')
				}
				fmt.Fprintf(&q, "(%d,%d,%d,%d,'name-%d','category',%s,%d,'x',%d)",
					i, i%1000, i%7, i*3, i, strconv.FormatFloat(float64(i)/3, 'g', -1, 64), i%100, -i)
			}
			exec(q.String())
		}
		exec("COMMIT")
	}
	up, err := ConnectUpstream(ctx, []string{p.pd})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { up.Close() })
	return up, strconv.Itoa(p.cmd.Process.Pid)
}

// liveHeap is the heap the last GC found live (runtime/metrics
// /gc/heap/live:bytes): unlike heapObjects it holds no garbage, so it
// does not swing with GOGC's slack.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchLiveHeap samples liveHeap every 10 ms until the returned function
// is called; that returns the peak.
func watchLiveHeap() func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v := liveHeap(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(stop); <-done; return peak.Load() }
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 { return cputime.Process().Seconds() }
