package emulator

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// shopDef: id INT pk, title TEXT, brand KEYWORD, price FLOAT NUMERIC, stock
// INT NUMERIC, emb VECTOR(2).
func shopDef(name, part string) *apiv1.CollectionDefinition {
	return &apiv1.CollectionDefinition{
		Name: name,
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT},
			{Name: "brand", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_KEYWORD},
			{Name: "price", Type: apiv1.FieldType_FIELD_TYPE_FLOAT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
			{Name: "stock", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
			{Name: "emb", Type: apiv1.FieldType_FIELD_TYPE_VECTOR, Role: apiv1.FieldRole_FIELD_ROLE_VECTOR, VectorDim: 2},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{part},
		MetadataAux:      true,
	}
}

type shopDoc struct {
	id     int
	title  string
	brand  *string
	price  *float64
	stock  int64
	hasEmb bool
}

func (d shopDoc) fields() map[string]*apiv1.Value {
	f := map[string]*apiv1.Value{"id": val(d.id), "title": val(d.title), "stock": val(d.stock), "brand": val(nil), "price": val(nil)}
	if d.brand != nil {
		f["brand"] = val(*d.brand)
	}
	if d.price != nil {
		f["price"] = val(*d.price)
	}
	if d.hasEmb {
		f["emb"] = val([]float32{float32(d.id%7) + 1, float32(d.id % 5)})
	}
	return f
}

func (d shopDoc) words() map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(strings.ToLower(d.title)) {
		out[w] = true
	}
	return out
}

// shopDocs makes n documents from a seed: some without a brand or a price
// (nulls), titles from a small vocabulary with mixed case.
func shopDocs(seed int64, n int) []shopDoc {
	rng := rand.New(rand.NewSource(seed))
	brands := []string{"acme", "bolt", "core", "dyna", "echo"}
	words := []string{"wireless", "Wireless", "speaker", "cable", "charger", "Mouse", "keyboard", "red", "blue"}
	out := make([]shopDoc, n)
	for i := range out {
		d := shopDoc{id: i + 1, stock: int64(rng.Intn(20)), hasEmb: rng.Intn(5) != 0}
		var t []string
		for j := 0; j < 2+rng.Intn(3); j++ {
			t = append(t, words[rng.Intn(len(words))])
		}
		d.title = strings.Join(t, " ")
		if rng.Intn(6) != 0 {
			b := brands[rng.Intn(len(brands))]
			d.brand = &b
		}
		if rng.Intn(8) != 0 {
			p := float64(rng.Intn(40)) / 2 // ties on purpose
			d.price = &p
		}
		out[i] = d
	}
	return out
}

func loadShop(t testing.TB, e *Emulator, docs []shopDoc) *apiv1.Lineage {
	lin := mustCreate(t, e, shopDef("shop", "table:900"), 10)
	seq, ts := uint64(1), uint64(20)
	for i := 0; i < len(docs); i += 1000 {
		b := &apiv1.MutationBatch{SourcePartition: "table:900", SourceEpoch: 1, FirstSeq: seq, SchemaGenerationToken: lin.GetSchemaGenerationToken()}
		for _, d := range docs[i:min(i+1000, len(docs))] {
			b.Mutations = append(b.Mutations, &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(d.id), Fields: d.fields()})
			seq++
			ts++
		}
		mustIngest(t, e, b)
	}
	mustAdvance(t, e, "table:900", 1, ts)
	e.WaitIndexed()
	return lin
}

// refSort orders docs by the sort keys (nulls last either way), then pk
// ascending as strings (E75).
func refSort(docs []shopDoc, keys ...sortKey) []string {
	vals := func(d shopDoc, k sortKey) *apiv1.Value { return shopDoc.fields(d)[k.field] }
	sorted := append([]shopDoc(nil), docs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		for _, k := range keys {
			if c := keyCmp(vals(sorted[i], k), vals(sorted[j], k), k.desc); c != 0 {
				return c < 0
			}
		}
		return fmt.Sprint(sorted[i].id) < fmt.Sprint(sorted[j].id)
	})
	out := make([]string, len(sorted))
	for i, d := range sorted {
		out[i] = fmt.Sprint(d.id)
	}
	return out
}

