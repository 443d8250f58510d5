package vector

import (
	"container/heap"
	"sort"
)

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

func (t *topK) clone() *topK {
	c := &topK{k: t.k, h: make(candHeap, len(t.h), max(cap(t.h), len(t.h)))}
	copy(c.h, t.h)
	return c
}
