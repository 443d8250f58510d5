package emulator

import (
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

func hitKeys(r *apiv1.SearchResponse) []string {
	var out []string
	for _, h := range r.GetHits() {
		out = append(out, h.GetPrimaryKey())
	}
	return out
}

func eqKeys(a []string, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// E73, E74.
func TestSearchE73E74(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	tok := lin.GetSchemaGenerationToken()
	seedItems(t, e, tok)
	mustIngest(t, e, mb("table:100", 1, tok,
		itemUpsert(4, 23, 4, "red apple pie with apple", "food", 4.0, []float32{0.9, 0.1, 0}),
		del(5, 24, 2),
	))
	mustAdvance(t, e, "table:100", 1, 40)
	e.WaitIndexed()
	search := func(req *apiv1.SearchRequest) *apiv1.SearchResponse {
		t.Helper()
		req.Collection = "items"
		r, err := e.Search(bg, req)
		if err != nil {
			t.Fatalf("search %v: %v", req, err)
		}
		if r.GetReadTs() != 40 {
			t.Fatalf("E70: read_ts %d", r.GetReadTs())
		}
		return r
	}
	// Text, BM25: both apple docs, best first.
	r := search(&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "apple"}})
	if len(r.GetHits()) != 2 || r.GetHits()[0].GetTextScore() < r.GetHits()[1].GetTextScore() {
		t.Fatalf("text: %v", r)
	}
	r = search(&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "pie"}})
	if !eqKeys(hitKeys(r), "4") {
		t.Fatalf("text: %v", r)
	}
	// Deleted docs never appear.
	if r := search(&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "pear"}}); len(r.GetHits()) != 0 {
		t.Fatalf("deleted doc found: %v", r)
	}
	// Text + filter.
	r = search(&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "apple"}, Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val("fruit")}}})
	if !eqKeys(hitKeys(r), "1") {
		t.Fatalf("text+filter: %v", r)
	}
	// Vector: nearest to x axis.
	r = search(&apiv1.SearchRequest{Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0, 0}}, Limit: 2})
	if !eqKeys(hitKeys(r), "1", "4") || r.GetHits()[0].GetVectorDistance() > 1e-6 {
		t.Fatalf("vector: %v", r)
	}
	// Filter only, ordered by key; numeric range across kinds; aux narrowing.
	r = search(&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "price", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(4)}}})
	if !eqKeys(hitKeys(r), "3", "4") || r.GetTotal() != 2 {
		t.Fatalf("numeric filter: %v", r)
	}
	r = search(&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_IN, Values: []*apiv1.Value{val("toy"), val("food")}}}, Limit: 1})
	if !eqKeys(hitKeys(r), "3") || r.GetTotal() != 2 {
		t.Fatalf("IN filter with limit: %v", r)
	}
	r = search(&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "title", Op: apiv1.FilterOp_FILTER_OP_PREFIX, Value: val("blue")}}, KeysOnly: true})
	if !eqKeys(hitKeys(r), "3") || r.GetHits()[0].GetFields() != nil {
		t.Fatalf("prefix/keys_only: %v", r)
	}
	// Hybrid RRF: doc 1 ranks high in both legs.
	r = search(&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "red"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0, 0}}, Limit: 3})
	if len(r.GetHits()) == 0 || r.GetHits()[0].GetPrimaryKey() != "1" {
		t.Fatalf("hybrid rrf: %v", r)
	}
	r = search(&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "red"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{0, 0, 1}}, Fusion: apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED, TextWeight: 0, VectorWeight: 1, Limit: 1})
	if !eqKeys(hitKeys(r), "3") {
		t.Fatalf("hybrid weighted (vector only weight): %v", r)
	}
	bad := []struct {
		req   *apiv1.SearchRequest
		field string
	}{
		{&apiv1.SearchRequest{}, ""},
		{&apiv1.SearchRequest{Limit: 10001, Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val("x")}}}, "limit"},
		{&apiv1.SearchRequest{Text: &apiv1.TextQuery{Query: "x", Fields: []string{"tag"}}}, "text.fields[0]"},
		{&apiv1.SearchRequest{Text: &apiv1.TextQuery{}}, "text.query"},
		{&apiv1.SearchRequest{Vector: &apiv1.VectorQuery{Field: "title", Vector: []float32{1, 0, 0}}}, "vector.field"},
		{&apiv1.SearchRequest{Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0}}}, "vector.vector"},
		{&apiv1.SearchRequest{Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0, 0}, Metric: apiv1.VectorMetric_VECTOR_METRIC_L2}}, "vector.metric"},
		{&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "nope", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val("x")}}}, "filters[0].field"},
		{&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_UNSPECIFIED}}}, "filters[0].op"},
		{&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "price", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val("x")}}}, "filters[0].values[0]"},
		{&apiv1.SearchRequest{Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_EQ}}}, "filters[0].value"},
	}
	for i, b := range bad {
		b.req.Collection = "items"
		_, err := e.Search(bg, b.req)
		requireReason(t, "E73", err, contract.ReasonInvalidQuery, b.field)
		_ = i
	}
}

// Filters: null semantics and numeric comparisons across kinds (E74).
func TestFilterSemantics(t *testing.T) {
	cases := []struct {
		op   apiv1.FilterOp
		doc  *apiv1.Value
		arg  *apiv1.Value
		want bool
	}{
		{apiv1.FilterOp_FILTER_OP_EQ, val(int64(-1)), val(uint64(1)), false},
		{apiv1.FilterOp_FILTER_OP_LT, val(int64(-1)), val(uint64(1)), true},
		{apiv1.FilterOp_FILTER_OP_EQ, val(uint64(1 << 63)), val(uint64(1 << 63)), true},
		{apiv1.FilterOp_FILTER_OP_GT, val(uint64(1<<63 + 1)), val(uint64(1 << 63)), true},
		{apiv1.FilterOp_FILTER_OP_EQ, val(2.0), val(2), true},
		{apiv1.FilterOp_FILTER_OP_NE, val(nil), val(2), false},
		{apiv1.FilterOp_FILTER_OP_IS_NULL, val(nil), nil, true},
		{apiv1.FilterOp_FILTER_OP_IS_NULL, nil, nil, true},
		{apiv1.FilterOp_FILTER_OP_GTE, val("b"), val("a"), true},
		{apiv1.FilterOp_FILTER_OP_EQ, val(true), val(true), true},
	}
	for i, c := range cases {
		f := &apiv1.Filter{Field: "x", Op: c.op, Value: c.arg}
		if got := matchOne(f, c.doc); got != c.want {
			t.Errorf("case %d: %v %v %v = %v", i, c.doc, c.op, c.arg, got)
		}
	}
}
