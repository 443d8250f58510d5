package vector

import (
	"container/heap"
	"math"
	"math/rand"
	"sort"
	"sync"
)

// hnswGraph is a Hierarchical Navigable Small World graph (Malkov and
// Yashunin, 2016), written here because github.com/coder/hnsw v0.6.1 measured
// recall@10 of 0.17-0.54 on 4,000 random 32-dim vectors even at ef=800: its
// layer search stops at the first expansion that does not beat the current
// best result, so it is a greedy walk rather than a beam search (see
// specs/emulator-text-vector.md, V-H1).
//
// Nodes are append-only ordinals; a node is never unlinked. Tombstoning is the
// caller's business (graph.nodePK), which keeps dead nodes as stepping stones
// and avoids the repair problems of in-place deletion.
type hnswGraph struct {
	dim  int
	dist func(a, b []float32) float32
	m    int // max links per node above layer 0
	m0   int // max links per node on layer 0
	efC  int // candidate list size during construction
	ml   float64
	rng  *rand.Rand

	vecs  []float32    // node i at vecs[i*dim:(i+1)*dim]
	links [][][]uint32 // links[node][layer]

	entry    int // -1 when empty
	maxLevel int

	visitedPool sync.Pool
}

func newHNSWGraph(dim int, dist func(a, b []float32) float32, m, efConstruction int, seed int64) *hnswGraph {
	g := &hnswGraph{
		dim:   dim,
		dist:  dist,
		m:     m,
		m0:    2 * m,
		efC:   efConstruction,
		ml:    1 / math.Log(float64(m)),
		rng:   rand.New(rand.NewSource(seed)),
		entry: -1,
	}
	g.visitedPool.New = func() any { return &visitedSet{} }
	return g
}

func (g *hnswGraph) len() int { return len(g.links) }

func (g *hnswGraph) vec(n uint32) []float32 {
	return g.vecs[int(n)*g.dim : (int(n)+1)*g.dim : (int(n)+1)*g.dim]
}

// visitedSet is a generation-stamped visited marker reused across searches.
type visitedSet struct {
	gen   uint32
	marks []uint32
}

func (v *visitedSet) reset(n int) {
	if len(v.marks) < n {
		v.marks = make([]uint32, n+n/4+64)
		v.gen = 0
	}
	v.gen++
	if v.gen == 0 { // wrapped: clear
		clear(v.marks)
		v.gen = 1
	}
}

// visit marks n and reports whether it was unvisited.
func (v *visitedSet) visit(n uint32) bool {
	if v.marks[n] == v.gen {
		return false
	}
	v.marks[n] = v.gen
	return true
}

type nodeDist struct {
	n uint32
	d float32
}

// minHeap pops the closest first; maxHeap keeps the farthest on top.
type minHeap []nodeDist
type maxHeap []nodeDist

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].d < h[j].d }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(nodeDist)) }
func (h *minHeap) Pop() any {
	o := *h
	x := o[len(o)-1]
	*h = o[:len(o)-1]
	return x
}
func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i].d > h[j].d }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(nodeDist)) }
func (h *maxHeap) Pop() any {
	o := *h
	x := o[len(o)-1]
	*h = o[:len(o)-1]
	return x
}

// greedy walks layer to the single closest node reachable from ep.
func (g *hnswGraph) greedy(q []float32, ep nodeDist, layer int) nodeDist {
	for changed := true; changed; {
		changed = false
		for _, nb := range g.links[ep.n][layer] {
			if d := g.dist(q, g.vec(nb)); d < ep.d {
				ep = nodeDist{nb, d}
				changed = true
			}
		}
	}
	return ep
}

