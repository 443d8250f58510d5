package vector

import (
	"math"
	"math/rand"
	"sync"
)

// hnswGraph is a Hierarchical Navigable Small World graph (Malkov and
// Yashunin, 2016), written here because github.com/coder/hnsw v0.6.1 measured
// recall@10 of 0.17-0.54 on 4,000 random 32-dim vectors even at ef=800: its
// layer search stops at the first expansion that does not beat the current
// best result, so it is a greedy walk rather than a beam search (see
// specs/emulator-text-vector.md, VEC-H1).
//
// Nodes are append-only ordinals; a node is never unlinked. Tombstoning is the
// caller's business (graph.nodePK), which keeps dead nodes as stepping stones
// and avoids the repair problems of in-place deletion.
//
// An hnswGraph is not safe for concurrent use: add needs exclusive access,
// search may run concurrently with other searches (graph.mu arbitrates).
type hnswGraph struct {
	dim    int
	cosine bool // distance 1-dot on unit vectors; otherwise squared L2
	m      int  // max links per node above layer 0 (and of a new node)
	m0     int  // max links per node on layer 0
	efC    int  // candidate list size during construction
	ml     float64
	rng    *rand.Rand

	vecs []float32 // node i at vecs[i*dim:(i+1)*dim]
	// Layer 0 is a fixed-size region per node (l0[i*m0:], l0n[i] used) so
	// an insert allocates nothing for it; the few nodes above layer 0 keep
	// up[i][l-1]. Links carry their distance to the node, so pruning an
	// overfull list needs no distance calls.
	l0  []nodeDist
	l0n []uint16
	up  [][][]nodeDist

	entry    int // -1 when empty
	maxLevel int
	// upBytes is the memory of the upper-layer link lists, kept as they
	// grow so bytes is O(1) (the quota charges it after every round).
	upBytes int64

	ins         *scratch // add's scratch (add is exclusive)
	scratchPool sync.Pool
}

func newHNSWGraph(dim int, cosine bool, m, efConstruction int, seed int64) *hnswGraph {
	g := &hnswGraph{
		dim:    dim,
		cosine: cosine,
		m:      m,
		m0:     2 * m,
		efC:    efConstruction,
		ml:     1 / math.Log(float64(m)),
		rng:    rand.New(rand.NewSource(seed)),
		entry:  -1,
		ins:    &scratch{},
	}
	g.scratchPool.New = func() any { return &scratch{} }
	return g
}

// dist is the graph's ranking distance between stored-form vectors: a
// direct call on the metric's kernel instead of a function value, which
// the insert path calls thousands of times per vector.
func (g *hnswGraph) dist(a, b []float32) float32 {
	if g.cosine {
		return 1 - dot(a, b)
	}
	return l2sq(a, b)
}

func (g *hnswGraph) len() int { return len(g.l0n) }

func (g *hnswGraph) vec(n uint32) []float32 {
	return g.vecs[int(n)*g.dim : (int(n)+1)*g.dim : (int(n)+1)*g.dim]
}

// links returns n's neighbours on layer l (aliasing the graph's storage).
func (g *hnswGraph) links(n uint32, l int) []nodeDist {
	if l == 0 {
		base := int(n) * g.m0
		return g.l0[base : base+int(g.l0n[n])]
	}
	return g.up[n][l-1]
}

func (g *hnswGraph) setLinks(n uint32, l int, nbs []nodeDist) {
	if l == 0 {
		copy(g.l0[int(n)*g.m0:], nbs)
		g.l0n[n] = uint16(len(nbs))
		return
	}
	before := cap(g.up[n][l-1])
	g.up[n][l-1] = append(g.up[n][l-1][:0], nbs...)
	g.upBytes += nodeDistSize * int64(cap(g.up[n][l-1])-before)
}

