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
	first := !x.armed.Swap(true)
	x.kickLocked()
	x.mu.Unlock()
	if first && x.opts.OnArm != nil {
		x.opts.OnArm()
	}
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
	if x.opts.HNSWThreshold < 0 || x.disk != nil {
		return false // a spilled index has no graph (VEC-Q1)
	}
	if x.g == nil {
		return x.n >= x.opts.HNSWThreshold
	}
	return len(x.pending) > 0 || x.needRebuildLocked()
}

func (x *Index) needRebuildLocked() bool {
	return x.g.dead > 0 && x.g.dead > len(x.g.nodePK)/4
}

// Close stops the builder (at its next vector) and waits for it, and
// returns the index's memory charge to its quota (the emulator closes a
// retired generation's indexes). Searches and writes keep working on the
// slab and whatever graph exists; nothing is built or charged any more.
func (x *Index) Close() {
	x.closed.Store(true)
	x.mu.Lock()
	for x.building {
		x.idle.Wait()
	}
	x.releaseCharge()
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
		pk   string
		slot int
		vec  []float32
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
			batch = append(batch, item{x.pk(int(s)), int(s), v})
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
				s := x.slotOf(it.pk, it.slot)
				if s >= 0 && x.pendOf(s) >= 0 && slices.Equal(x.vec(s), it.vec) {
					g.nodePK = append(g.nodePK, it.pk)
					p, o := x.at(s)
					p.node[o] = int32(n)
					x.dropPending(s)
				} else { // replaced or deleted meanwhile: still in the tail
					g.nodePK = append(g.nodePK, "")
					g.dead++
				}
			}
			x.graphBytes = g.bytes()
			x.chargeLocked()
		}
		x.mu.Unlock()
	}
}

// slotOf returns pk's slot, checking hint (where it was) before hashing:
// slots move only when a delete fills a hole. -1 when pk is gone.
func (x *Index) slotOf(pk string, hint int) int {
	if hint < x.n && x.pk(hint) == pk {
		return hint
	}
	_, s := x.keys.find(x.keys.hash(pk), pk, x)
	return s
}

func (x *Index) pendOf(i int) int32 {
	p, o := x.at(i)
	return p.pend[o]
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
	defer func() {
		x.mu.Lock()
		x.rebuildBytes = 0
		x.chargeLocked()
		x.mu.Unlock()
	}()
	for i, ln := range live {
		if i%256 == 0 {
			// The second graph counts against the quota while it grows
			// (VEC-G4, VEC-Q1); a spill meanwhile drops the graph.
			x.mu.Lock()
			x.rebuildBytes = ng.bytes()
			x.chargeLocked()
			stop := x.g != old || x.closed.Load()
			x.mu.Unlock()
			if stop {
				return
			}
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
		_, s := x.keys.find(x.keys.hash(ln.pk), ln.pk, x)
		p, o := x.at(s)
		p.node[o] = int32(i)
	}
	x.g = ng
	x.graphBytes = ng.bytes()
}
