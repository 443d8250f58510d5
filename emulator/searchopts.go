package emulator

import (
	"fmt"
	"math"
	"sort"
	"strings"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// ScoreSortField names the relevance score in SortField.field (E75).
const ScoreSortField = "_score"

// maxSortKeys bounds SortField lists (E75).
const maxSortKeys = 8

// sortKey is one effective sort key; field "" is the score.
type sortKey struct {
	field string
	desc  bool
}

func badQuery(field, expected, actual, format string, args ...any) error {
	return contract.Errf(contract.ReasonInvalidQuery, field, expected, actual, format, args...)
}

// checkPaging validates the options that do not depend on the collection
// (E76, E74).
func checkPaging(req *apiv1.SearchRequest) error {
	if o := req.GetOffset(); o < 0 || o > MaxSearchOffset {
		return badQuery("offset", fmt.Sprintf("0..%d", MaxSearchOffset), fmt.Sprint(o), "offset out of range (use search_after for deeper pages)")
	}
	hybrid := req.GetText() != nil && req.GetVector() != nil
	if req.GetPageToken() != "" && len(req.GetSearchAfter()) > 0 {
		return badQuery("page_token", "page_token or search_after", "both", "page_token and search_after both say where the page starts: send one")
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"text_weight", req.GetTextWeight()}, {"vector_weight", req.GetVectorWeight()}} {
		if math.IsNaN(w.v) || math.IsInf(w.v, 0) || w.v < 0 {
			return badQuery(w.name, "a finite weight >= 0", fmt.Sprint(w.v), "invalid fusion weight")
		}
		if w.v != 0 && (!hybrid || req.GetFusion() != apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED) {
			return badQuery(w.name, "WEIGHTED fusion of a text and a vector query", req.GetFusion().String(), "weights apply only to weighted hybrid searches")
		}
	}
	return nil
}

// sortKeysFor returns the effective sort keys (E75): the request's, or the
// score descending for ranked searches, or none (primary key order) for
// filter-only ones. The primary key always breaks ties, ascending.
func sortKeysFor(c *collection, req *apiv1.SearchRequest) ([]sortKey, error) {
	ranked := req.GetText() != nil || req.GetVector() != nil
	if len(req.GetSort()) == 0 {
		if ranked {
			return []sortKey{{desc: true}}, nil
		}
		return nil, nil
	}
	if len(req.GetSort()) > maxSortKeys {
		return nil, badQuery("sort", fmt.Sprintf("at most %d keys", maxSortKeys), fmt.Sprint(len(req.GetSort())), "too many sort keys")
	}
	seen := map[string]bool{}
	var out []sortKey
	for i, s := range req.GetSort() {
		p := fmt.Sprintf("sort[%d].field", i)
		name := s.GetField()
		if seen[name] {
			return nil, badQuery(p, "each field once", name, "duplicate sort key")
		}
		seen[name] = true
		if name == ScoreSortField {
			if !ranked {
				return nil, badQuery(p, "a field (a filter-only search has no score)", name, "nothing to sort by score")
			}
			out = append(out, sortKey{desc: s.GetDescending()})
			continue
		}
		f, ok := c.schema.Fields[name]
		if !ok {
			return nil, badQuery(p, "a field of "+c.name(), name, "unknown sort field")
		}
		switch f.GetRole() {
		case apiv1.FieldRole_FIELD_ROLE_KEYWORD, apiv1.FieldRole_FIELD_ROLE_NUMERIC, apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY:
		default:
			return nil, badQuery(p, "a KEYWORD, NUMERIC or PRIMARY_KEY field", name+" ("+f.GetRole().String()+")", "field cannot be sorted by")
		}
		switch f.GetType() {
		case apiv1.FieldType_FIELD_TYPE_JSON, apiv1.FieldType_FIELD_TYPE_VECTOR:
			return nil, badQuery(p, "a scalar field", name+" ("+f.GetType().String()+")", "field cannot be sorted by")
		}
		out = append(out, sortKey{field: name, desc: s.GetDescending()})
	}
	return out, nil
}

