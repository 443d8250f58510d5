package vector

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Index is a k-NN index over vectors of one dimension.
type Index struct {
	// mu guards every field below (graph.h has its own lock). Writers hold
	// it for a slab update only; the builder holds it to pick work and to
	// commit inserted nodes, never while inserting.
	mu     sync.RWMutex
	dim    int
	metric Metric
	opts   Options

	// Exact store: slots 0..n-1, in fixed pages (slab.go), so growing
	// never copies what is stored; keys maps a key to its slot.
	n        int
	pages    []*page
	keys     keyTable
	keyBytes int64 // sum of the live keys' lengths (VEC-G4)
	// pending lists every tail slot (a page's pend[o] is the slot's
	// position in it, -1 when the graph holds it): exactly the slots a
	// search scans besides the graph (VEC-G2).
	pending []int32

	// disk holds the vectors once the index has spilled past its quota
	// (VEC-Q1); the pages then keep keys and bookkeeping only.
	disk    *diskSlab
	scratch []float32 // a vector's stored form on its way to disk
	ioErr   error     // first spill I/O error: every later call returns it
	charged int64     // bytes this index has charged to opts.Quota
	// graphBytes is the graph's memory as its builder last measured it
	// and rebuildBytes a graph rebuild's second graph (VEC-G4).
	graphBytes, rebuildBytes int64
	noSpill                  bool // a spill failed: do not retry on every write

	g        *graph // nil below the threshold or before the first build
	armed    atomic.Bool
	building bool // a builder goroutine runs
	closed   atomic.Bool
	idle     *sync.Cond // on &mu: signalled when the builder stops
}

// graph is the HNSW graph plus the node -> pk map that makes a node live.
// A node is live when nodePK[n] != "": nodes the builder inserted but has
// not committed yet (n >= len(nodePK)), replaced or deleted vectors read as
// tombstones.
type graph struct {
	mu     sync.RWMutex // h: the builder's add holds it, searches read it
	h      *hnswGraph
	nodePK []string // guarded by Index.mu
	dead   int      // tombstoned nodes, guarded by Index.mu
}

// New returns an empty index with default options.
func New(dim int, metric Metric) (*Index, error) {
	return NewWithOptions(dim, metric, Options{})
}

// NewWithOptions returns an empty index.
func NewWithOptions(dim int, metric Metric, opts Options) (*Index, error) {
	if dim <= 0 {
		return nil, fmt.Errorf("vector: dimension must be positive, got %d", dim)
	}
	if metric != Cosine && metric != L2 {
		return nil, fmt.Errorf("vector: unknown metric %v", metric)
	}
	x := &Index{dim: dim, metric: metric, opts: opts.withDefaults(), keys: newKeyTable()}
	x.idle = sync.NewCond(&x.mu)
	x.armed.Store(x.opts.Eager)
	return x, nil
}

// Dim returns the vector dimension.
func (x *Index) Dim() int { return x.dim }

// Metric returns the distance metric.
func (x *Index) Metric() Metric { return x.metric }

// Len returns the number of live vectors.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// UsingHNSW reports whether searches currently go through an HNSW graph
// (possibly still being built: the tail covers the rest).
func (x *Index) UsingHNSW() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.g != nil
}

// Tail returns the number of live vectors a search scans exactly besides
// the graph (all of them without a graph).
func (x *Index) Tail() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.pending)
}

