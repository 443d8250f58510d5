package vector

import (
	"runtime"
	"strconv"
	"testing"
)

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Rule VEC-G4: Bytes accounts the index's memory (slab and graph) within
// 0.7x-1.4x of the live heap it adds, at 4 and 128 dims, before and after
// the graph is built; the graph costs at most its formula per vector.
func TestBytesMatchesTheHeap(t *testing.T) {
	for _, dim := range []int{4, 128} {
		t.Run(strconv.Itoa(dim), func(t *testing.T) {
			n := 20000
			if dim == benchDim {
				n = 5000 // the graph build dominates the test's time
			}
			if testing.Short() { // the race pass
				n /= 4
			}
			next := vecGen(3)
			vecs := make([][]float32, n)
			for i := range vecs {
				if dim == benchDim {
					vecs[i] = next()
				} else {
					vecs[i] = e2eVec(i)
				}
			}
			base := liveHeap()
			x, err := NewWithOptions(dim, Cosine, Options{HNSWThreshold: 1})
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vecs {
				if err := x.Upsert("v"+strconv.Itoa(i), v); err != nil {
					t.Fatal(err)
				}
			}
			slab := x.Bytes()
			check := func(what string, acct int64) {
				heap := liveHeap() - base
				ratio := float64(heap) / float64(acct)
				t.Logf("%d x %d %s: accounted %d B (%.0f B/vector), heap %d B, heap/accounted %.2f", n, dim, what, acct, float64(acct)/float64(n), heap, ratio)
				if ratio < 0.7 || ratio > 1.4 {
					t.Fatalf("%s: heap/accounted %.2f outside 0.7-1.4", what, ratio)
				}
			}
			check("slab", slab)
			x.Arm()
			x.WaitGraph()
			all := x.Bytes()
			check("slab+graph", all)
			// The formula of VEC-G4, with the slack of slice growth (2x).
			perVec := float64(all-slab) / float64(n)
			if limit := 2 * float64(4*dim+8*2*16+2+24+16); perVec > limit {
				t.Fatalf("graph costs %.0f B/vector, formula x2 allows %.0f", perVec, limit)
			}
			runtime.KeepAlive(x)
			runtime.KeepAlive(vecs) // base counted them: keep them out of the difference
		})
	}
}