// addBack links n to nb on layer l. An overfull list loses its farthest
// link (possibly the new one): pruning back links by distance alone,
// instead of re-running the heuristic, keeps inserts cheap; the new node's
// own links still use the heuristic.
func (g *hnswGraph) addBack(n uint32, l int, nb nodeDist) {
	max := g.m
	if l == 0 {
		max = g.m0
	}
	cur := g.links(n, l)
	if len(cur) < max {
		if l == 0 {
			g.l0[int(n)*g.m0+len(cur)] = nb
			g.l0n[n]++
		} else {
			before := cap(g.up[n][l-1])
			g.up[n][l-1] = append(g.up[n][l-1], nb)
			g.upBytes += nodeDistSize * int64(cap(g.up[n][l-1])-before)
		}
		return
	}
	far := 0
	for i := range cur {
		if cur[i].d > cur[far].d {
			far = i
		}
	}
	if nb.d < cur[far].d {
		cur[far] = nb
	}
}

// scratch is one search's reusable state: a generation-stamped visited
// marker and the two heaps.
type scratch struct {
	gen    uint32
	marks  []uint32
	cand   distHeap
	res    distHeap
	out    []nodeDist // searchLayer's sorted result
	sel    []nodeDist // add: the new node's chosen links
	pruned []nodeDist // add: candidates the heuristic passed over
	eps    []nodeDist // add: entry points for the next layer
}

func (s *scratch) reset(n int) {
	if len(s.marks) < n {
		s.marks = make([]uint32, n+n/4+64)
		s.gen = 0
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear
		clear(s.marks)
		s.gen = 1
	}
	s.cand.a = s.cand.a[:0]
	s.cand.far = false
	s.res.a = s.res.a[:0]
	s.res.far = true
}

// visit marks n and reports whether it was unvisited.
func (s *scratch) visit(n uint32) bool {
	if s.marks[n] == s.gen {
		return false
	}
	s.marks[n] = s.gen
	return true
}

type nodeDist struct {
	n uint32
	d float32
}

// distHeap is a binary heap of nodeDist without interface boxing; far
// selects a max-heap (farthest on top) instead of a min-heap. Equal
// distances keep the heap's order, which the same insertion sequence
// reproduces, so graphs stay reproducible (VEC-H3).
type distHeap struct {
	a   []nodeDist
	far bool
}

func (h *distHeap) less(i, j int) bool {
	if h.far {
		return h.a[i].d > h.a[j].d
	}
	return h.a[i].d < h.a[j].d
}

func (h *distHeap) push(x nodeDist) {
	h.a = append(h.a, x)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *distHeap) pop() nodeDist {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.less(l, m) {
			m = l
		}
		if r < last && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}

// greedy walks layer to the single closest node reachable from ep.
func (g *hnswGraph) greedy(q []float32, ep nodeDist, layer int) nodeDist {
	for changed := true; changed; {
		changed = false
		for _, nb := range g.links(ep.n, layer) {
			if d := g.dist(q, g.vec(nb.n)); d < ep.d {
				ep = nodeDist{nb.n, d}
				changed = true
			}
		}
	}
	return ep
}

// searchLayer is the beam search of the paper: it expands the closest
// unexpanded candidate until that candidate is farther than the worst of the
// ef best found so far. The result, in s.res.a, is sorted by ascending
// distance (then node) and valid until s is reused.
func (g *hnswGraph) searchLayer(s *scratch, q []float32, eps []nodeDist, ef, layer int) []nodeDist {
	s.reset(g.len())
	cand, res := &s.cand, &s.res
	for _, e := range eps {
		if s.visit(e.n) {
			cand.push(e)
			res.push(e)
			if len(res.a) > ef {
				res.pop()
			}
		}
	}
	dim, vecs, marks, gen := g.dim, g.vecs, s.marks, s.gen
	for len(cand.a) > 0 {
		c := cand.pop()
		if len(res.a) >= ef && c.d > res.a[0].d {
			break
		}
		for _, nb := range g.links(c.n, layer) {
			// s.visit and g.dist inlined by hand: this loop is most of
			// an insert's time.
			if marks[nb.n] == gen {
				continue
			}
			marks[nb.n] = gen
			o := int(nb.n) * dim
			v := vecs[o : o+dim : o+dim]
			var d float32
			if g.cosine {
				d = 1 - dot(q, v)
			} else {
				d = l2sq(q, v)
			}
			if len(res.a) < ef || d < res.a[0].d {
				cand.push(nodeDist{nb.n, d})
				res.push(nodeDist{nb.n, d})
				if len(res.a) > ef {
					res.pop()
				}
			}
		}
	}
	// Popping the max-heap yields the farthest first: fill from the back.
	n := len(res.a)
	if cap(s.out) < n {
		s.out = make([]nodeDist, n)
	}
	s.out = s.out[:n]
	for i := n - 1; i >= 0; i-- {
		s.out[i] = res.pop()
	}
	return s.out
}

