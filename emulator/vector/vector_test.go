package vector

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("vector.seed", 0, "seed for randomized vector tests (0 = fixed default)")

func seed(t testing.TB) int64 {
	s := *seedFlag
	if s == 0 {
		if v := os.Getenv("SFEMU_TEST_SEED"); v != "" {
			s, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if s == 0 {
		s = 20261129
	}
	t.Logf("seed=%d (rerun with -vector.seed=%d)", s, s)
	return s
}

func randVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// bruteForce is an independent float64 reference: the k nearest by
// (distance, pk).
func bruteForce(m Metric, data map[string][]float32, q []float32, k int, filter func(string) bool) []Hit {
	var out []Hit
	for pk, v := range data {
		if filter != nil && !filter(pk) {
			continue
		}
		var d float64
		switch m {
		case Cosine:
			var dp, na, nb float64
			for i := range v {
				dp += float64(v[i]) * float64(q[i])
				na += float64(v[i]) * float64(v[i])
				nb += float64(q[i]) * float64(q[i])
			}
			d = 1 - dp/math.Sqrt(na*nb)
		case L2:
			var s float64
			for i := range v {
				x := float64(v[i]) - float64(q[i])
				s += x * x
			}
			d = math.Sqrt(s)
		}
		out = append(out, Hit{PK: pk, Distance: d})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Distance != out[j].Distance {
			return out[i].Distance < out[j].Distance
		}
		return out[i].PK < out[j].PK
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// Rules VEC-S1, VEC-M1, VEC-M2: exact search equals brute force for both metrics
// through a seeded random sequence of upserts, replacements and deletes.
//
// Rule VEC-S3: filtered exact searches equal the filtered brute force.
func TestExactMatchesBruteForce(t *testing.T) {
	s := seed(t)
	for _, m := range []Metric{Cosine, L2} {
		t.Run(m.String(), func(t *testing.T) {
			r := rand.New(rand.NewSource(s))
			const dim = 8
			x, err := NewWithOptions(dim, m, Options{HNSWThreshold: -1})
			require.NoError(t, err)
			data := map[string][]float32{}
			for step := 0; step < 2000; step++ {
				pk := "p" + strconv.Itoa(r.Intn(300))
				if r.Intn(5) == 0 {
					_, had := data[pk]
					require.Equal(t, had, x.Delete(pk), "seed %d step %d", s, step)
					delete(data, pk)
					continue
				}
				v := randVec(r, dim)
				require.NoError(t, x.Upsert(pk, v))
				data[pk] = v
			}
			require.Equal(t, len(data), x.Len())
			for qi := 0; qi < 50; qi++ {
				q := randVec(r, dim)
				k := 1 + r.Intn(20)
				var filter func(string) bool
				if qi%2 == 1 {
					filter = func(pk string) bool { return len(pk)%2 == 0 }
				}
				got, err := x.SearchFiltered(q, k, filter)
				require.NoError(t, err)
				want := bruteForce(m, data, q, k, filter)
				require.Len(t, got, len(want), "seed %d query %d", s, qi)
				for i := range want {
					require.Equal(t, want[i].PK, got[i].PK, "seed %d query %d rank %d", s, qi, i)
					require.InDelta(t, want[i].Distance, got[i].Distance, 1e-4, "seed %d query %d rank %d", s, qi, i)
				}
			}
		})
	}
}

// Rule VEC-M1/VEC-M2: distance and score values on a hand-checked example.
func TestDistanceAndScore(t *testing.T) {
	c, err := New(2, Cosine)
	require.NoError(t, err)
	require.NoError(t, c.Upsert("same", []float32{2, 0}))
	require.NoError(t, c.Upsert("ortho", []float32{0, 5}))
	require.NoError(t, c.Upsert("opp", []float32{-1, 0}))
	h, err := c.Search([]float32{1, 0}, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"same", "ortho", "opp"}, []string{h[0].PK, h[1].PK, h[2].PK})
	require.InDelta(t, 0, h[0].Distance, 1e-6)
	require.InDelta(t, 1, h[0].Score, 1e-6)
	require.InDelta(t, 1, h[1].Distance, 1e-6)
	require.InDelta(t, 2, h[2].Distance, 1e-6)
	require.InDelta(t, -1, h[2].Score, 1e-6)

	l, err := New(2, L2)
	require.NoError(t, err)
	require.NoError(t, l.Upsert("a", []float32{3, 4}))
	h, err = l.Search([]float32{0, 0}, 5)
	require.NoError(t, err)
	require.Len(t, h, 1)
	require.InDelta(t, 5, h[0].Distance, 1e-6)
	require.InDelta(t, 1.0/6, h[0].Score, 1e-6)
}

// Rule VEC-S2: ties by ascending PK.
func TestTiesByPK(t *testing.T) {
	x, err := New(2, L2)
	require.NoError(t, err)
	for _, pk := range []string{"d", "b", "c", "a"} {
		require.NoError(t, x.Upsert(pk, []float32{1, 1}))
	}
	h, err := x.Search([]float32{0, 0}, 3)
	require.NoError(t, err)
	require.Equal(t, "a", h[0].PK)
	require.Equal(t, "b", h[1].PK)
	require.Equal(t, "c", h[2].PK)
}

// Rule VEC-E1: bad input errors name the problem.
//
// Rule VEC-M3: a NaN component is rejected naming its index.
func TestBadInput(t *testing.T) {
	_, err := New(0, Cosine)
	require.ErrorContains(t, err, "dimension must be positive, got 0")
	_, err = New(3, Metric(9))
	require.ErrorContains(t, err, "unknown metric")
	_, err = ParseMetric("manhattan")
	require.ErrorContains(t, err, `unknown metric "manhattan"`)
	m, err := ParseMetric("Euclidean")
	require.NoError(t, err)
	require.Equal(t, L2, m)

	x, err := New(3, Cosine)
	require.NoError(t, err)
	require.ErrorContains(t, x.Upsert("a", []float32{1, 2}), `vector of pk "a" has dimension 2, index dimension is 3`)
	require.ErrorContains(t, x.Upsert("a", []float32{0, 0, 0}), "zero vector")
	require.ErrorContains(t, x.Upsert("a", []float32{1, float32(math.NaN()), 0}), "component 1 is NaN")
	require.ErrorContains(t, x.Upsert("", []float32{1, 2, 3}), "empty primary key")
	require.Zero(t, x.Len(), "rejected upserts must not change the index")
	_, err = x.Search([]float32{1, 2, 3, 4}, 1)
	require.ErrorContains(t, err, "query vector has dimension 4, index dimension is 3")
	_, err = x.Search([]float32{1, 2, 3}, 0)
	require.ErrorContains(t, err, "k must be positive, got 0")
	h, err := x.Search([]float32{1, 2, 3}, 5)
	require.NoError(t, err)
	require.Empty(t, h)

	// L2 accepts the zero vector.
	y, err := New(2, L2)
	require.NoError(t, err)
	require.NoError(t, y.Upsert("z", []float32{0, 0}))
	require.False(t, y.Delete("nope"))
}

// Rule VEC-H2: the stored vector is a copy; mutating the caller's slice does
// not change the index.
func TestUpsertCopies(t *testing.T) {
	x, err := New(2, L2)
	require.NoError(t, err)
	v := []float32{1, 2}
	require.NoError(t, x.Upsert("a", v))
	v[0] = 100
	got, ok := x.Get("a")
	require.True(t, ok)
	require.Equal(t, []float32{1, 2}, got)
}

// graphOnly answers from the HNSW graph without the exact fallback, so a
// recall measurement cannot be flattered by the fallback.
func graphOnly(t *testing.T, x *Index, q []float32, k int) []Hit {
	t.Helper()
	qv, err := x.checkQuery(q, k)
	require.NoError(t, err)
	x.mu.RLock()
	defer x.mu.RUnlock()
	require.NotNil(t, x.g, "graph not built")
	require.Empty(t, x.pending, "graph does not cover every vector yet")
	hits, ok := x.searchIndexed(qv, k, nil)
	require.True(t, ok, "graph could not answer")
	return hits
}

func recallAt(got []Hit, want []Hit) float64 {
	ws := map[string]bool{}
	for _, h := range want {
		ws[h.PK] = true
	}
	n := 0
	for _, h := range got {
		if ws[h.PK] {
			n++
		}
	}
	return float64(n) / float64(len(want))
}

// Rule VEC-H1: above the threshold the HNSW graph answers with recall@10 >= 0.9
// against the exact scan on a seeded random set, for both metrics.
func TestHNSWRecall(t *testing.T) {
	s := seed(t)
	for _, m := range []Metric{Cosine, L2} {
		t.Run(m.String(), func(t *testing.T) {
			r := rand.New(rand.NewSource(s))
			const dim, n, queries = 32, 2500, 60
			x, err := NewWithOptions(dim, m, Options{HNSWThreshold: 1000, Seed: s})
			require.NoError(t, err)
			for i := 0; i < n; i++ {
				require.NoError(t, x.Upsert(fmt.Sprintf("v%05d", i), randVec(r, dim)))
			}
			require.False(t, x.UsingHNSW(), "VEC-G3: no graph before the first search")
			x.Arm()
			x.WaitGraph()
			require.True(t, x.UsingHNSW())
			var sum float64
			for i := 0; i < queries; i++ {
				q := randVec(r, dim)
				got := graphOnly(t, x, q, 10)
				want, err := x.SearchExact(q, 10, nil)
				require.NoError(t, err)
				require.Len(t, got, 10)
				sum += recallAt(got, want)
			}
			recall := sum / queries
			t.Logf("%s recall@10 = %.3f (seed %d)", m, recall, s)
			require.GreaterOrEqual(t, recall, 0.9, "seed %d", s)
		})
	}
}

// Rules VEC-H2, VEC-H3: with the graph active, deleted and replaced vectors are
// never returned, replacements are found at their new position, the graph
// is rebuilt when tombstones pile up, and dropped below half the threshold.
//
// Rule VEC-S3: a filter too selective for the graph window falls back to the
// exact scan.
func TestHNSWDeletesAndReplacements(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	const dim = 16
	x, err := NewWithOptions(dim, L2, Options{HNSWThreshold: 400, Seed: s, Eager: true})
	require.NoError(t, err)
	data := map[string][]float32{}
	for i := 0; i < 1000; i++ {
		pk := "k" + strconv.Itoa(i)
		v := randVec(r, dim)
		require.NoError(t, x.Upsert(pk, v))
		data[pk] = v
	}
	x.WaitGraph()
	require.True(t, x.UsingHNSW())
	// Delete 300, replace 200 (moves a vector far away).
	for i := 0; i < 300; i++ {
		pk := "k" + strconv.Itoa(i)
		require.True(t, x.Delete(pk))
		delete(data, pk)
	}
	for i := 300; i < 500; i++ {
		pk := "k" + strconv.Itoa(i)
		v := randVec(r, dim)
		for j := range v {
			v[j] += 50
		}
		require.NoError(t, x.Upsert(pk, v))
		data[pk] = v
	}
	x.WaitGraph()
	require.True(t, x.UsingHNSW())
	x.mu.RLock()
	require.LessOrEqual(t, x.g.dead, len(x.g.nodePK)/4, "tombstones must trigger a rebuild")
	require.Empty(t, x.pending, "the builder indexes the replacements")
	x.mu.RUnlock()
	for i := 0; i < 30; i++ {
		q := randVec(r, dim)
		if i%2 == 0 {
			for j := range q {
				q[j] += 50
			}
		}
		got, err := x.Search(q, 10)
		require.NoError(t, err)
		require.Len(t, got, 10)
		for _, h := range got {
			v, ok := data[h.PK]
			require.True(t, ok, "deleted pk %s returned (seed %d)", h.PK, s)
			var d float64
			for j := range v {
				e := float64(v[j] - q[j])
				d += e * e
			}
			require.InDelta(t, math.Sqrt(d), h.Distance, 1e-3, "stale vector returned for %s (seed %d)", h.PK, s)
		}
		want := bruteForce(L2, data, q, 10, nil)
		require.GreaterOrEqual(t, recallAt(got, want), 0.7, "seed %d query %d", s, i)
	}
	// Filter so selective the graph window cannot satisfy it: exact fallback.
	only := "k999"
	got, err := x.SearchFiltered(randVec(r, dim), 3, func(pk string) bool { return pk == only })
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, only, got[0].PK)

	for i := 300; i < 850; i++ {
		x.Delete("k" + strconv.Itoa(i))
	}
	require.Equal(t, 150, x.Len())
	require.False(t, x.UsingHNSW(), "graph is dropped below half the threshold")
}

// Rule VEC-C1: readers, a writer and the background builder concurrently
// (run under -race).
func TestConcurrentSearchAndUpsert(t *testing.T) {
	s := seed(t)
	x, err := NewWithOptions(8, Cosine, Options{HNSWThreshold: 200, Seed: s})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewSource(s))
		for i := 0; i < 600; i++ {
			_ = x.Upsert("k"+strconv.Itoa(r.Intn(400)), randVec(r, 8))
			if i%7 == 0 {
				x.Delete("k" + strconv.Itoa(r.Intn(400)))
			}
		}
	}()
	for g := 0; g < 2; g++ {
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(s + int64(g) + 1))
			for i := 0; i < 300; i++ {
				if _, err := x.Search(randVec(r, 8), 5); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
