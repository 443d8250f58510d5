package emulator

import (
	"context"
	"fmt"
	"math"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// Search limits (E73).
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 10000
	rrfK               = 60
)

// Search runs a text, vector, filter-only or hybrid search (E70..E74).
func (e *Emulator) Search(ctx context.Context, req *apiv1.SearchRequest) (*apiv1.SearchResponse, error) {
	resp, err := e.search(ctx, req)
	return resp, e.reject("search", err)
}

type leg struct {
	pks    []string
	scores map[string]float64 // text: BM25; vector: distance
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
	fs, err := compileFilters(c.schema, req.GetFilters())
	if err != nil {
		return nil, err
	}
	// A hit must be a live document that passes every filter.
	accept := func(pk string) bool {
		ent, ok := c.docs.Get(pk)
		return ok && !ent.Deleted && fs.match(ent.Fields)
	}
	window := limit
	if hasText && hasVec {
		window = max(limit*4, 50)
	}
	resp := &apiv1.SearchResponse{ReadTs: readTs}
	var textLeg, vecLeg *leg
	if hasText {
		hits, err := c.textIdx.Search(req.GetText().GetQuery(), req.GetText().GetFields(), window, accept)
		if err != nil {
			return nil, contract.Errf(contract.ReasonInvalidQuery, "text.query", "", "", "%v", err)
		}
		textLeg = &leg{scores: map[string]float64{}}
		for _, h := range hits {
			textLeg.pks = append(textLeg.pks, h.PK)
			textLeg.scores[h.PK] = h.Score
		}
	}
	if hasVec {
		vf := c.vectorField(req.GetVector().GetField())
		idx := vf.idx
		if m := req.GetVector().GetMetric(); m != apiv1.VectorMetric_VECTOR_METRIC_UNSPECIFIED && vectorMetric(m) != idx.Metric() {
			return nil, contract.Errf(contract.ReasonInvalidQuery, "vector.metric", idx.Metric().String(), m.String(), "query metric must match the field's metric")
		}
		hits, err := idx.SearchFiltered(req.GetVector().GetVector(), window, accept)
		if err != nil {
			return nil, contract.Errf(contract.ReasonInvalidQuery, "vector.vector", "", "", "%v", err)
		}
		vecLeg = &leg{scores: map[string]float64{}}
		for _, h := range hits {
			vecLeg.pks = append(vecLeg.pks, h.PK)
			vecLeg.scores[h.PK] = h.Distance
		}
	}

	type scored struct {
		pk    string
		score float64
	}
	var ranked []scored
	switch {
	case textLeg != nil && vecLeg != nil:
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
		for pk, s := range fused {
			ranked = append(ranked, scored{pk, s})
		}
		sort.Slice(ranked, func(i, j int) bool {
			if ranked[i].score != ranked[j].score {
				return ranked[i].score > ranked[j].score
			}
			return ranked[i].pk < ranked[j].pk
		})
		resp.Total = uint64(len(ranked))
	case textLeg != nil:
		for _, pk := range textLeg.pks {
			ranked = append(ranked, scored{pk, textLeg.scores[pk]})
		}
		resp.Total = uint64(len(ranked))
	case vecLeg != nil:
		for _, pk := range vecLeg.pks {
			ranked = append(ranked, scored{pk, -vecLeg.scores[pk]})
		}
		resp.Total = uint64(len(ranked))
	default:
		keys, narrowed := []string(nil), false
		if c.aux != nil {
			for _, f := range req.GetFilters() {
				if cand, ok := c.aux.candidates(f); ok && (!narrowed || len(cand) < len(keys)) {
					keys, narrowed = cand, true
				}
			}
		}
		if !narrowed {
			keys = c.docs.Keys()
		}
		for _, pk := range keys {
			if accept(pk) {
				resp.Total++
				if len(ranked) < limit {
					ranked = append(ranked, scored{pk, 0})
				}
			}
		}
	}
	if len(ranked) > limit {
		ranked = ranked[:limit]
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
		if !req.GetKeysOnly() {
			ent, _ := c.docs.Get(r.pk)
			h.Fields = ent.Fields
		}
		resp.Hits = append(resp.Hits, h)
	}
	return resp, nil
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