func where(docs []shopDoc, pred func(shopDoc) bool) []shopDoc {
	var out []shopDoc
	for _, d := range docs {
		if pred(d) {
			out = append(out, d)
		}
	}
	return out
}

func allPages(t *testing.T, e *Emulator, req *apiv1.SearchRequest, pageSize uint32) []string {
	t.Helper()
	var out []string
	req.Limit, req.KeysOnly = pageSize, true
	for {
		r, err := e.Search(bg, req)
		if err != nil {
			t.Fatalf("page after %d keys: %v", len(out), err)
		}
		out = append(out, hitKeys(r)...)
		if len(r.GetHits()) < int(pageSize) {
			return out
		}
		req.SearchAfter = r.GetHits()[len(r.GetHits())-1].GetSortValues()
	}
}

// E75, E76: sorts by fields and by score, search_after pages and offsets,
// each against a reference computed from the documents.
func TestSearchSortAndPagingE75E76(t *testing.T) {
	seed := testSeed(t)
	docs := shopDocs(seed, 400)
	e := openMem(t, Options{})
	loadShop(t, e, docs)
	wireless := where(docs, func(d shopDoc) bool { return d.words()["wireless"] })
	inStock := where(docs, func(d shopDoc) bool { return d.stock >= 5 })
	text := func() *apiv1.SearchRequest {
		return &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless"}}
	}
	filter := func() *apiv1.SearchRequest {
		return &apiv1.SearchRequest{Collection: "shop", Filters: []*apiv1.Filter{{Field: "stock", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(5)}}}
	}
	cases := []struct {
		name string
		req  *apiv1.SearchRequest
		sort []*apiv1.SortField
		want []string
	}{
		{"text by price asc", text(), []*apiv1.SortField{{Field: "price"}}, refSort(wireless, sortKey{field: "price"})},
		{"text by price desc, brand asc", text(), []*apiv1.SortField{{Field: "price", Descending: true}, {Field: "brand"}}, refSort(wireless, sortKey{field: "price", desc: true}, sortKey{field: "brand"})},
		{"filter by brand desc", filter(), []*apiv1.SortField{{Field: "brand", Descending: true}}, refSort(inStock, sortKey{field: "brand", desc: true})},
		{"filter by stock, id desc", filter(), []*apiv1.SortField{{Field: "stock"}, {Field: "id", Descending: true}}, refSort(inStock, sortKey{field: "stock"}, sortKey{field: "id", desc: true})},
		{"filter default pk order", filter(), nil, refSort(inStock)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Sort = tc.sort
			tc.req.Limit = MaxSearchLimit
			r, err := e.Search(bg, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			// rule: E75 — order against the reference; E76 — total counts every match.
			if !eqKeys(hitKeys(r), tc.want...) || r.GetTotal() != uint64(len(tc.want)) {
				t.Fatalf("seed %d: got %d keys (total %d) %v\nwant %d %v", seed, len(r.GetHits()), r.GetTotal(), hitKeys(r), len(tc.want), tc.want)
			}
			// rule: E76 — search_after pages give the same sequence.
			paged := allPages(t, e, &apiv1.SearchRequest{Collection: tc.req.Collection, Text: tc.req.Text, Filters: tc.req.Filters, Sort: tc.sort}, 7)
			if !eqKeys(paged, tc.want...) {
				t.Fatalf("seed %d: pages %v\nwant %v", seed, paged, tc.want)
			}
			// rule: E76 — offset skips that many hits.
			req := &apiv1.SearchRequest{Collection: tc.req.Collection, Text: tc.req.Text, Filters: tc.req.Filters, Sort: tc.sort, Offset: 11, Limit: 5, KeysOnly: true}
			r, err = e.Search(bg, req)
			if err != nil {
				t.Fatal(err)
			}
			if !eqKeys(hitKeys(r), tc.want[min(11, len(tc.want)):min(16, len(tc.want))]...) {
				t.Fatalf("seed %d: offset page %v", seed, hitKeys(r))
			}
		})
	}
	// rule: E75 — _score descending is the default relevance order; the
	// sort values carry the score and the key.
	def, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless speaker"}, Limit: 50, KeysOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	byScore, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless speaker"}, Limit: 50, KeysOnly: true, Sort: []*apiv1.SortField{{Field: ScoreSortField, Descending: true}}})
	if err != nil || !eqKeys(hitKeys(byScore), hitKeys(def)...) {
		t.Fatalf("_score desc differs from the default order: %v %v", hitKeys(byScore), err)
	}
	if sv := def.GetHits()[0].GetSortValues(); len(sv) != 2 || sv[0].GetDoubleValue() != def.GetHits()[0].GetScore() || sv[1].GetStringValue() != def.GetHits()[0].GetPrimaryKey() {
		t.Fatalf("sort values %v", sv)
	}
	paged := allPages(t, e, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless speaker"}}, 9)
	full, _ := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless speaker"}, Limit: MaxSearchLimit, KeysOnly: true})
	if !eqKeys(paged, hitKeys(full)...) || full.GetTotal() != uint64(len(where(docs, func(d shopDoc) bool { return d.words()["wireless"] || d.words()["speaker"] }))) {
		t.Fatalf("score pages: %d keys vs %d (total %d)", len(paged), len(full.GetHits()), full.GetTotal())
	}
	// Vector: total is every document with a vector passing the filters;
	// pages by distance match one exact ranking.
	withEmb := where(inStock, func(d shopDoc) bool { return d.hasEmb })
	vreq := func() *apiv1.SearchRequest {
		return &apiv1.SearchRequest{Collection: "shop", Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1}}, Filters: filter().Filters}
	}
	vfull := vreq()
	vfull.Limit, vfull.KeysOnly = MaxSearchLimit, true
	vr, err := e.Search(bg, vfull)
	if err != nil || vr.GetTotal() != uint64(len(withEmb)) || len(vr.GetHits()) != len(withEmb) {
		t.Fatalf("vector total %d, hits %d, want %d (%v)", vr.GetTotal(), len(vr.GetHits()), len(withEmb), err)
	}
	if vp := allPages(t, e, vreq(), 13); !eqKeys(vp, hitKeys(vr)...) {
		t.Fatalf("vector pages differ")
	}
	// Hybrid: total is the union of both legs.
	hr, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "wireless"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1}}, Filters: filter().Filters, Limit: 3})
	union := where(inStock, func(d shopDoc) bool { return d.hasEmb || d.words()["wireless"] })
	if err != nil || hr.GetTotal() != uint64(len(union)) {
		t.Fatalf("hybrid total %d, want %d (%v)", hr.GetTotal(), len(union), err)
	}
}

