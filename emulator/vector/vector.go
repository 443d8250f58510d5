// Package vector is the emulator's vector modality: k-nearest-neighbour
// search over one fixed-dimension vector field, by cosine or Euclidean (L2)
// distance.
//
// Small indexes are searched exactly (a scan of a contiguous slab of
// vectors). Once an index holds at least Options.HNSWThreshold live vectors it
// also maintains an HNSW graph (hnsw.go; github.com/coder/hnsw was evaluated
// and rejected for low recall, see hnsw.go) and answers Search from the graph,
// re-ranking the graph's candidates with exact distances. The graph never
// unlinks nodes: a delete or a
// replacement only tombstones the node, results skip tombstones, and the graph
// is rebuilt from the live vectors when tombstones exceed a quarter of its
// nodes. Falling back to the exact scan whenever the graph cannot produce k
// live, filter-passing results keeps answers complete.
//
// Distances (rule VEC-M1..VEC-M3 in specs/emulator-text-vector.md):
//   - Cosine: vectors are normalized on insert (a zero vector is rejected);
//     Distance = 1 - cos(q, v) in [0, 2], Score = cos(q, v).
//   - L2: Distance = ||q - v||, Score = 1 / (1 + Distance).
//
// Results are ordered by (Distance asc, PK asc).
//
// The index is in memory only; the emulator rebuilds it from its document
// store on start (rule VEC-P1). An Index is safe for concurrent use (one writer
// or many readers at a time).
package vector

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// Metric is the distance used to rank neighbours.
type Metric int

const (
	// Cosine ranks by cosine similarity (distance 1 - cos).
	Cosine Metric = iota + 1
	// L2 ranks by Euclidean distance.
	L2
)

func (m Metric) String() string {
	switch m {
	case Cosine:
		return "cosine"
	case L2:
		return "l2"
	}
	return fmt.Sprintf("Metric(%d)", int(m))
}

// ParseMetric accepts "cosine", "l2" (also "euclidean"), case-insensitively.
func ParseMetric(s string) (Metric, error) {
	switch strings.ToLower(s) {
	case "cosine", "cos":
		return Cosine, nil
	case "l2", "euclidean":
		return L2, nil
	}
	return 0, fmt.Errorf("vector: unknown metric %q (want cosine or l2)", s)
}

// Hit is one neighbour.
type Hit struct {
	PK       string
	Distance float64
	Score    float64
}

// Options tune the index. Zero values take the defaults.
type Options struct {
	// HNSWThreshold is the live vector count at which the HNSW graph is built
	// (default 10000). The graph is dropped again when the count falls below
	// half of it. A negative value disables HNSW.
	HNSWThreshold int
	// M is the HNSW neighbour count per node (default 16).
	M int
	// EfSearch is the HNSW candidate list size during search (default 100);
	// a query for k neighbours explores max(EfSearch, 2k) candidates.
	EfSearch int
	// EfConstruction is the HNSW candidate list size while inserting
	// (default 100).
	EfConstruction int
	// Seed seeds HNSW level generation (default 1), for reproducible graphs.
	Seed int64
}

