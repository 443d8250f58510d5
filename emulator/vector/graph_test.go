package vector

import (
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkCover asserts the invariant behind VEC-G2 under the index lock:
// every live vector is either in the tail (pending) or the current vector
// of exactly one live graph node, never both, never neither; every live
// node belongs to a live slot holding the node's vector.
func checkCover(t *testing.T, x *Index, seed int64, step int) {
	t.Helper()
	x.mu.RLock()
	defer x.mu.RUnlock()
	require.Equal(t, x.n, x.keys.n, "seed %d step %d: key table size", seed, step)
	inTail := 0
	for i := 0; i < x.n; i++ {
		pk := x.pk(i)
		_, s := x.keys.find(x.keys.hash(pk), pk, x)
		require.Equal(t, i, s, "seed %d step %d: key table", seed, step)
		pg, o := x.at(i)
		p, n := pg.pend[o], pg.node[o]
		require.True(t, (p >= 0) != (n >= 0), "seed %d step %d: %s pending=%d node=%d", seed, step, pk, p, n)
		if p >= 0 {
			inTail++
			require.Equal(t, int32(i), x.pending[p], "seed %d step %d: pending back-pointer of %s", seed, step, pk)
			continue
		}
		require.NotNil(t, x.g, "seed %d step %d", seed, step)
		require.Equal(t, pk, x.g.nodePK[n], "seed %d step %d: node %d of %s", seed, step, n, pk)
		x.g.mu.RLock()
		require.Equal(t, x.vec(i), x.g.h.vec(uint32(n)), "seed %d step %d: node %d holds a stale vector of %s", seed, step, n, pk)
		x.g.mu.RUnlock()
	}
	require.Equal(t, inTail, len(x.pending), "seed %d step %d: pending has extra entries", seed, step)
	if x.g != nil {
		live := 0
		for n, pk := range x.g.nodePK {
			if pk != "" {
				live++
				_, sl := x.keys.find(x.keys.hash(pk), pk, x)
				pg, o := x.at(sl)
				require.Equal(t, int32(n), pg.node[o], "seed %d step %d: live node %d of %s is not its slot's", seed, step, n, pk)
			}
		}
		require.Equal(t, len(x.g.nodePK)-x.g.dead, live, "seed %d step %d: dead count", seed, step)
	}
}

// Rule VEC-G2: while the background builder runs, upserts, replacements
// and deletes keep the graph and the tail an exact partition of the live
// vectors (checked after every write), and every search returns only live
// keys at their current distance, in the exact order of the keys it found.
// Rule VEC-H2: replaced vectors are found at their new position; the
// rebuild on tombstones keeps the partition.
func TestGraphAndTailCoverEveryVector(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	const dim = 6
	x, err := NewWithOptions(dim, L2, Options{HNSWThreshold: 50, Seed: s, Eager: true})
	require.NoError(t, err)
	data := map[string][]float32{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a concurrent reader: answers are always well-formed
		defer wg.Done()
		rr := rand.New(rand.NewSource(s + 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			h, err := x.Search(randVec(rr, dim), 5)
			if err != nil || !sort.SliceIsSorted(h, func(i, j int) bool { return h[i].Distance < h[j].Distance }) {
				t.Errorf("seed %d: search %v %v", s, h, err)
				return
			}
		}
	}()
	steps := 3000
	if testing.Short() { // the race pass
		steps = 1000
	}
	for step := 0; step < steps; step++ {
		pk := "k" + strconv.Itoa(r.Intn(400))
		if r.Intn(4) == 0 {
			_, had := data[pk]
			require.Equal(t, had, x.Delete(pk))
			delete(data, pk)
		} else {
			v := randVec(r, dim)
			require.NoError(t, x.Upsert(pk, v))
			data[pk] = v
		}
		if step%50 == 0 {
			checkCover(t, x, s, step)
			// Every live vector is its own nearest neighbour (filtered to
			// itself: the graph or the tail must hold it, the fallback
			// also would; the distance proves the current vector).
			for i := 0; i < 3; i++ {
				pk := "k" + strconv.Itoa(r.Intn(400))
				v, ok := data[pk]
				q := v
				if !ok {
					q = randVec(r, dim)
				}
				h, err := x.SearchFiltered(q, 1, func(p string) bool { return p == pk })
				require.NoError(t, err)
				if !ok {
					require.Empty(t, h, "seed %d step %d: deleted %s returned", s, step, pk)
					continue
				}
				require.Len(t, h, 1, "seed %d step %d", s, step)
				require.InDelta(t, 0, h[0].Distance, 1e-6, "seed %d step %d: stale vector of %s", s, step, pk)
			}
		}
	}
	close(stop)
	wg.Wait()
	x.WaitGraph()
	checkCover(t, x, s, -1)
	require.Zero(t, x.Tail(), "seed %d: the builder drains the tail", s)
	x.mu.RLock()
	require.LessOrEqual(t, x.g.dead, len(x.g.nodePK)/4, "seed %d: tombstones trigger a rebuild", s)
	x.mu.RUnlock()
}

// Rule VEC-G1: a write never waits for the graph: with the builder parked
// in the middle of a round (one round committed, the next picked but not
// inserted), upserts return, and searches combine the partial graph with
// the tail: the top 10 of 20 queries and the whole ranking equal the
// brute force, before and after the builder finishes.
// Rule VEC-C1: the builder holds no index lock while it inserts.
func TestWritesAndSearchesDoNotWaitForTheBuilder(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	const dim = 4
	x, err := NewWithOptions(dim, L2, Options{HNSWThreshold: 20, Seed: s})
	require.NoError(t, err)
	data := map[string][]float32{}
	put := func(i int) {
		pk := "k" + strconv.Itoa(i)
		v := randVec(r, dim)
		require.NoError(t, x.Upsert(pk, v))
		data[pk] = v
	}
	for i := 0; i < 100; i++ {
		put(i)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	rounds := 0
	buildHook = func() {
		if rounds++; rounds == 2 {
			close(entered)
			<-release
		}
	}
	t.Cleanup(func() { buildHook = nil })
	x.Arm()
	<-entered
	for i := 100; i < 300; i++ {
		put(i)
	}
	require.True(t, x.UsingHNSW())
	require.Equal(t, 300-buildBatch, x.Tail(), "one round in the graph, the rest in the tail")
	compare := func(when string) {
		for i := 0; i < 20; i++ {
			q := randVec(r, dim)
			h, err := x.Search(q, 10)
			require.NoError(t, err)
			sameHits(t, bruteForce(L2, data, q, 10, nil), h, s)
		}
		q := make([]float32, dim)
		h, err := x.Search(q, 300)
		require.NoError(t, err)
		sameHits(t, bruteForce(L2, data, q, 300, nil), h, s)
		t.Logf("%s: tail %d of %d", when, x.Tail(), x.Len())
	}
	compare("builder parked")
	close(release)
	x.WaitGraph()
	require.Zero(t, x.Tail())
	checkCover(t, x, s, 0)
	compare("graph built")
}

// sameHits compares hits with the brute-force reference: keys in order,
// distances up to float32 rounding (VEC-S1).
func sameHits(t *testing.T, want, got []Hit, seed int64) {
	t.Helper()
	require.Len(t, got, len(want), "seed %d", seed)
	for i := range want {
		require.Equal(t, want[i].PK, got[i].PK, "seed %d rank %d", seed, i)
		require.InDelta(t, want[i].Distance, got[i].Distance, 1e-5, "seed %d rank %d", seed, i)
	}
}

// Rule VEC-G3: an index nobody searches builds no graph, however large;
// the first search builds it in the background and answers meanwhile from
// graph and tail; an exact search does not start it.
func TestGraphIsBuiltOnFirstSearch(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	x, err := NewWithOptions(8, Cosine, Options{HNSWThreshold: 100, Seed: s})
	require.NoError(t, err)
	for i := 0; i < 500; i++ {
		require.NoError(t, x.Upsert("k"+strconv.Itoa(i), randVec(r, 8)))
	}
	x.WaitGraph()
	require.False(t, x.UsingHNSW())
	require.Equal(t, 500, x.Tail())
	_, err = x.SearchExact(randVec(r, 8), 3, nil)
	require.NoError(t, err)
	_, _, err = x.SearchKeys(randVec(r, 8), 0, false, nil) // k <= 0 is exact
	require.NoError(t, err)
	x.WaitGraph()
	require.False(t, x.UsingHNSW(), "exact searches do not start the build")
	q := randVec(r, 8)
	h, err := x.Search(q, 10)
	require.NoError(t, err)
	want, err := x.SearchExact(q, 10, nil)
	require.NoError(t, err)
	require.Equal(t, want, h, "the first search is answered in full")
	x.WaitGraph()
	require.True(t, x.UsingHNSW())
	require.Zero(t, x.Tail())
	x.Close()
	require.NoError(t, x.Upsert("late", randVec(r, 8)))
	x.WaitGraph()
	require.Equal(t, 1, x.Tail(), "a closed index builds nothing more")
	h, err = x.SearchFiltered(q, 1, func(pk string) bool { return pk == "late" })
	require.NoError(t, err)
	require.Len(t, h, 1, "but still answers from its tail")
}
