package vector

import "slices"

// buildBatch is how many tail vectors the builder takes per round: large
// enough that picking and committing (under the index lock) are cheap per
// vector, small enough that a commit is a short critical section.
const buildBatch = 64

// Arm enables the background graph build, as the first graph-eligible
// search does (VEC-G3), and starts the builder if there is work.
func (x *Index) Arm() {
	if x.armed.Load() {
		return
	}
	x.mu.Lock()
	x.armed.Store(true)
	x.kickLocked()
	x.mu.Unlock()
}

// Armed reports whether the background build is enabled (by a search,
// Arm or Options.Eager).
func (x *Index) Armed() bool { return x.armed.Load() }

// kickLocked starts the builder goroutine when it is armed, not running
// and has work. Caller holds mu.
func (x *Index) kickLocked() {
	if x.building || !x.armed.Load() || x.closed.Load() || !x.needWorkLocked() {
		return
	}
	x.building = true
	go x.buildLoop()
}

func (x *Index) needWorkLocked() bool {
	if x.opts.HNSWThreshold < 0 {
		return false
	}
	if x.g == nil {
		return len(x.pks) >= x.opts.HNSWThreshold
	}
	return len(x.pending) > 0 || x.needRebuildLocked()
}

func (x *Index) needRebuildLocked() bool {
	return x.g.dead > 0 && x.g.dead > len(x.g.nodePK)/4
}

// Close stops the builder (at its next vector) and waits for it. Searches
// and writes keep working on the slab and whatever graph exists; nothing is
// built any more.
func (x *Index) Close() {
	x.closed.Store(true)
	x.mu.Lock()
	for x.building {
		x.idle.Wait()
	}
	x.mu.Unlock()
}

// WaitGraph blocks until the builder has nothing left to do: the graph
// covers every live vector (or there is no graph to build). It does not arm
// the builder; with an unarmed index below or above the threshold it
// returns at once.
func (x *Index) WaitGraph() {
	x.mu.Lock()
	for x.building {
		x.idle.Wait()
	}
	x.mu.Unlock()
}

// buildHook, when set by a test, runs in the builder before each round's
// inserts, without locks held.
var buildHook func()

// buildLoop moves tail vectors into the graph until none is left, and
// rebuilds the graph when tombstones exceed a quarter of its nodes. It
// never holds mu while inserting, so writers and searches proceed; the
// graph's own lock is held for one insert at a time.
func (x *Index) buildLoop() {
	type item struct {
		pk  string
		vec []float32
	}
	var batch []item
	var flat []float32
	for {
		x.mu.Lock()
		if x.closed.Load() || !x.needWorkLocked() {
			x.building = false
			x.idle.Broadcast()
			x.mu.Unlock()
			return
		}
		if x.g == nil {
			x.g = x.newGraph()
		}
		g := x.g
		if x.needRebuildLocked() {
			live := x.liveNodesLocked()
			x.mu.Unlock()
			x.rebuild(g, live)
			continue
		}
		n := min(len(x.pending), buildBatch)
		batch, flat = batch[:0], slices.Grow(flat[:0], n*x.dim)[:n*x.dim]
		for j, s := range x.pending[len(x.pending)-n:] {
			v := flat[j*x.dim : (j+1)*x.dim : (j+1)*x.dim]
			copy(v, x.vec(int(s)))
			batch = append(batch, item{x.pks[s], v})
		}
		x.mu.Unlock()

		if buildHook != nil {
			buildHook()
		}
		// Nodes get consecutive ordinals from the graph's size, which
		// only this goroutine changes: the j-th item becomes node first+j.
		first := g.h.len()
		for _, it := range batch {
			g.mu.Lock()
			g.h.add(it.vec)
			g.mu.Unlock()
		}

		x.mu.Lock()
		if x.g == g { // not dropped meanwhile
			for j, it := range batch {
				n := first + j
				s, ok := x.slot[it.pk]
				if ok && x.pend[s] >= 0 && slices.Equal(x.vec(s), it.vec) {
					g.nodePK = append(g.nodePK, it.pk)
					x.node[s] = int32(n)
					x.dropPending(s)
				} else { // replaced or deleted meanwhile: still in the tail
					g.nodePK = append(g.nodePK, "")
					g.dead++
				}
			}
		}
		x.mu.Unlock()
	}
}

func (x *Index) newGraph() *graph {
	return &graph{h: newHNSWGraph(x.dim, x.metric == Cosine, x.opts.M, x.opts.EfConstruction, x.opts.Seed)}
}

type liveNode struct {
	n  uint32
	pk string
}

func (x *Index) liveNodesLocked() []liveNode {
	out := make([]liveNode, 0, len(x.g.nodePK)-x.g.dead)
	for n, pk := range x.g.nodePK {
		if pk != "" {
			out = append(out, liveNode{uint32(n), pk})
		}
	}
	return out
}

// rebuild builds a fresh graph from old's live nodes (reading old's vectors
// without its lock: only this builder writes old) while searches keep using
// old, then swaps it in, keeping only the nodes still live in old: the tail
// is untouched, so every vector stays visible throughout (VEC-G2).
func (x *Index) rebuild(old *graph, live []liveNode) {
	ng := x.newGraph()
	for i, ln := range live {
		if i%256 == 0 && x.closed.Load() {
			return
		}
		ng.h.add(old.h.vec(ln.n))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.g != old {
		return
	}
	ng.nodePK = make([]string, len(live))
	for i, ln := range live {
		if old.nodePK[ln.n] != ln.pk { // deleted or replaced meanwhile
			ng.dead++
			continue
		}
		ng.nodePK[i] = ln.pk
		x.node[x.slot[ln.pk]] = int32(i)
	}
	x.g = ng
}
