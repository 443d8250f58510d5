package emulator

import (
	"context"
	"fmt"
	"math"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/emulator/text"
	"github.com/searchfabric/sfemu/emulator/vector"
)

// Search limits (E73, E76, E77).
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 10000
	// MaxSearchOffset caps offset (E76): deeper pages use search_after.
	MaxSearchOffset  = 10000
	DefaultFacetSize = 10
	MaxFacetSize     = 1000
	rrfK             = 60
)

// Search runs a text, vector, filter-only or hybrid search (E70..E78).
func (e *Emulator) Search(ctx context.Context, req *apiv1.SearchRequest) (*apiv1.SearchResponse, error) {
	resp, err := e.search(ctx, req)
	return resp, e.reject("search", err)
}

type leg struct {
	pks    []string
	scores map[string]float64 // text: BM25; vector: distance
}

// cand is one matching document with its ranking score (BM25, minus the
// vector distance, the fused score, or 0 for filter-only searches).
type cand struct {
	pk    string
	score float64
}

func (e *Emulator) search(ctx context.Context, req *apiv1.SearchRequest) (*apiv1.SearchResponse, error) {
	hasText := req.GetText() != nil
	hasVec := req.GetVector() != nil
	if !hasText && !hasVec && len(req.GetFilters()) == 0 {
		return nil, contract.Errf(contract.ReasonInvalidQuery, "", "text, vector or filters", "none", "empty search")
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = DefaultSearchLimit
	}
	if limit > MaxSearchLimit {
		return nil, contract.Errf(contract.ReasonInvalidQuery, "limit", fmt.Sprintf("<= %d", MaxSearchLimit), fmt.Sprint(req.GetLimit()), "limit too large")
	}
	if err := checkPaging(req); err != nil {
		return nil, err
	}
	readTs, err := e.waitFresh(ctx, req.GetCollection(), req.GetMinTs())
	if err != nil {
		return nil, err
	}

	e.mu.RLock()
	defer e.mu.RUnlock()
	newest := e.colls[req.GetCollection()]
	if newest == nil || !newest.active() {
		return nil, notFound(req.GetCollection(), "collection")
	}
	// The serving generation answers the whole search, and read_ts is the
	// one it reflects (E55, E70): never a partly rebuilt index.
	c := newest.serving()
	if s := e.safeLocked(newest); s > readTs {
		readTs = s
	}
	if err := checkSearchOn(c, req); err != nil {
		return nil, err
	}
	keys, err := sortKeysFor(c, req)
	if err != nil {
		return nil, err
	}
	after := req.GetSearchAfter()
	var tok *apiv1.PageToken
	if req.GetPageToken() != "" {
		if tok, err = decodePageToken(req); err != nil {
			return nil, err
		}
		after = tok.GetAfter()
	}
	cursor, err := checkSearchAfter(c, after, keys)
	if err != nil {
		return nil, err
	}
	if err := checkFacets(c, req); err != nil {
		return nil, err
	}
	fs, err := compileFilters(c.schema, req.GetFilters())
	if err != nil {
		return nil, err
	}
	// A hit must be a live document that passes every filter.
	var sc docstore.Scratch
	accept := func(pk string) bool {
		ent, ok := c.docs.Get(pk)
		return ok && !ent.Deleted && fs.match(ent, &sc)
	}
	offset := int(req.GetOffset())
	// needAll: the whole matching set is ranked (sorts by a field, cursors
	// and facets need it); otherwise only the first offset+limit.
	needAll := len(req.GetSort()) > 0 || cursor != nil || len(req.GetFacets()) > 0
	window := offset + limit
	if hasText && hasVec {
		window = max(window*4, 50)
		if w := int(tok.GetWindow()); w > 0 {
			window = w // every page of a token fuses the first page's candidates (E79)
		}
	}
	resp := &apiv1.SearchResponse{ReadTs: readTs}
	var textLeg, vecLeg *leg
	var textAll []string // every text match (total, facets); nil when textCount is used
	var textCount uint64
	if hasText {
		var hits []text.Hit
		var err error
		q, fields := req.GetText().GetQuery(), req.GetText().GetFields()
		if needAll || hasVec || len(req.GetFilters()) > 0 {
			hits, err = c.textIdx.SearchAll(q, fields, accept)
			textCount = uint64(len(hits))
		} else {
			// Only the first page is ranked; the index counts the matches
			// of the same snapshot (E76, TXT-S8).
			hits, textCount, err = c.textIdx.SearchTotal(q, fields, window, accept)
		}
		if err != nil {
			return nil, contract.Errf(contract.ReasonInvalidQuery, "text.query", "", "", "%v", err)
		}
		textLeg = &leg{scores: make(map[string]float64, len(hits))}
		for i, h := range hits {
			textAll = append(textAll, h.PK)
			textLeg.scores[h.PK] = h.Score
			if !hasVec || i < window {
				textLeg.pks = append(textLeg.pks, h.PK)
			}
		}
	}
	var vecKeys []string // every vector candidate passing the filters
	if hasVec {
		vf := c.vectorField(req.GetVector().GetField())
		idx := vf.idx
		if m := req.GetVector().GetMetric(); m != apiv1.VectorMetric_VECTOR_METRIC_UNSPECIFIED && vectorMetric(m) != idx.Metric() {
			return nil, contract.Errf(contract.ReasonInvalidQuery, "vector.metric", idx.Metric().String(), m.String(), "query metric must match the field's metric")
		}
		k := window
		if needAll && !hasText {
			k = 0 // every candidate, ranked exactly
		}
		var hits []vector.Hit
		hits, vecKeys, err = idx.SearchKeys(req.GetVector().GetVector(), k, k == 0, accept)
		if err != nil {
			return nil, contract.Errf(contract.ReasonInvalidQuery, "vector.vector", "", "", "%v", err)
		}
		vecLeg = &leg{scores: map[string]float64{}}
		for _, h := range hits {
			vecLeg.pks = append(vecLeg.pks, h.PK)
			vecLeg.scores[h.PK] = h.Distance
		}
	}

	var ranked []cand
	var matching func(yield func(pk string)) // the whole matching set
	switch {
	case textLeg != nil && vecLeg != nil:
		ranked = fuse(req, textLeg, vecLeg)
		inVec := make(map[string]bool, len(vecKeys))
		for _, pk := range vecKeys {
			inVec[pk] = true
		}
		resp.Total = uint64(len(vecKeys))
		for _, pk := range textAll {
			if !inVec[pk] {
				resp.Total++
			}
		}
		matching = func(yield func(string)) {
			for _, pk := range vecKeys {
				yield(pk)
			}
			for _, pk := range textAll {
				if !inVec[pk] {
					yield(pk)
				}
			}
		}
	case textLeg != nil:
		for _, pk := range textLeg.pks {
			ranked = append(ranked, cand{pk, textLeg.scores[pk]})
		}
		resp.Total = textCount
		matching = eachOf(textAll)
	case vecLeg != nil:
		for _, pk := range vecLeg.pks {
			ranked = append(ranked, cand{pk, -vecLeg.scores[pk]})
		}
		resp.Total = uint64(len(vecKeys))
		matching = eachOf(vecKeys)
	default:
		keys, narrowed := []string(nil), false
		if c.aux != nil {
			for _, f := range req.GetFilters() {
				if cand, ok := c.aux.candidates(c.docs, f); ok && (!narrowed || len(cand) < len(keys)) {
					keys, narrowed = cand, true
				}
			}
		}
		if !narrowed {
			keys = c.docs.Keys()
		}
		var all []string
		for _, pk := range keys {
			if accept(pk) {
				all = append(all, pk)
				if needAll || len(ranked) < window {
					ranked = append(ranked, cand{pk, 0})
				}
			}
		}
		resp.Total = uint64(len(all))
		matching = eachOf(all)
	}
	if len(req.GetFacets()) > 0 {
		resp.Facets = facetCounts(c, req.GetFacets(), matching)
	}
	if len(req.GetSort()) > 0 {
		sortCands(c, ranked, keys)
	}
	if cursor != nil {
		i := sort.Search(len(ranked), func(i int) bool { return compareToCursor(c, ranked[i], keys, cursor) > 0 })
		ranked = ranked[i:]
	}
	if offset >= len(ranked) {
		ranked = nil
	} else {
		ranked = ranked[offset:]
	}
	if len(ranked) > limit {
		ranked = ranked[:limit]
	}
	hl, err := highlighterFor(c, req)
	if err != nil {
		return nil, err
	}
	for _, r := range ranked {
		h := &apiv1.SearchHit{PrimaryKey: r.pk, Score: r.score}
		if textLeg != nil {
			h.TextScore = textLeg.scores[r.pk]
		}
		if vecLeg != nil {
			if d, ok := vecLeg.scores[r.pk]; ok {
				h.VectorDistance = d
			} else {
				h.VectorDistance = math.Inf(1)
			}
		}
		ent, _ := c.docs.Get(r.pk)
		h.SortValues = sortValues(ent, r, keys)
		if hl != nil {
			h.Highlights = hl(ent)
		}
		if !req.GetKeysOnly() {
			h.Fields = ent.FieldMap()
		}
		resp.Hits = append(resp.Hits, h)
	}
	if n := len(resp.Hits); n == limit {
		w := 0
		if hasText && hasVec {
			w = window
		}
		resp.NextPageToken = encodePageToken(queryFingerprint(req), resp.Hits[n-1].GetSortValues(), w)
	}
	return resp, nil
}

