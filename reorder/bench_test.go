package reorder

import (
	"testing"

	"github.com/searchfabric/sfemu/internal/cputime"
)

type benchRow struct {
	pk     []byte
	fields [10]uint64
}

// BenchmarkAddSealDrain measures the steady state of one partition: rows
// arrive with a little out-of-order jitter, a checkpoint seals every 256
// rows, and the sealed rows are drained into a reused slice.
func BenchmarkAddSealDrain(b *testing.B) {
	buf, err := New[benchRow](Config{Partition: "table:1", MaxUnsealedRows: 4096, MaxUnsealedBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]Item[benchRow], 0, 512)
	pk := []byte("pk")
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	ts := uint64(1000)
	for i := 0; i < b.N; i++ {
		ts += 2
		commit := ts
		if i%7 == 3 {
			commit = ts - 3 // jitter: arrives after a newer row
		}
		if err := buf.Add(commit, 100, benchRow{pk: pk}); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			if err := buf.SealCheckpoint(ts - 8); err != nil {
				b.Fatal(err)
			}
			dst = buf.Drain(dst[:0])
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/row")
}

// cpuTime is the process's user+system CPU time in ns: on a shared, loaded
// machine it is a steadier per-row cost than wall time.
func cpuTime() int64 { return int64(cputime.Process()) }

// BenchmarkBacklog is one region's catch-up: b.N rows buffered with no
// seal (the incremental scan), then one seal and one drain. "inorder"
// rows arrive by commit_ts; "scan" arrive in key order, i.e. commit_ts
// shuffled, so the seal sorts the whole backlog.
func BenchmarkBacklog(b *testing.B) {
	for _, mode := range []string{"inorder", "scan"} {
		b.Run(mode, func(b *testing.B) {
			buf, err := New[benchRow](Config{Partition: "table:1", MaxUnsealedRows: b.N + 1, MaxUnsealedBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			pk := []byte("pk")
			var x uint64 = 88172645463325252
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				ts := uint64(1000 + i)
				if mode == "scan" {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					ts = 1000 + x%uint64(b.N)
				}
				if err := buf.Add(ts, 100, benchRow{pk: pk}); err != nil {
					b.Fatal(err)
				}
			}
			if err := buf.SealCheckpoint(uint64(1000 + b.N)); err != nil {
				b.Fatal(err)
			}
			if out := buf.Drain(nil); len(out) != b.N {
				b.Fatalf("drained %d of %d", len(out), b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/row")
		})
	}
}
