package adapter

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/internal/cputime"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// BenchmarkSN_Snapshot (issue 17): the initial snapshot of b.N rows of a
// 10-column table (8 regions) over loopback gRPC (PD's region cache,
// client-go's snapshot scans) into the document modality (metadata_aux
// off, no TEXT field) of an emulator on disk, with the default
// concurrency of 4. Run it with -benchtime=1000000x for the 1M
// rows. Reports rows/s (from Start until the stream runs), the process's
// peak RSS during the snapshot (VmHWM, reset after the rows were loaded
// into the embedded cluster, which lives in the same process) and the
// time until the first rows were searchable. Targets: >= 200k rows/s on
// 2 cores, first rows within 1 s, memory bounded by the quota.
func BenchmarkSN_Snapshot(b *testing.B) {
	ctx := context.Background()
	up, err := NewUpstream(ctx, UpstreamConfig{Seed: 1, RealClock: true, Wire: true})
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	ss := up.SQL.NewSession("")
	for _, q := range []string{"CREATE DATABASE bench",
		"CREATE TABLE bench.wide (id BIGINT PRIMARY KEY, a INT, b INT, c BIGINT, d VARCHAR(32), e VARCHAR(32), f DOUBLE, g INT, h VARCHAR(16), i BIGINT)"} {
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
	rows := int64(b.N)
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
	dir := b.TempDir()
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

	resetPeakRSS()
	var firstAt atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	began := time.Now()
	go func() {
		defer wg.Done()
		for {
			if docs, _, err := emu.Scan(ctx, "bench.wide", nil, "", 1); err == nil && len(docs) > 0 {
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
	cpu0 := cpuSeconds()
	b.ResetTimer()
	a, err := Start(ctx, up, emu, cfg)
	if err != nil {
		b.Fatal(err)
	}
	wall := time.Since(began)
	cpu := cpuSeconds() - cpu0
	b.StopTimer()
	close(stop)
	wg.Wait()
	defer a.Close()
	b.ReportMetric(float64(rows)/wall.Seconds(), "rows/s")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(mem.Quota.Peak())/(1<<20), "quota-peak-MiB")
	b.ReportMetric(time.Duration(firstAt.Load()).Seconds(), "first-doc-s")
	// CPU seconds of the whole process (the embedded cluster's servers
	// included) per row: on a loaded machine rows/s says more about the
	// load than the code, rows per CPU second does not.
	b.ReportMetric(float64(rows)/cpu, "rows/cpu-s")
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 { return cputime.Process().Seconds() }