// E77: term counts and range buckets over the whole matching set.
func TestSearchFacetsE77(t *testing.T) {
	seed := testSeed(t)
	docs := shopDocs(seed, 300)
	e := openMem(t, Options{})
	loadShop(t, e, docs)
	match := where(docs, func(d shopDoc) bool { return d.words()["wireless"] && d.stock >= 3 })
	r, err := e.Search(bg, &apiv1.SearchRequest{
		Collection: "shop",
		Text:       &apiv1.TextQuery{Query: "wireless"},
		Filters:    []*apiv1.Filter{{Field: "stock", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(3)}},
		Limit:      1,
		Facets: []*apiv1.FacetRequest{
			{Field: "brand", Size: 3},
			{Field: "price", Ranges: []*apiv1.FacetRange{{To: ptr(5.0)}, {From: ptr(5.0), To: ptr(10.0), Key: "mid"}, {From: ptr(10.0)}}},
			{Field: "stock"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetTotal() != uint64(len(match)) || len(r.GetFacets()) != 3 {
		t.Fatalf("seed %d: total %d want %d; facets %v", seed, r.GetTotal(), len(match), r.GetFacets())
	}
	// Reference: brand counts, most frequent first then by term.
	counts := map[string]uint64{}
	var missing uint64
	for _, d := range match {
		if d.brand == nil {
			missing++
		} else {
			counts[*d.brand]++
		}
	}
	var terms []string
	for k := range counts {
		terms = append(terms, k)
	}
	sort.Slice(terms, func(i, j int) bool {
		if counts[terms[i]] != counts[terms[j]] {
			return counts[terms[i]] > counts[terms[j]]
		}
		return terms[i] < terms[j]
	})
	brand := r.GetFacets()[0]
	var other uint64
	for i, k := range terms {
		if i >= 3 {
			other += counts[k]
			continue
		}
		if b := brand.GetBuckets()[i]; b.GetKey() != k || b.GetCount() != counts[k] || b.GetValue().GetStringValue() != k {
			t.Fatalf("seed %d: brand bucket %d = %v, want %s:%d", seed, i, b, k, counts[k])
		}
	}
	if len(brand.GetBuckets()) != min(3, len(terms)) || brand.GetMissing() != missing || brand.GetOther() != other {
		t.Fatalf("seed %d: brand facet %v (missing %d other %d)", seed, brand, missing, other)
	}
	// Reference: price buckets [,5) [5,10) [10,).
	var want [3]uint64
	var pmissing uint64
	for _, d := range match {
		switch {
		case d.price == nil:
			pmissing++
		case *d.price < 5:
			want[0]++
		case *d.price < 10:
			want[1]++
		default:
			want[2]++
		}
	}
	price := r.GetFacets()[1]
	keys := []string{"-5", "mid", "10-"}
	for i, b := range price.GetBuckets() {
		if b.GetKey() != keys[i] || b.GetCount() != want[i] {
			t.Fatalf("seed %d: price bucket %d = %v, want %s:%d", seed, i, b, keys[i], want[i])
		}
	}
	if price.GetMissing() != pmissing {
		t.Fatalf("seed %d: price missing %d want %d", seed, price.GetMissing(), pmissing)
	}
	// Term counts over a numeric field add up to the matching set.
	var sum uint64
	for _, b := range r.GetFacets()[2].GetBuckets() {
		sum += b.GetCount()
	}
	if sum+r.GetFacets()[2].GetOther()+r.GetFacets()[2].GetMissing() != uint64(len(match)) {
		t.Fatalf("seed %d: stock facet does not add up: %v", seed, r.GetFacets()[2])
	}
}

func ptr[T any](v T) *T { return &v }

// E78: the query's terms are marked in the text of each hit, as the
// analyzer found them (case kept, stop words not marked).
func TestSearchHighlightE78(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	mustIngest(t, e, mb("table:100", 1, lin.GetSchemaGenerationToken(),
		itemUpsert(1, 20, 1, "The Wireless speaker, wireless-ready", "a", 1, nil),
		itemUpsert(2, 21, 2, "cable", "a", 1, nil)))
	mustAdvance(t, e, "table:100", 1, 30)
	e.WaitIndexed()
	r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "the wireless"}, Highlight: &apiv1.HighlightRequest{}})
	if err != nil || len(r.GetHits()) != 1 {
		t.Fatalf("%v %v", r, err)
	}
	if got := r.GetHits()[0].GetHighlights()["title"]; got != "The <em>Wireless</em> speaker, <em>wireless</em>-ready" {
		t.Fatalf("highlight %q", got)
	}
	r, err = e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "speaker"}, Highlight: &apiv1.HighlightRequest{Fields: []string{"title"}, PreTag: "[", PostTag: "]"}})
	if err != nil || r.GetHits()[0].GetHighlights()["title"] != "The Wireless [speaker], wireless-ready" {
		t.Fatalf("custom tags: %v %v", r, err)
	}
}