// selectNeighbors is the paper's heuristic (algorithm 4) with pruned
// connections kept: a candidate is preferred when it is closer to the base
// than to every neighbour already chosen, which keeps links pointing in
// diverse directions; remaining slots are filled with the closest pruned
// candidates. cands must be sorted by ascending distance to the base. The
// result is in s.sel.
func (g *hnswGraph) selectNeighbors(s *scratch, cands []nodeDist, max int) []nodeDist {
	if len(cands) <= max {
		s.sel = append(s.sel[:0], cands...)
		return s.sel
	}
	chosen, pruned := s.sel[:0], s.pruned[:0]
	for _, c := range cands {
		if len(chosen) == max {
			break
		}
		good := true
		cv := g.vec(c.n)
		for _, sel := range chosen {
			if g.dist(cv, g.vec(sel.n)) < c.d {
				good = false
				break
			}
		}
		if good {
			chosen = append(chosen, c)
		} else {
			pruned = append(pruned, c)
		}
	}
	for _, p := range pruned {
		if len(chosen) == max {
			break
		}
		chosen = append(chosen, p)
	}
	s.sel, s.pruned = chosen, pruned
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
	if cap(g.l0)-len(g.l0) < g.m0 {
		grown := make([]nodeDist, len(g.l0), 2*cap(g.l0)+64*g.m0)
		copy(grown, g.l0)
		g.l0 = grown
	}
	g.l0 = g.l0[:len(g.l0)+g.m0]
	g.l0n = append(g.l0n, 0)
	var up [][]nodeDist
	if level > 0 {
		up = make([][]nodeDist, level)
		g.upBytes += sliceHeader * int64(level)
	}
	g.up = append(g.up, up)
	if g.entry < 0 {
		g.entry, g.maxLevel = int(n), level
		return n
	}
	q := g.vec(n)
	ep := nodeDist{uint32(g.entry), g.dist(q, g.vec(uint32(g.entry)))}
	for l := g.maxLevel; l > level; l-- {
		ep = g.greedy(q, ep, l)
	}
	s := g.ins
	s.eps = append(s.eps[:0], ep)
	for l := min(level, g.maxLevel); l >= 0; l-- {
		w := g.searchLayer(s, q, s.eps, g.efC, l)
		nbs := g.selectNeighbors(s, w, g.m)
		g.setLinks(n, l, nbs)
		for _, nb := range nbs {
			g.addBack(nb.n, l, nodeDist{n, nb.d})
		}
		s.eps = append(s.eps[:0], w...)
	}
	if level > g.maxLevel {
		g.entry, g.maxLevel = int(n), level
	}
	return n
}

// search returns up to ef nodes closest to q (stored form), sorted. It may
// run concurrently with other searches, not with add.
func (g *hnswGraph) search(q []float32, ef int) []nodeDist {
	if g.entry < 0 {
		return nil
	}
	ep := nodeDist{uint32(g.entry), g.dist(q, g.vec(uint32(g.entry)))}
	for l := g.maxLevel; l > 0; l-- {
		ep = g.greedy(q, ep, l)
	}
	s := g.scratchPool.Get().(*scratch)
	defer g.scratchPool.Put(s)
	return append([]nodeDist(nil), g.searchLayer(s, q, []nodeDist{ep}, ef, 0)...)
}
