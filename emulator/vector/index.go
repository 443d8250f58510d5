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

	// Exact store: slot i holds pks[i] and vecs[i*dim:(i+1)*dim].
	pks  []string
	vecs []float32
	slot map[string]int
	// node[i] is the graph node holding slot i's current vector, -1 when
	// the vector is in the tail; pend[i] is slot i's position in pending
	// (-1 when indexed). pending lists every tail slot: exactly the slots
	// a search scans besides the graph (VEC-G2).
	node    []int32
	pend    []int32
	pending []int32

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
	x := &Index{dim: dim, metric: metric, opts: opts.withDefaults(), slot: map[string]int{}}
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
	return len(x.pks)
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
// the graph catches up in the background (VEC-G1).
func (x *Index) Upsert(pk string, v []float32) error {
	if pk == "" {
		return errors.New("vector: empty primary key")
	}
	norm, err := x.check(func() string { return fmt.Sprintf("vector of pk %q", pk) }, v)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	i, ok := x.slot[pk]
	if !ok {
		i = len(x.pks)
		x.slot[pk] = i
		x.pks = append(x.pks, pk)
		x.vecs = append(x.vecs, make([]float32, x.dim)...)
		x.node = append(x.node, -1)
		x.pend = append(x.pend, -1)
		x.addPending(i)
	} else if x.node[i] >= 0 {
		x.tombstone(i)
		x.addPending(i)
	}
	x.store(x.vecs[i*x.dim:(i+1)*x.dim], v, norm)
	x.kickLocked()
	return nil
}

// Delete removes pk; it reports whether pk was present.
func (x *Index) Delete(pk string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, ok := x.slot[pk]
	if !ok {
		return false
	}
	x.tombstone(i)
	x.dropPending(i)
	last := len(x.pks) - 1
	if i != last {
		x.pks[i] = x.pks[last]
		copy(x.vecs[i*x.dim:(i+1)*x.dim], x.vecs[last*x.dim:])
		x.node[i], x.pend[i] = x.node[last], x.pend[last]
		if p := x.pend[i]; p >= 0 {
			x.pending[p] = int32(i)
		}
		x.slot[x.pks[i]] = i
	}
	x.pks = x.pks[:last]
	x.vecs = x.vecs[:last*x.dim]
	x.node, x.pend = x.node[:last], x.pend[:last]
	delete(x.slot, pk)
	if x.g != nil && (x.opts.HNSWThreshold < 0 || len(x.pks) < x.opts.HNSWThreshold/2) {
		x.dropGraph()
	}
	x.kickLocked()
	return true
}

// Get returns a copy of the stored vector of pk (normalized for cosine).
func (x *Index) Get(pk string) ([]float32, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i, ok := x.slot[pk]
	if !ok {
		return nil, false
	}
	return append([]float32(nil), x.vecs[i*x.dim:(i+1)*x.dim]...), true
}

func (x *Index) vec(i int) []float32 { return x.vecs[i*x.dim : (i+1)*x.dim : (i+1)*x.dim] }

// tombstone kills slot i's graph node, if any. Caller holds mu.
func (x *Index) tombstone(i int) {
	if n := x.node[i]; n >= 0 {
		x.g.nodePK[n] = ""
		x.g.dead++
		x.node[i] = -1
	}
}

func (x *Index) addPending(i int) {
	if x.pend[i] < 0 {
		x.pend[i] = int32(len(x.pending))
		x.pending = append(x.pending, int32(i))
	}
}

func (x *Index) dropPending(i int) {
	p := x.pend[i]
	if p < 0 {
		return
	}
	last := len(x.pending) - 1
	if int(p) != last {
		moved := x.pending[last]
		x.pending[p] = moved
		x.pend[moved] = p
	}
	x.pending = x.pending[:last]
	x.pend[i] = -1
}

// dropGraph forgets the graph: every vector is in the tail again (exact
// search). Caller holds mu.
func (x *Index) dropGraph() {
	x.g = nil
	x.pending = x.pending[:0]
	for i := range x.pks {
		x.node[i] = -1
		x.pend[i] = int32(i)
		x.pending = append(x.pending, int32(i))
	}
}