// E73..E78: every option is validated against the serving definition; a
// bad one is INVALID_QUERY (gRPC InvalidArgument, HTTP 400) naming it.
func TestSearchOptionValidationE76(t *testing.T) {
	e := openMem(t, Options{})
	loadShop(t, e, shopDocs(1, 20))
	text := &apiv1.TextQuery{Query: "wireless"}
	vec := &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1}}
	stock := []*apiv1.Filter{{Field: "stock", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(0)}}
	cases := []struct {
		field string
		req   *apiv1.SearchRequest
	}{
		{"sort[0].field", &apiv1.SearchRequest{Text: text, Sort: []*apiv1.SortField{{Field: "nope"}}}},
		{"sort[0].field", &apiv1.SearchRequest{Text: text, Sort: []*apiv1.SortField{{Field: "title"}}}},
		{"sort[0].field", &apiv1.SearchRequest{Filters: stock, Sort: []*apiv1.SortField{{Field: ScoreSortField}}}},
		{"sort[1].field", &apiv1.SearchRequest{Text: text, Sort: []*apiv1.SortField{{Field: "price"}, {Field: "price"}}}},
		{"sort[0].field", &apiv1.SearchRequest{Text: text, Vector: vec, Sort: []*apiv1.SortField{{Field: "title"}}}},
		{"offset", &apiv1.SearchRequest{Text: text, Offset: -1}},
		{"offset", &apiv1.SearchRequest{Text: text, Offset: MaxSearchOffset + 1}},
		{"search_after", &apiv1.SearchRequest{Text: text, SearchAfter: []*apiv1.Value{val("1")}}},
		{"search_after[0]", &apiv1.SearchRequest{Text: text, SearchAfter: []*apiv1.Value{val("x"), val("1")}}},
		{"search_after[0]", &apiv1.SearchRequest{Filters: stock, Sort: []*apiv1.SortField{{Field: "price"}}, SearchAfter: []*apiv1.Value{val("x"), val("1")}}},
		{"search_after[1]", &apiv1.SearchRequest{Filters: stock, Sort: []*apiv1.SortField{{Field: "price"}}, SearchAfter: []*apiv1.Value{val(1.5), val(1)}}},
		{"search_after", &apiv1.SearchRequest{Text: text, Vector: vec, SearchAfter: []*apiv1.Value{val("1")}}},
		{"page_token", &apiv1.SearchRequest{Text: text, PageToken: "not a token"}},
		{"page_token", &apiv1.SearchRequest{Text: text, PageToken: "AAAA"}},
		{"page_token", &apiv1.SearchRequest{Text: text, PageToken: "x", SearchAfter: []*apiv1.Value{val(1.0), val("1")}}},
		{"facets[0].field", &apiv1.SearchRequest{Text: text, Facets: []*apiv1.FacetRequest{{Field: "nope"}}}},
		{"facets[0].field", &apiv1.SearchRequest{Text: text, Facets: []*apiv1.FacetRequest{{Field: "title"}}}},
		{"facets[0].size", &apiv1.SearchRequest{Text: text, Facets: []*apiv1.FacetRequest{{Field: "brand", Size: MaxFacetSize + 1}}}},
		{"facets[0].field", &apiv1.SearchRequest{Text: text, Facets: []*apiv1.FacetRequest{{Field: "brand", Ranges: []*apiv1.FacetRange{{To: ptr(1.0)}}}}}},
		{"facets[0].ranges[0]", &apiv1.SearchRequest{Text: text, Facets: []*apiv1.FacetRequest{{Field: "price", Ranges: []*apiv1.FacetRange{{From: ptr(2.0), To: ptr(1.0)}}}}}},
		{"highlight", &apiv1.SearchRequest{Filters: stock, Highlight: &apiv1.HighlightRequest{}}},
		{"highlight.fields[0]", &apiv1.SearchRequest{Text: text, Highlight: &apiv1.HighlightRequest{Fields: []string{"brand"}}}},
		{"text_weight", &apiv1.SearchRequest{Text: text, Vector: vec, Fusion: apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED, TextWeight: -1}},
		{"vector_weight", &apiv1.SearchRequest{Text: text, Vector: vec, VectorWeight: 0.5}},
	}
	for _, tc := range cases {
		tc.req.Collection = "shop"
		_, err := e.Search(bg, tc.req)
		requireReason(t, "E76", err, contract.ReasonInvalidQuery, tc.field)
	}
}

