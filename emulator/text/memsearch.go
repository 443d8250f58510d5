package text

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// BM25 parameters (TXT-S1, TXT-M3).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Search ranks the documents matching the query in fields (empty = every
// configured field) and returns the best k passing filter (TXT-S2..TXT-S5).
func (m *Mem) Search(queryText string, fields []string, k int, filter func(pk string) bool) ([]Hit, error) {
	hits, _, err := m.SearchTotal(queryText, fields, k, filter)
	return hits, err
}

// SearchTotal is Search plus the number of matching documents before the
// filter, from the same state of the index (TXT-S8).
func (m *Mem) SearchTotal(queryText string, fields []string, k int, filter func(pk string) bool) ([]Hit, uint64, error) {
	if k <= 0 {
		return nil, 0, fmt.Errorf("text: k must be positive, got %d", k)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	cands, err := m.match(queryText, fields)
	if err != nil {
		return nil, 0, err
	}
	total := uint64(len(cands))
	if filter == nil {
		return topHits(cands, k), total, nil
	}
	// The ranked prefix of a larger window extends the smaller one (the
	// order is total), so each round filters only the new candidates.
	var out []Hit
	done := 0
	for w := max(4*k, 64); ; w *= 4 {
		top := topHits(cands, w)
		for _, h := range top[done:] {
			if filter(h.PK) {
				out = append(out, h)
			}
		}
		done = len(top)
		if len(out) >= k || done == len(cands) {
			break
		}
	}
	if len(out) > k {
		out = out[:k]
	}
	return out, total, nil
}

// SearchAll returns every matching document passing filter, best first
// (TXT-S6).
func (m *Mem) SearchAll(queryText string, fields []string, filter func(pk string) bool) ([]Hit, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	cands, err := m.match(queryText, fields)
	if err != nil {
		return nil, err
	}
	out := cands[:0]
	for _, h := range cands {
		if filter == nil || filter(h.PK) {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, hitOrder)
	return out, nil
}

// match scores every live document matching a query term in the searched
// fields, in no particular order (TXT-M3). The caller holds m.mu.
func (m *Mem) match(queryText string, fields []string) ([]Hit, error) {
	if m.closed {
		return nil, fmt.Errorf("text: search %q: index is closed", queryText)
	}
	fidx := make([]int, 0, len(m.fields))
	if len(fields) == 0 {
		for i := range m.fields {
			fidx = append(fidx, i)
		}
	}
	for _, f := range fields {
		i, ok := m.fieldIdx[f]
		if !ok {
			return nil, fmt.Errorf("text: search field %q is not a text field of this index (have %v)", f, m.fields)
		}
		fidx = append(fidx, i)
	}
	var terms []string
	for _, t := range m.tokens(queryText, nil) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	n := float64(len(m.byPK))
	if n == 0 || len(terms) == 0 {
		return nil, nil
	}
	// Scores accumulate in a dense array when the postings to walk are
	// many compared with the documents, in a map otherwise. A BM25 term
	// score is always > 0, so a non-zero entry marks a match.
	var width int
	for _, f := range fidx {
		for _, t := range terms {
			if tid, ok := m.dicts[f][t]; ok {
				width += len(m.lists[f].get(tid))
			}
		}
	}
	var dense []float64
	var sparse map[uint32]float64
	if width*8 >= m.docs.n {
		dense = make([]float64, m.docs.n)
	} else {
		sparse = make(map[uint32]float64, width)
	}
	nf := m.docs.nf
	for _, f := range fidx {
		if m.total[f] == 0 {
			continue
		}
		avgdl := float64(m.total[f]) / n
		for _, t := range terms {
			tid, ok := m.dicts[f][t]
			if !ok {
				continue
			}
			pl := m.lists[f].get(tid)
			df := 0
			for _, p := range pl {
				if m.docs.live(p.doc) {
					df++
				}
			}
			if df == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
			for _, p := range pl {
				c, off := m.docs.at(p.doc)
				if !c.live[off] {
					continue
				}
				tf, dl := float64(p.tf), float64(c.lens[off*nf+f])
				s := idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avgdl))
				if dense != nil {
					dense[p.doc] += s
				} else {
					sparse[p.doc] += s
				}
			}
		}
	}
	var out []Hit
	if dense != nil {
		for id, s := range dense {
			if s > 0 {
				c, off := m.docs.at(uint32(id))
				out = append(out, Hit{PK: c.pk[off], Score: s})
			}
		}
	} else {
		out = make([]Hit, 0, len(sparse))
		for id, s := range sparse {
			c, off := m.docs.at(id)
			out = append(out, Hit{PK: c.pk[off], Score: s})
		}
	}
	return out, nil
}

// hitOrder is TXT-S3's order: score descending, then primary key.
func hitOrder(a, b Hit) int {
	if a.Score != b.Score {
		if a.Score > b.Score {
			return -1
		}
		return 1
	}
	return strings.Compare(a.PK, b.PK)
}

// topHits returns the first w hits of cands in hitOrder. cands is
// reordered. A bounded heap keeps it O(len(cands) log w) for a short page
// over many matches.
func topHits(cands []Hit, w int) []Hit {
	if w >= len(cands) || w*8 >= len(cands) {
		slices.SortFunc(cands, hitOrder)
		return cands[:min(w, len(cands))]
	}
	// h is a heap whose root is the worst of the best w seen so far.
	h := make([]Hit, 0, w)
	worse := func(i, j int) bool { return hitOrder(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l, best := 2*i+1, i
			if l < len(h) && worse(l, best) {
				best = l
			}
			if r := l + 1; r < len(h) && worse(r, best) {
				best = r
			}
			if best == i {
				return
			}
			h[i], h[best] = h[best], h[i]
			i = best
		}
	}
	for _, c := range cands {
		if len(h) < w {
			h = append(h, c)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(i, p) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if hitOrder(c, h[0]) < 0 {
			h[0] = c
			down(0)
		}
	}
	slices.SortFunc(h, hitOrder)
	return h
}