func eachOf(pks []string) func(yield func(string)) {
	return func(yield func(string)) {
		for _, pk := range pks {
			yield(pk)
		}
	}
}

// fuse ranks a hybrid search's legs by reciprocal rank fusion or by the
// weighted sum of min-max normalised scores (E74).
func fuse(req *apiv1.SearchRequest, textLeg, vecLeg *leg) []cand {
	fused := map[string]float64{}
	if req.GetFusion() == apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED {
		tw, vw := req.GetTextWeight(), req.GetVectorWeight()
		if tw == 0 && vw == 0 {
			tw, vw = 0.5, 0.5
		}
		for pk, s := range normalise(textLeg, false) {
			fused[pk] += tw * s
		}
		for pk, s := range normalise(vecLeg, true) {
			fused[pk] += vw * s
		}
	} else {
		for i, pk := range textLeg.pks {
			fused[pk] += 1 / float64(rrfK+i+1)
		}
		for i, pk := range vecLeg.pks {
			fused[pk] += 1 / float64(rrfK+i+1)
		}
	}
	ranked := make([]cand, 0, len(fused))
	for pk, s := range fused {
		ranked = append(ranked, cand{pk, s})
	}
	sort.Slice(ranked, func(i, j int) bool {
		if ranked[i].score != ranked[j].score {
			return ranked[i].score > ranked[j].score
		}
		return ranked[i].pk < ranked[j].pk
	})
	return ranked
}