// E76: paging with search_after through 10k documents while updates run
// returns every matching document exactly once (the sort key, the primary
// key field, does not change).
func TestSearchAfterUnderUpdatesE76(t *testing.T) {
	seed := testSeed(t)
	n := 10000
	if testing.Short() {
		n = 3000
	}
	docs := shopDocs(seed, n)
	for i := range docs {
		docs[i].title = "item " + docs[i].title
	}
	e := openMem(t, Options{})
	lin := loadShop(t, e, docs)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	updates := 0
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(seed))
		seq, ts := uint64(n+1), uint64(n+100)
		for {
			select {
			case <-stop:
				return
			default:
			}
			b := &apiv1.MutationBatch{SourcePartition: "table:900", SourceEpoch: 1, FirstSeq: seq, SchemaGenerationToken: lin.GetSchemaGenerationToken()}
			for j := 0; j < 50; j++ {
				d := docs[rng.Intn(len(docs))]
				d.title = fmt.Sprintf("item updated %d", rng.Intn(100))
				p := float64(rng.Intn(100))
				d.price = &p
				b.Mutations = append(b.Mutations, &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(d.id), Fields: d.fields()})
				seq++
				ts++
			}
			if _, err := e.Ingest(bg, b); err != nil {
				t.Errorf("update: %v", err)
				return
			}
			updates++
		}
	}()
	req := &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "item"}, Sort: []*apiv1.SortField{{Field: "id"}}}
	got := allPages(t, e, req, 250)
	close(stop)
	wg.Wait()
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	for _, d := range docs {
		if seen[fmt.Sprint(d.id)] != 1 {
			t.Fatalf("seed %d: document %d returned %d times (%d updates ran)", seed, d.id, seen[fmt.Sprint(d.id)], updates)
		}
	}
	if len(got) != n {
		t.Fatalf("seed %d: %d keys for %d documents", seed, len(got), n)
	}
	t.Logf("seed %d: %d pages while %d update batches ran", seed, (n+249)/250, updates)
}

