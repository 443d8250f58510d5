package emulator

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// tokenPages pages req with next_page_token until a page is not full.
func tokenPages(t *testing.T, e *Emulator, req *apiv1.SearchRequest, pageSize uint32) []string {
	t.Helper()
	var out []string
	req.Limit, req.KeysOnly = pageSize, true
	for pages := 0; ; pages++ {
		r, err := e.Search(bg, req)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		out = append(out, hitKeys(r)...)
		if len(r.GetHits()) < int(pageSize) {
			if r.GetNextPageToken() != "" {
				t.Fatalf("page %d is not full but has a next_page_token", pages)
			}
			return out
		}
		if r.GetNextPageToken() == "" {
			t.Fatalf("full page %d without a next_page_token", pages)
		}
		req.PageToken = r.GetNextPageToken()
	}
}

// E79: next_page_token pages a query like search_after does; a token of
// another query (other text, filters, sort or fusion) is refused naming
// page_token with a message that says so; limit, offset, facets and
// highlight may change between pages.
func TestPageTokenE79(t *testing.T) {
	seed := testSeed(t)
	docs := shopDocs(seed, 300)
	e := openMem(t, Options{})
	loadShop(t, e, docs)
	sortPrice := []*apiv1.SortField{{Field: "price"}}
	byToken := tokenPages(t, e, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless"}, Sort: sortPrice}, 7)
	byAfter := allPages(t, e, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless"}, Sort: sortPrice}, 7)
	if len(byToken) == 0 || !slices.Equal(byToken, byAfter) {
		t.Fatalf("seed %d: token pages %v, search_after pages %v", seed, byToken, byAfter)
	}

	first, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless"}, Sort: sortPrice, Limit: 3})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	tok := first.GetNextPageToken()
	// The same query with another limit, offset, facets, highlight: fine.
	if _, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless"}, Sort: sortPrice, Limit: 5, Offset: 1,
		Facets: []*apiv1.FacetRequest{{Field: "brand"}}, Highlight: &apiv1.HighlightRequest{}, KeysOnly: true, PageToken: tok}); err != nil {
		t.Fatalf("same query, other page options: %v", err)
	}
	for name, other := range map[string]*apiv1.SearchRequest{
		"text":    {Text: &apiv1.TextQuery{Query: "speaker"}, Sort: sortPrice},
		"sort":    {Text: &apiv1.TextQuery{Query: "wireless"}, Sort: []*apiv1.SortField{{Field: "price", Descending: true}}},
		"filters": {Text: &apiv1.TextQuery{Query: "wireless"}, Sort: sortPrice, Filters: []*apiv1.Filter{{Field: "stock", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(1)}}},
		"vector":  {Text: &apiv1.TextQuery{Query: "wireless"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1}}, Sort: sortPrice},
	} {
		other.Collection, other.PageToken = "shop", tok
		_, err := e.Search(bg, other)
		ce := requireReason(t, "E79 ("+name+")", err, contract.ReasonInvalidQuery, "page_token")
		if !strings.Contains(ce.Message, "another query") {
			t.Errorf("E79 (%s): message %q does not say the token is from another query", name, ce.Message)
		}
	}
}

// E74, E75, E79: a hybrid search sorts its fused candidates by a field,
// and pages by search_after or page_token; token pages fuse the first
// page's candidates whatever the later limits, so they list the fused
// ranking once, in order.
func TestHybridSortAndPagingE79(t *testing.T) {
	seed := testSeed(t)
	docs := shopDocs(seed, 300)
	e := openMem(t, Options{})
	loadShop(t, e, docs)
	hybrid := func() *apiv1.SearchRequest {
		return &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless speaker"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{2, 1}}}
	}
	// One request of limit 12 fuses windows of max(4*12, 50) = 50, as
	// pages of limit 5 do (max(4*5, 50) = 50).
	ref, err := e.Search(bg, func() *apiv1.SearchRequest { r := hybrid(); r.Limit, r.KeysOnly = 12, true; return r }())
	if err != nil || len(ref.GetHits()) != 12 {
		t.Fatalf("seed %d: reference page: %v %v", seed, ref, err)
	}
	pages := tokenPages(t, e, hybrid(), 5)
	if len(pages) < 12 || !slices.Equal(pages[:12], hitKeys(ref)) {
		t.Fatalf("seed %d: hybrid token pages %v, one page %v", seed, pages, hitKeys(ref))
	}
	seen := map[string]bool{}
	for _, pk := range pages {
		if seen[pk] {
			t.Fatalf("seed %d: %s twice in hybrid pages %v", seed, pk, pages)
		}
		seen[pk] = true
	}
	after := allPages(t, e, hybrid(), 5)
	if !slices.Equal(after, pages) {
		t.Fatalf("seed %d: hybrid search_after pages %v, token pages %v", seed, after, pages)
	}

	byPrice := hybrid()
	byPrice.Sort = []*apiv1.SortField{{Field: "price"}}
	byPrice.Limit = 1000
	r, err := e.Search(bg, byPrice)
	if err != nil || len(r.GetHits()) == 0 {
		t.Fatalf("hybrid sorted by price: %v %v", r, err)
	}
	price := map[string]*float64{}
	for _, d := range docs {
		price[fmt.Sprint(d.id)] = d.price
	}
	for i := 1; i < len(r.GetHits()); i++ {
		a, b := r.GetHits()[i-1].GetPrimaryKey(), r.GetHits()[i].GetPrimaryKey()
		pa, pb := price[a], price[b]
		ok := (pa != nil && pb != nil && (*pa < *pb || (*pa == *pb && a < b))) || (pa != nil && pb == nil) || (pa == nil && pb == nil && a < b)
		if !ok {
			t.Fatalf("seed %d: hybrid hits not by price then pk at %d: %s (%v) before %s (%v)", seed, i, a, pa, b, pb)
		}
	}
}