func (o Options) withDefaults() Options {
	if o.HNSWThreshold == 0 {
		o.HNSWThreshold = 10000
	}
	if o.M <= 0 {
		o.M = 16
	}
	if o.EfSearch <= 0 {
		o.EfSearch = 100
	}
	if o.EfConstruction <= 0 {
		o.EfConstruction = 100
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Index is a k-NN index over vectors of one dimension.
type Index struct {
	// wmu serializes writers, including a graph build, which runs under wmu
	// alone: readers keep searching the previous graph (or the exact scan)
	// while a build of a large index takes seconds, and only the swap takes
	// mu. Everything below is written only while holding both.
	wmu    sync.Mutex
	mu     sync.RWMutex
	dim    int
	metric Metric
	opts   Options

	// Exact store: slot i holds pks[i] and vecs[i*dim:(i+1)*dim].
	pks  []string
	vecs []float32
	slot map[string]int

	g *graph // nil while below the threshold
}

// graph wraps the HNSW graph with tombstones. Node keys are internal ordinals
// so that a replaced vector gets a fresh node instead of an in-place update.
type graph struct {
	h      *hnswGraph
	nodePK []string // node -> pk; "" once tombstoned
	pkNode map[string]uint32
	dead   int
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
	return &Index{dim: dim, metric: metric, opts: opts.withDefaults(), slot: map[string]int{}}, nil
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

// SearchKeys returns the k nearest vectors passing filter (k <= 0: all of
// them, ranked) together with the keys of every vector passing filter, both
// read under one lock so they describe the same state (rule VEC-S4): the
// candidates of a k-NN search of any k. exact forces the exact scan.
func (x *Index) SearchKeys(q []float32, k int, exact bool, filter func(pk string) bool) ([]Hit, []string, error) {
	qv, err := x.checkQuery(q, max(k, 1))
	if err != nil {
		return nil, nil, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	keys := make([]string, 0, len(x.pks))
	for _, pk := range x.pks {
		if filter == nil || filter(pk) {
			keys = append(keys, pk)
		}
	}
	if k <= 0 {
		k = max(len(keys), 1)
	}
	if x.g != nil && !exact {
		if hits, ok := x.searchGraph(qv, k, filter); ok {
			return hits, keys, nil
		}
	}
	return x.searchExact(qv, k, filter), keys, nil
}

// UsingHNSW reports whether searches currently go through the HNSW graph.
func (x *Index) UsingHNSW() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.g != nil
}

// prepare validates v and returns the stored form (a copy; normalized for
// cosine).
func (x *Index) prepare(what string, v []float32) ([]float32, error) {
	if len(v) != x.dim {
		return nil, fmt.Errorf("vector: %s has dimension %d, index dimension is %d", what, len(v), x.dim)
	}
	var norm float64
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("vector: %s component %d is %v (must be finite)", what, i, f)
		}
		norm += float64(f) * float64(f)
	}
	out := make([]float32, x.dim)
	copy(out, v)
	if x.metric == Cosine {
		if norm == 0 {
			return nil, fmt.Errorf("vector: %s is the zero vector, which has no cosine direction", what)
		}
		inv := 1 / math.Sqrt(norm)
		for i := range out {
			out[i] = float32(float64(out[i]) * inv)
		}
	}
	return out, nil
}

// Upsert inserts or replaces the vector of pk.
func (x *Index) Upsert(pk string, v []float32) error {
	if pk == "" {
		return errors.New("vector: empty primary key")
	}
	sv, err := x.prepare(fmt.Sprintf("vector of pk %q", pk), v)
	if err != nil {
		return err
	}
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	if i, ok := x.slot[pk]; ok {
		copy(x.vecs[i*x.dim:(i+1)*x.dim], sv)
	} else {
		x.slot[pk] = len(x.pks)
		x.pks = append(x.pks, pk)
		x.vecs = append(x.vecs, sv...)
	}
	if x.g != nil {
		x.g.tombstone(pk)
		x.g.add(pk, sv)
	}
	x.mu.Unlock()
	x.maybeBuild()
	return nil
}

// Delete removes pk; it reports whether pk was present.
func (x *Index) Delete(pk string) bool {
	x.wmu.Lock()
	defer x.wmu.Unlock()
	x.mu.Lock()
	i, ok := x.slot[pk]
	if !ok {
		x.mu.Unlock()
		return false
	}
	last := len(x.pks) - 1
	if i != last {
		x.pks[i] = x.pks[last]
		copy(x.vecs[i*x.dim:(i+1)*x.dim], x.vecs[last*x.dim:])
		x.slot[x.pks[i]] = i
	}
	x.pks = x.pks[:last]
	x.vecs = x.vecs[:last*x.dim]
	delete(x.slot, pk)
	if x.g != nil {
		x.g.tombstone(pk)
		if x.opts.HNSWThreshold < 0 || len(x.pks) < x.opts.HNSWThreshold/2 {
			x.g = nil
		}
	}
	x.mu.Unlock()
	x.maybeBuild()
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

// maybeBuild builds the graph when the index reached the threshold without
// one, or rebuilds it when tombstones exceed a quarter of its nodes. The
// caller holds wmu and not mu.
func (x *Index) maybeBuild() {
	need := false
	if x.g == nil {
		need = x.opts.HNSWThreshold > 0 && len(x.pks) >= x.opts.HNSWThreshold
	} else {
		need = x.g.dead > len(x.g.nodePK)/4
	}
	if !need {
		return
	}
	g := x.build()
	x.mu.Lock()
	x.g = g
	x.mu.Unlock()
}

// build creates a graph from the live vectors, in slot order. It reads the
// slab without mu: the caller holds wmu, so nothing writes it meanwhile.
func (x *Index) build() *graph {
	// Stored vectors are unit length for cosine, so 1-dot is the cosine
	// distance; for L2 the squared distance ranks the same as the distance.
	dist := l2sq
	if x.metric == Cosine {
		dist = func(a, b []float32) float32 { return 1 - dot(a, b) }
	}
	g := &graph{
		h:      newHNSWGraph(x.dim, dist, x.opts.M, x.opts.EfConstruction, x.opts.Seed),
		pkNode: make(map[string]uint32, len(x.pks)),
		nodePK: make([]string, 0, len(x.pks)),
	}
	for i, pk := range x.pks {
		g.add(pk, x.vecs[i*x.dim:(i+1)*x.dim])
	}
	if buildHook != nil {
		buildHook()
	}
	return g
}

// buildHook, when set by a test, runs at the end of every graph build,
// before the swap.
var buildHook func()

func (g *graph) add(pk string, v []float32) {
	n := g.h.add(v) // copies v into the graph's own slab
	g.nodePK = append(g.nodePK, pk)
	g.pkNode[pk] = n
}

func (g *graph) tombstone(pk string) {
	if n, ok := g.pkNode[pk]; ok {
		g.nodePK[n] = ""
		delete(g.pkNode, pk)
		g.dead++
	}
}

// Search returns the k nearest live vectors to q.
func (x *Index) Search(q []float32, k int) ([]Hit, error) {
	return x.SearchFiltered(q, k, nil)
}

// SearchFiltered returns the k nearest vectors whose pk passes filter (nil =
// all). With the HNSW graph the filter is applied to its candidates and the
// search falls back to the exact scan if fewer than k survive while more than
// that many vectors exist (rule VEC-S3).
func (x *Index) SearchFiltered(q []float32, k int, filter func(pk string) bool) ([]Hit, error) {
	qv, err := x.checkQuery(q, k)
	if err != nil {
		return nil, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.g != nil {
		if hits, ok := x.searchGraph(qv, k, filter); ok {
			return hits, nil
		}
	}
	return x.searchExact(qv, k, filter), nil
}

// SearchExact always scans every vector; it is the reference the HNSW path
// is tested against.
func (x *Index) SearchExact(q []float32, k int, filter func(pk string) bool) ([]Hit, error) {
	qv, err := x.checkQuery(q, k)
	if err != nil {
		return nil, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.searchExact(qv, k, filter), nil
}

func (x *Index) checkQuery(q []float32, k int) ([]float32, error) {
	if k <= 0 {
		return nil, fmt.Errorf("vector: k must be positive, got %d", k)
	}
	return x.prepare("query vector", q)
}

// distance is the metric's ranking distance between stored-form vectors.
func (x *Index) distance(a, b []float32) float64 {
	if x.metric == Cosine {
		d := 1 - float64(dot(a, b))
		if d < 0 {
			d = 0 // rounding on (near-)identical unit vectors
		}
		return d
	}
	return math.Sqrt(float64(l2sq(a, b)))
}

func (x *Index) hit(pk string, d float64) Hit {
	if x.metric == Cosine {
		return Hit{PK: pk, Distance: d, Score: 1 - d}
	}
	return Hit{PK: pk, Distance: d, Score: 1 / (1 + d)}
}

func (x *Index) searchExact(q []float32, k int, filter func(string) bool) []Hit {
	top := newTopK(k)
	for i, pk := range x.pks {
		v := x.vecs[i*x.dim : (i+1)*x.dim]
		var d float64
		if x.metric == Cosine {
			d = 1 - float64(dot(q, v))
		} else {
			d = float64(l2sq(q, v)) // sqrt is monotonic: apply on output only
		}
		if !top.wouldAccept(d, pk) {
			continue
		}
		if filter != nil && !filter(pk) {
			continue
		}
		top.push(d, pk)
	}
	out := top.sorted()
	hits := make([]Hit, len(out))
	for i, c := range out {
		d := c.d
		if x.metric == L2 {
			d = math.Sqrt(d)
		} else if d < 0 {
			d = 0
		}
		hits[i] = x.hit(c.pk, d)
	}
	return hits
}

// searchGraph asks the graph for a widening candidate window and re-ranks
// the live, filter-passing candidates exactly. ok is false when it could not
// produce min(k, live) results, so the caller falls back to the exact scan.
func (x *Index) searchGraph(q []float32, k int, filter func(string) bool) ([]Hit, bool) {
	want := min(k, len(x.pks))
	window := max(x.opts.EfSearch, 2*k)
	for attempt := 0; attempt < 3; attempt++ {
		nodes := x.g.h.search(q, window)
		top := newTopK(k)
		for _, n := range nodes {
			pk := x.g.nodePK[n.n]
			if pk == "" || (filter != nil && !filter(pk)) {
				continue
			}
			top.push(x.distance(q, x.g.h.vec(n.n)), pk)
		}
		if top.len() >= want {
			out := top.sorted()
			hits := make([]Hit, len(out))
			for i, c := range out {
				hits[i] = x.hit(c.pk, c.d)
			}
			return hits, true
		}
		if len(nodes) < window {
			break // the graph has nothing more to give
		}
		window *= 4
	}
	return nil, false
}

// topK keeps the k best (smallest distance, then smallest pk) candidates in
// a max-heap.
type cand struct {
	d  float64
	pk string
}

type topK struct {
	k int
	h candHeap
}

type candHeap []cand

func worse(a, b cand) bool { return a.d > b.d || (a.d == b.d && a.pk > b.pk) }

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(v any)        { *h = append(*h, v.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

func newTopK(k int) *topK { return &topK{k: k, h: make(candHeap, 0, min(k, 1024))} }

func (t *topK) len() int { return len(t.h) }

func (t *topK) wouldAccept(d float64, pk string) bool {
	return len(t.h) < t.k || worse(t.h[0], cand{d, pk})
}

func (t *topK) push(d float64, pk string) {
	c := cand{d, pk}
	if len(t.h) < t.k {
		heap.Push(&t.h, c)
		return
	}
	if worse(t.h[0], c) {
		t.h[0] = c
		heap.Fix(&t.h, 0)
	}
}

func (t *topK) sorted() []cand {
	out := append([]cand(nil), t.h...)
	sort.Slice(out, func(i, j int) bool { return worse(out[j], out[i]) })
	return out
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

func l2sq(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return s0 + s1 + s2 + s3
}
