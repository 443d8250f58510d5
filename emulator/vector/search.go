package vector

import (
	"fmt"
	"math"
)

// Search returns the k nearest live vectors to q.
func (x *Index) Search(q []float32, k int) ([]Hit, error) {
	return x.SearchFiltered(q, k, nil)
}

// SearchFiltered returns the k nearest vectors whose pk passes filter (nil =
// all). With the HNSW graph the filter is applied to its candidates and the
// tail's, and the search falls back to the exact scan if fewer than k
// survive while more than that many vectors exist (rule VEC-S3).
func (x *Index) SearchFiltered(q []float32, k int, filter func(pk string) bool) ([]Hit, error) {
	if err := checkK(k); err != nil {
		return nil, err
	}
	hits, _, err := x.search(q, k, false, filter, false)
	return hits, err
}

// SearchExact always scans every vector; it is the reference the HNSW path
// is tested against.
func (x *Index) SearchExact(q []float32, k int, filter func(pk string) bool) ([]Hit, error) {
	if err := checkK(k); err != nil {
		return nil, err
	}
	hits, _, err := x.search(q, k, true, filter, false)
	return hits, err
}

// SearchKeys returns the k nearest vectors passing filter (k <= 0: all of
// them, ranked) together with the keys of every vector passing filter, both
// read under one lock so they describe the same state (rule VEC-S4): the
// candidates of a k-NN search of any k. exact forces the exact scan.
func (x *Index) SearchKeys(q []float32, k int, exact bool, filter func(pk string) bool) ([]Hit, []string, error) {
	return x.search(q, k, exact || k <= 0, filter, true)
}

func (x *Index) search(q []float32, k int, exact bool, filter func(string) bool, wantKeys bool) ([]Hit, []string, error) {
	qv, err := x.checkQuery(q, max(k, 1))
	if err != nil {
		return nil, nil, err
	}
	if !exact {
		x.Arm() // VEC-G3: the first graph-eligible search starts the build
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.ioErr != nil {
		return nil, nil, x.ioErr
	}
	var keys []string
	if wantKeys {
		keys = make([]string, 0, x.n)
		for i := 0; i < x.n; i++ {
			if pk := x.pk(i); filter == nil || filter(pk) {
				keys = append(keys, pk)
			}
		}
	}
	if k <= 0 {
		k = max(len(keys), 1)
	}
	if x.g != nil && !exact {
		if hits, ok := x.searchIndexed(qv, k, filter); ok {
			return hits, keys, nil
		}
	}
	top := newTopK(k)
	if err := x.scanVectors(func(i int, v []float32) {
		x.offer(top, qv, x.pk(i), v, filter)
	}); err != nil {
		return nil, nil, fmt.Errorf("vector: exact scan of the spill file: %w", err)
	}
	return x.hits(top), keys, nil
}

// rankDist is the metric's ranking distance between stored-form vectors:
// 1 - cos for cosine, the squared distance for L2 (monotonic in the
// distance; hits take the square root).
func (x *Index) rankDist(q, v []float32) float64 {
	if x.metric == Cosine {
		return 1 - float64(dot(q, v))
	}
	return float64(l2sq(q, v))
}

// offer offers pk with stored vector v to top.
func (x *Index) offer(top *topK, q []float32, pk string, v []float32, filter func(string) bool) {
	d := x.rankDist(q, v)
	if !top.wouldAccept(d, pk) || (filter != nil && !filter(pk)) {
		return
	}
	top.push(d, pk)
}

func (x *Index) hits(top *topK) []Hit {
	out := top.sorted()
	hits := make([]Hit, len(out))
	for i, c := range out {
		d := c.d
		if x.metric == L2 {
			d = math.Sqrt(d)
		} else if d < 0 {
			d = 0 // rounding on (near-)identical unit vectors
		}
		hits[i] = x.hit(c.pk, d)
	}
	return hits
}

func (x *Index) hit(pk string, d float64) Hit {
	if x.metric == Cosine {
		return Hit{PK: pk, Distance: d, Score: 1 - d}
	}
	return Hit{PK: pk, Distance: d, Score: 1 / (1 + d)}
}

// searchIndexed combines the graph's candidates with an exact scan of the
// tail (the vectors not in the graph yet), re-ranking both exactly
// (VEC-G2). It asks the graph for a widening window; ok is false when graph
// and tail could not produce min(k, live) results, so the caller falls back
// to the exact scan. Caller holds mu (read).
func (x *Index) searchIndexed(q []float32, k int, filter func(string) bool) ([]Hit, bool) {
	want := min(k, x.n)
	tail := newTopK(k)
	for _, s := range x.pending {
		x.offer(tail, q, x.pk(int(s)), x.vec(int(s)), filter)
	}
	g := x.g
	g.mu.RLock()
	defer g.mu.RUnlock()
	window := max(x.opts.EfSearch, 2*k)
	for attempt := 0; attempt < 3; attempt++ {
		nodes := g.h.search(q, window)
		top := tail.clone()
		for _, n := range nodes {
			if int(n.n) >= len(g.nodePK) {
				continue // inserted, not committed yet: its vector is in the tail
			}
			pk := g.nodePK[n.n]
			if pk == "" {
				continue
			}
			d := x.rankDist(q, g.h.vec(n.n))
			if top.wouldAccept(d, pk) && (filter == nil || filter(pk)) {
				top.push(d, pk)
			}
		}
		if top.len() >= want {
			return x.hits(top), true
		}
		if len(nodes) < window {
			break // the graph has nothing more to give
		}
		window *= 4
	}
	return nil, false
}
