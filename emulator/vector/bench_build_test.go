package vector

import (
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/internal/cputime"
)

// e2eVec is the adapter catch-up benchmark's VECTOR(4) value for row id
// (adapter benchShape.row): distinct pseudo-random directions.
func e2eVec(id int) []float32 {
	h := uint32(id) * 2654435761
	return []float32{float32(h>>24 | 1), float32(h >> 16 & 255), float32(h >> 8 & 255), float32(id%1000 + 1)}
}

// benchBuild measures what the vector modality costs per vector, split
// into the apply path (Upsert: the slab only, VEC-G1) and the background
// graph build that follows, in process CPU (the builder has its own
// goroutine), with the recall@10 of the finished graph on 50 queries.
// SFEMU_BENCH_EFC sets efConstruction, SFEMU_BENCH_EF efSearch (default:
// the package's).
func benchBuild(b *testing.B, dim int, gen func(i int) []float32) {
	vecs := make([][]float32, b.N)
	for i := range vecs {
		vecs[i] = gen(i)
	}
	efc, _ := strconv.Atoi(os.Getenv("SFEMU_BENCH_EFC"))
	x, err := NewWithOptions(dim, Cosine, Options{HNSWThreshold: 1, EfConstruction: efc, EfSearch: benchEf()})
	if err != nil {
		b.Fatal(err)
	}
	pks := make([]string, b.N)
	for i := range pks {
		pks[i] = "v" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	applyCPU, applyWall := upsertAll(b, x, pks, vecs)
	cpu1, t1 := cputime.Process(), time.Now()
	x.Arm()
	x.WaitGraph()
	cpu2, t2 := cputime.Process(), time.Now()
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(per(applyCPU), "apply-cpu-µs/vec")
	b.ReportMetric(per(cpu2-cpu1), "graph-cpu-µs/vec")
	b.ReportMetric(float64(b.N)/applyWall.Seconds(), "apply-vec/s")
	b.ReportMetric(float64(b.N)/t2.Sub(t1).Seconds(), "graph-vec/s")
	if x.Tail() != 0 || !x.UsingHNSW() {
		b.Fatalf("graph incomplete: tail %d", x.Tail())
	}
	r := rand.New(rand.NewSource(7))
	var sum float64
	const nq = 50
	for i := 0; i < nq; i++ {
		q := gen(r.Intn(1 << 30))
		got, _ := x.Search(q, 10)
		want, _ := x.SearchExact(q, 10, nil)
		sum += recallAt(got, want)
	}
	b.ReportMetric(sum/nq, "recall@10")
}

// BenchmarkBuild4d is the adapter catch-up's vector column (VECTOR(4)).
func BenchmarkBuild4d(b *testing.B) { benchBuild(b, 4, e2eVec) }

// BenchmarkBuild128d uses the latent benchmark distribution (vecGen).
func BenchmarkBuild128d(b *testing.B) {
	next := vecGen(1)
	benchBuild(b, benchDim, func(int) []float32 { return next() })
}
