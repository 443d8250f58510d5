package vector

import (
	"strconv"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/internal/cputime"
)

// BenchmarkApply4d is the vector modality's apply path alone (VEC-G1): b.N
// new 4-dim vectors upserted in batches of 512 (an ingested batch), no
// graph, in process CPU per vector (GC included: the slab's growth and
// its pointers are part of what a row costs).
func BenchmarkApply4d(b *testing.B) {
	vecs := make([][]float32, b.N)
	pks := make([]string, b.N)
	for i := range vecs {
		vecs[i] = e2eVec(i)
		pks[i] = strconv.Itoa(i)
	}
	x, err := NewWithOptions(4, Cosine, Options{HNSWThreshold: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu, wall := upsertAll(b, x, pks, vecs)
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/vec")
	b.ReportMetric(float64(b.N)/wall.Seconds(), "vec/s")
}

// upsertAll upserts vecs[i] under pks[i] and returns the process CPU and
// the wall time it took.
func upsertAll(b *testing.B, x *Index, pks []string, vecs [][]float32) (cpu, wall time.Duration) {
	cpu0, t0 := cputime.Process(), time.Now()
	for i, v := range vecs {
		if err := x.Upsert(pks[i], v); err != nil {
			b.Fatal(err)
		}
	}
	return cputime.Process() - cpu0, time.Since(t0)
}