// checkSearchOn validates the text and vector legs against the generation
// that serves the search (E73, E55).
func checkSearchOn(c *collection, req *apiv1.SearchRequest) error {
	if t := req.GetText(); t != nil {
		if c.textIdx == nil {
			return contract.Errf(contract.ReasonInvalidQuery, "text", "a collection with TEXT fields", req.GetCollection(), "collection has no text modality")
		}
		if t.GetQuery() == "" {
			return contract.Errf(contract.ReasonInvalidQuery, "text.query", "non-empty", `""`, "empty text query")
		}
		for i, f := range t.GetFields() {
			fd, ok := c.schema.Fields[f]
			if !ok || fd.GetRole() != apiv1.FieldRole_FIELD_ROLE_TEXT {
				return contract.Errf(contract.ReasonInvalidQuery, fmt.Sprintf("text.fields[%d]", i), "a TEXT field", f, "not a text field")
			}
		}
	}
	if v := req.GetVector(); v != nil {
		vf := c.vectorField(v.GetField())
		if vf == nil {
			return contract.Errf(contract.ReasonInvalidQuery, "vector.field", "a VECTOR field", v.GetField(), "not a vector field")
		}
		if len(v.GetVector()) != vf.idx.Dim() {
			return contract.Errf(contract.ReasonInvalidQuery, "vector.vector", fmt.Sprintf("%d dimensions", vf.idx.Dim()), fmt.Sprintf("%d dimensions", len(v.GetVector())), "query vector has the wrong dimension")
		}
		for i, x := range v.GetVector() {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return contract.Errf(contract.ReasonInvalidQuery, fmt.Sprintf("vector.vector[%d]", i), "a finite number", fmt.Sprint(x), "query vector element is not finite")
			}
		}
	}
	return nil
}

func (c *collection) vectorField(name string) *vectorField {
	for _, vf := range c.vecFields {
		if vf.name == name {
			return vf
		}
	}
	return nil
}

// normalise min-max scales a leg's scores to [0,1], higher is better.
func normalise(l *leg, lowerIsBetter bool) map[string]float64 {
	out := make(map[string]float64, len(l.pks))
	if len(l.pks) == 0 {
		return out
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pk := range l.pks {
		s := l.scores[pk]
		lo, hi = math.Min(lo, s), math.Max(hi, s)
	}
	for _, pk := range l.pks {
		s := 1.0
		if hi > lo {
			s = (l.scores[pk] - lo) / (hi - lo)
		}
		if lowerIsBetter {
			s = 1 - s
			if hi == lo {
				s = 1
			}
		}
		out[pk] = s
	}
	return out
}