// checkSearchAfter validates a cursor against the sort keys (E76): one
// value per key (a double for the score, a value of the field's kind or
// null for a field) and then the primary key.
func checkSearchAfter(c *collection, after []*apiv1.Value, keys []sortKey) ([]*apiv1.Value, error) {
	if len(after) == 0 {
		return nil, nil
	}
	if len(after) != len(keys)+1 {
		return nil, badQuery("search_after", fmt.Sprintf("%d values (the sort_values of a hit of this query)", len(keys)+1), fmt.Sprint(len(after)),
			"search_after does not fit this query's sort")
	}
	for i, k := range keys {
		p := fmt.Sprintf("search_after[%d]", i)
		v := after[i]
		if k.field == "" {
			if _, ok := v.GetKind().(*apiv1.Value_DoubleValue); !ok {
				return nil, badQuery(p, "double_value (the score)", kindOf(v), "search_after does not fit this query's sort")
			}
			continue
		}
		if !isNull(v) && !filterKindOK(c.schema.Fields[k.field].GetType(), v) {
			return nil, badQuery(p, contract.KindFor(c.schema.Fields[k.field].GetType())+" or null (field "+k.field+")", kindOf(v), "search_after does not fit this query's sort")
		}
	}
	last := after[len(keys)]
	if _, ok := last.GetKind().(*apiv1.Value_StringValue); !ok {
		return nil, badQuery(fmt.Sprintf("search_after[%d]", len(keys)), "string_value (the primary key)", kindOf(last), "search_after does not fit this query's sort")
	}
	return after, nil
}

func kindOf(v *apiv1.Value) string {
	if v.GetKind() == nil {
		return "no value"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", v.GetKind()), "*apiv1.Value_")
}

// keyValue is a candidate's value for one sort key.
func keyValue(ent *docstore.Entry, r cand, k sortKey) *apiv1.Value {
	if k.field == "" {
		return &apiv1.Value{Kind: &apiv1.Value_DoubleValue{DoubleValue: r.score}}
	}
	if ent != nil {
		if v := ent.Field(k.field); !isNull(v) {
			return v
		}
	}
	return &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}
}

// keyCmp orders two values of one sort key; nulls and missing values sort
// last in either direction (E75).
func keyCmp(a, b *apiv1.Value, desc bool) int {
	an, bn := isNull(a), isNull(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	c, ok := compareValues(a, b)
	if !ok {
		c = strings.Compare(kindOf(a), kindOf(b))
	}
	if desc {
		c = -c
	}
	return c
}

// sortValues are a hit's sort keys and its primary key (E75).
func sortValues(ent *docstore.Entry, r cand, keys []sortKey) []*apiv1.Value {
	out := make([]*apiv1.Value, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, keyValue(ent, r, k))
	}
	return append(out, &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: r.pk}})
}

// sortCands orders candidates by the keys, then primary key ascending.
// Each candidate's values are decoded once and sorted along with it (no
// map from key to values to look up twice per comparison).
func sortCands(c *collection, ranked []cand, keys []sortKey) {
	type keyed struct {
		r    cand
		vals []*apiv1.Value
	}
	ks := make([]keyed, len(ranked))
	for i, r := range ranked {
		ent, _ := c.docs.Get(r.pk)
		ks[i] = keyed{r, sortValues(ent, r, keys)}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i].vals, ks[j].vals
		for n, k := range keys {
			if x := keyCmp(a[n], b[n], k.desc); x != 0 {
				return x < 0
			}
		}
		return ks[i].r.pk < ks[j].r.pk
	})
	for i := range ks {
		ranked[i] = ks[i].r
	}
}

// compareToCursor orders a candidate against a search_after cursor.
func compareToCursor(c *collection, r cand, keys []sortKey, cursor []*apiv1.Value) int {
	ent, _ := c.docs.Get(r.pk)
	for n, k := range keys {
		if x := keyCmp(keyValue(ent, r, k), cursor[n], k.desc); x != 0 {
			return x
		}
	}
	return strings.Compare(r.pk, cursor[len(keys)].GetStringValue())
}

// highlighterFor returns the per-hit highlighter of a search (E78), nil
// when none was asked for.
func highlighterFor(c *collection, req *apiv1.SearchRequest) (func(*docstore.Entry) map[string]string, error) {
	h := req.GetHighlight()
	if h == nil {
		return nil, nil
	}
	if req.GetText() == nil {
		return nil, badQuery("highlight", "a search with a text query", "no text query", "nothing to highlight")
	}
	fields := h.GetFields()
	for i, f := range fields {
		fd, ok := c.schema.Fields[f]
		if !ok || fd.GetRole() != apiv1.FieldRole_FIELD_ROLE_TEXT {
			return nil, badQuery(fmt.Sprintf("highlight.fields[%d]", i), "a TEXT field", f, "not a text field")
		}
	}
	if len(fields) == 0 {
		fields = req.GetText().GetFields()
	}
	if len(fields) == 0 {
		fields = c.textFields
	}
	pre, post := h.GetPreTag(), h.GetPostTag()
	if pre == "" && post == "" {
		pre, post = "<em>", "</em>"
	}
	terms := c.textIdx.Terms(req.GetText().GetQuery())
	return func(ent *docstore.Entry) map[string]string {
		var out map[string]string
		for _, f := range fields {
			s := ent.Text(f)
			if s == "" {
				continue
			}
			if marked, ok := c.textIdx.Highlight(s, terms, pre, post); ok {
				if out == nil {
					out = map[string]string{}
				}
				out[f] = marked
			}
		}
		return out
	}, nil
}