// Upsert inserts or replaces the vector of pk. It updates the slab only;
// the graph catches up in the background (VEC-G1). Past the quota the
// vector is written to the spill file (VEC-Q1); an I/O error there is
// returned, and by every later call.
func (x *Index) Upsert(pk string, v []float32) error {
	if pk == "" {
		return errors.New("vector: empty primary key")
	}
	norm, err := x.check(func() string { return fmt.Sprintf("vector of pk %q", pk) }, v)
	if err != nil {
		return err
	}
	h := x.keys.hash(pk) // the seed never changes: hash outside the lock
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ioErr != nil {
		return x.ioErr
	}
	pos, i := x.keys.find(h, pk, x)
	if i < 0 {
		i = x.n
		if i>>pageShift == len(x.pages) {
			x.pages = append(x.pages, x.newPage())
		}
		p, o := x.at(i)
		p.pks[o], p.node[o], p.pend[o] = pk, -1, -1
		x.n++
		x.keys.insert(pos, h, i)
		x.keyBytes += int64(len(pk))
		x.addPending(i)
	} else if p, o := x.at(i); p.node[o] >= 0 {
		x.tombstone(i)
		x.addPending(i)
	}
	if x.disk == nil {
		x.store(x.vec(i), v, norm)
	} else {
		x.store(x.scratch, v, norm)
		if err := x.disk.write(i, x.scratch); err != nil {
			return x.failIO(err)
		}
	}
	x.chargeLocked()
	x.kickLocked()
	return nil
}

// Delete removes pk; it reports whether pk was present.
func (x *Index) Delete(pk string) bool {
	h := x.keys.hash(pk)
	x.mu.Lock()
	defer x.mu.Unlock()
	pos, i := x.keys.find(h, pk, x)
	if i < 0 {
		return false
	}
	x.tombstone(i)
	x.dropPending(i)
	x.keys.remove(pos)
	x.keyBytes -= int64(len(pk))
	last := x.n - 1
	lp, lo := x.at(last)
	if i != last {
		moved := lp.pks[lo]
		mpos, _ := x.keys.find(x.keys.hash(moved), moved, x)
		x.keys.set(mpos, i)
		p, o := x.at(i)
		p.pks[o], p.node[o], p.pend[o] = moved, lp.node[lo], lp.pend[lo]
		if q := p.pend[o]; q >= 0 {
			x.pending[q] = int32(i)
		}
		if x.disk == nil {
			copy(x.vec(i), x.vec(last))
		} else if err := x.disk.move(last, i, x.scratch); err != nil {
			x.failIO(err)
		}
	}
	lp.pks[lo] = "" // let the key's memory go
	x.n--
	x.trimPages()
	if x.g != nil && (x.opts.HNSWThreshold < 0 || x.n < x.opts.HNSWThreshold/2) {
		x.dropGraph()
	}
	x.chargeLocked()
	x.kickLocked()
	return true
}

// Get returns a copy of the stored vector of pk (normalized for cosine).
func (x *Index) Get(pk string) ([]float32, bool) {
	h := x.keys.hash(pk)
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, i := x.keys.find(h, pk, x)
	if i < 0 {
		return nil, false
	}
	if x.disk == nil {
		return append([]float32(nil), x.vec(i)...), true
	}
	out := make([]float32, x.dim)
	if err := x.disk.read(i, out); err != nil {
		return nil, false
	}
	return out, true
}

// tombstone kills slot i's graph node, if any. Caller holds mu.
func (x *Index) tombstone(i int) {
	p, o := x.at(i)
	if n := p.node[o]; n >= 0 {
		x.g.nodePK[n] = ""
		x.g.dead++
		p.node[o] = -1
	}
}

func (x *Index) addPending(i int) {
	if p, o := x.at(i); p.pend[o] < 0 {
		p.pend[o] = int32(len(x.pending))
		x.pending = append(x.pending, int32(i))
	}
}

func (x *Index) dropPending(i int) {
	p, o := x.at(i)
	q := p.pend[o]
	if q < 0 {
		return
	}
	last := len(x.pending) - 1
	if int(q) != last {
		moved := x.pending[last]
		x.pending[q] = moved
		mp, mo := x.at(int(moved))
		mp.pend[mo] = q
	}
	x.pending = x.pending[:last]
	p.pend[o] = -1
}

// dropGraph forgets the graph: every vector is in the tail again (exact
// search). Caller holds mu.
func (x *Index) dropGraph() {
	x.g = nil
	x.graphBytes = 0
	x.pending = x.pending[:0]
	for i := 0; i < x.n; i++ {
		p, o := x.at(i)
		p.node[o] = -1
		p.pend[o] = int32(i)
		x.pending = append(x.pending, int32(i))
	}
}