// searchLayer is the beam search of the paper: it expands the closest
// unexpanded candidate until that candidate is farther than the worst of the
// ef best found so far. The result is sorted by ascending distance.
func (g *hnswGraph) searchLayer(q []float32, eps []nodeDist, ef, layer int) []nodeDist {
	vs := g.visitedPool.Get().(*visitedSet)
	defer g.visitedPool.Put(vs)
	vs.reset(g.len())

	cand := make(minHeap, 0, ef*2)
	res := make(maxHeap, 0, ef+1)
	for _, e := range eps {
		if vs.visit(e.n) {
			cand = append(cand, e)
			res = append(res, e)
		}
	}
	heap.Init(&cand)
	heap.Init(&res)
	for len(res) > ef {
		heap.Pop(&res)
	}
	for cand.Len() > 0 {
		c := heap.Pop(&cand).(nodeDist)
		if len(res) >= ef && c.d > res[0].d {
			break
		}
		for _, nb := range g.links[c.n][layer] {
			if !vs.visit(nb) {
				continue
			}
			d := g.dist(q, g.vec(nb))
			if len(res) < ef || d < res[0].d {
				heap.Push(&cand, nodeDist{nb, d})
				heap.Push(&res, nodeDist{nb, d})
				if len(res) > ef {
					heap.Pop(&res)
				}
			}
		}
	}
	out := []nodeDist(res)
	sort.Slice(out, func(i, j int) bool { return out[i].d < out[j].d || (out[i].d == out[j].d && out[i].n < out[j].n) })
	return out
}

// selectNeighbors is the paper's heuristic (algorithm 4) with pruned
// connections kept: a candidate is preferred when it is closer to the base
// than to every neighbour already chosen, which keeps links pointing in
// diverse directions; remaining slots are filled with the closest pruned
// candidates. cands must be sorted by ascending distance to the base.
func (g *hnswGraph) selectNeighbors(cands []nodeDist, max int) []uint32 {
	if len(cands) <= max {
		out := make([]uint32, len(cands))
		for i, c := range cands {
			out[i] = c.n
		}
		return out
	}
	chosen := make([]uint32, 0, max)
	var pruned []uint32
	for _, c := range cands {
		if len(chosen) == max {
			break
		}
		good := true
		cv := g.vec(c.n)
		for _, s := range chosen {
			if g.dist(cv, g.vec(s)) < c.d {
				good = false
				break
			}
		}
		if good {
			chosen = append(chosen, c.n)
		} else {
			pruned = append(pruned, c.n)
		}
	}
	for _, p := range pruned {
		if len(chosen) == max {
			break
		}
		chosen = append(chosen, p)
	}
	return chosen
}

func (g *hnswGraph) randomLevel() int {
	u := g.rng.Float64()
	if u == 0 {
		u = math.SmallestNonzeroFloat64
	}
	return int(-math.Log(u) * g.ml)
}

// add inserts v (already in stored form) and returns its node ordinal.
func (g *hnswGraph) add(v []float32) uint32 {
	n := uint32(g.len())
	g.vecs = append(g.vecs, v...)
	level := g.randomLevel()
	g.links = append(g.links, make([][]uint32, level+1))
	if g.entry < 0 {
		g.entry, g.maxLevel = int(n), level
		return n
	}
	q := g.vec(n)
	ep := nodeDist{uint32(g.entry), g.dist(q, g.vec(uint32(g.entry)))}
	for l := g.maxLevel; l > level; l-- {
		ep = g.greedy(q, ep, l)
	}
	eps := []nodeDist{ep}
	for l := min(level, g.maxLevel); l >= 0; l-- {
		w := g.searchLayer(q, eps, g.efC, l)
		maxLinks := g.m
		if l == 0 {
			maxLinks = g.m0
		}
		nbs := g.selectNeighbors(w, g.m)
		g.links[n][l] = nbs
		for _, nb := range nbs {
			g.links[nb][l] = append(g.links[nb][l], n)
			if len(g.links[nb][l]) > maxLinks {
				g.shrink(nb, l, maxLinks)
			}
		}
		eps = w
	}
	if level > g.maxLevel {
		g.entry, g.maxLevel = int(n), level
	}
	return n
}

// shrink re-selects node's links on layer to at most max.
func (g *hnswGraph) shrink(node uint32, layer, max int) {
	nv := g.vec(node)
	cur := g.links[node][layer]
	cands := make([]nodeDist, len(cur))
	for i, c := range cur {
		cands[i] = nodeDist{c, g.dist(nv, g.vec(c))}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].d < cands[j].d })
	g.links[node][layer] = g.selectNeighbors(cands, max)
}

// search returns up to ef nodes closest to q (stored form), sorted.
func (g *hnswGraph) search(q []float32, ef int) []nodeDist {
	if g.entry < 0 {
		return nil
	}
	ep := nodeDist{uint32(g.entry), g.dist(q, g.vec(uint32(g.entry)))}
	for l := g.maxLevel; l > 0; l-- {
		ep = g.greedy(q, ep, l)
	}
	return g.searchLayer(q, []nodeDist{ep}, ef, 0)
}