// fusionLeg is one leg of a hybrid search as its single-leg search ranks it.
type fusionLeg struct {
	pks    []string
	scores map[string]float64 // text: BM25; vector: distance
}

// E74: hybrid text+vector against a reference fused from the two legs as
// the single-leg searches rank them: reciprocal rank fusion (k = 60) and
// the weighted sum of min-max normalised scores (distance inverted; the
// weights default to 0.5 each), each over the first max(4 * (offset +
// limit), 50) hits of each leg, ties by primary key; filters apply to both
// legs and total is the union of the legs' matching sets.
func TestHybridFusionReferenceE74(t *testing.T) {
	seed := testSeed(t)
	docs := shopDocs(seed, 300)
	e := openMem(t, Options{})
	loadShop(t, e, docs)
	text := &apiv1.TextQuery{Query: "wireless speaker"}
	vec := &apiv1.VectorQuery{Field: "emb", Vector: []float32{2, 1}}
	inStock := []*apiv1.Filter{{Field: "stock", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(5)}}
	legOf := func(req *apiv1.SearchRequest, distance bool) fusionLeg {
		req.Collection, req.Limit, req.KeysOnly = "shop", MaxSearchLimit, true
		r, err := e.Search(bg, req)
		if err != nil {
			t.Fatal(err)
		}
		l := fusionLeg{scores: map[string]float64{}}
		for _, h := range r.GetHits() {
			l.pks = append(l.pks, h.GetPrimaryKey())
			if distance {
				l.scores[h.GetPrimaryKey()] = h.GetVectorDistance()
			} else {
				l.scores[h.GetPrimaryKey()] = h.GetTextScore()
			}
		}
		return l
	}
	norm := func(l fusionLeg, invert bool) map[string]float64 {
		out := map[string]float64{}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, pk := range l.pks {
			lo, hi = math.Min(lo, l.scores[pk]), math.Max(hi, l.scores[pk])
		}
		for _, pk := range l.pks {
			s := 1.0
			if hi > lo {
				s = (l.scores[pk] - lo) / (hi - lo)
				if invert {
					s = 1 - s
				}
			}
			out[pk] = s
		}
		return out
	}
	cases := []struct {
		name          string
		fusion        apiv1.HybridFusion
		tw, vw        float64 // as sent
		wantT, wantV  float64 // as applied
		limit, offset int
		filters       []*apiv1.Filter
	}{
		{"rrf", apiv1.HybridFusion_HYBRID_FUSION_UNSPECIFIED, 0, 0, 0, 0, 10, 0, nil},
		{"rrf deep", apiv1.HybridFusion_HYBRID_FUSION_RRF, 0, 0, 0, 0, 20, 15, nil},
		{"rrf filtered", apiv1.HybridFusion_HYBRID_FUSION_RRF, 0, 0, 0, 0, 30, 0, inStock},
		{"weighted default", apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED, 0, 0, 0.5, 0.5, 10, 0, nil},
		{"weighted text-heavy", apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED, 0.8, 0.2, 0.8, 0.2, 25, 5, nil},
		{"weighted vector only", apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED, 0, 1, 0, 1, 10, 0, inStock},
	}
	for _, tc := range cases {
		tl := legOf(&apiv1.SearchRequest{Text: text, Filters: tc.filters}, false)
		vl := legOf(&apiv1.SearchRequest{Vector: vec, Filters: tc.filters}, true)
		window := max(4*(tc.offset+tc.limit), 50)
		tw := fusionLeg{pks: tl.pks[:min(window, len(tl.pks))], scores: tl.scores}
		vw := fusionLeg{pks: vl.pks[:min(window, len(vl.pks))], scores: vl.scores}
		fused := map[string]float64{}
		if tc.fusion == apiv1.HybridFusion_HYBRID_FUSION_WEIGHTED {
			for pk, s := range norm(tw, false) {
				fused[pk] += tc.wantT * s
			}
			for pk, s := range norm(vw, true) {
				fused[pk] += tc.wantV * s
			}
		} else {
			for i, pk := range tw.pks {
				fused[pk] += 1 / float64(60+i+1)
			}
			for i, pk := range vw.pks {
				fused[pk] += 1 / float64(60+i+1)
			}
		}
		var want []string
		for pk := range fused {
			want = append(want, pk)
		}
		sort.Slice(want, func(i, j int) bool {
			if fused[want[i]] != fused[want[j]] {
				return fused[want[i]] > fused[want[j]]
			}
			return want[i] < want[j]
		})
		union := map[string]bool{}
		for _, pk := range append(append([]string(nil), tl.pks...), vl.pks...) {
			union[pk] = true
		}
		want = want[min(tc.offset, len(want)):min(tc.offset+tc.limit, len(want))]
		r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: text, Vector: vec, Filters: tc.filters, Fusion: tc.fusion,
			TextWeight: tc.tw, VectorWeight: tc.vw, Limit: uint32(tc.limit), Offset: int32(tc.offset), KeysOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// rule: E74 — the fused order and scores, and the union as total.
		if !eqKeys(hitKeys(r), want...) || r.GetTotal() != uint64(len(union)) {
			t.Fatalf("seed %d: %s: got %v (total %d)\nwant %v (total %d)", seed, tc.name, hitKeys(r), r.GetTotal(), want, len(union))
		}
		for _, h := range r.GetHits() {
			if d := math.Abs(h.GetScore() - fused[h.GetPrimaryKey()]); d > 1e-12 {
				t.Fatalf("seed %d: %s: key %s fused score %v, want %v", seed, tc.name, h.GetPrimaryKey(), h.GetScore(), fused[h.GetPrimaryKey()])
			}
		}
	}
}
