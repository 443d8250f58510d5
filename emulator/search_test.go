package emulator

import (
	"fmt"
	"math/rand"
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
		itemUpsert(4, 33, 4, "red apple pie with apple", "food", 4.0, []float32{0.9, 0.1, 0}),
		del(5, 34, 2),
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

// metadata_aux narrowing returns exactly what a full document scan returns
// (E74), for random keyword and numeric filters, including large integers
// that float64 cannot represent exactly.
func TestAuxIndexMatchesScan(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	e, ta, tb := newAuxScanPair(t,
		&apiv1.Field{Name: "k", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_KEYWORD},
		&apiv1.Field{Name: "n", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
	)
	big := int64(1) << 60
	nums := []int64{-5, 0, 3, 7, big, big + 1, big + 2}
	var seq uint64
	for i := 0; i < 300; i++ {
		seq++
		id := rng.Intn(80)
		var m *apiv1.Mutation
		if rng.Intn(5) == 0 {
			m = del(seq, uint64(10+i), id)
		} else {
			f := map[string]*apiv1.Value{"id": val(id), "k": val(fmt.Sprint("k", rng.Intn(4)))}
			if rng.Intn(6) != 0 {
				f["n"] = val(nums[rng.Intn(len(nums))])
			}
			m = &apiv1.Mutation{Seq: seq, CommitTs: uint64(10 + i), Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id), Fields: f}
		}
		mustIngest(t, e, mb("table:1", 1, ta, m))
		mustIngest(t, e, mb("table:2", 1, tb, m))
	}
	ops := []apiv1.FilterOp{apiv1.FilterOp_FILTER_OP_EQ, apiv1.FilterOp_FILTER_OP_LT, apiv1.FilterOp_FILTER_OP_LTE, apiv1.FilterOp_FILTER_OP_GT, apiv1.FilterOp_FILTER_OP_GTE}
	for q := 0; q < 200; q++ {
		var f *apiv1.Filter
		if rng.Intn(2) == 0 {
			f = &apiv1.Filter{Field: "k", Op: apiv1.FilterOp_FILTER_OP_IN, Values: []*apiv1.Value{val(fmt.Sprint("k", rng.Intn(5))), val(fmt.Sprint("k", rng.Intn(5)))}}
		} else {
			arg := val(nums[rng.Intn(len(nums))])
			if rng.Intn(3) == 0 {
				arg = val(float64(nums[rng.Intn(len(nums))]) + 0.5)
			}
			f = &apiv1.Filter{Field: "n", Op: ops[rng.Intn(len(ops))], Value: arg}
		}
		ra, rb := searchAuxAndScan(t, e, f, 1000)
		if !eqKeys(hitKeys(ra), hitKeys(rb)...) || ra.GetTotal() != rb.GetTotal() {
			t.Fatalf("filter %v: aux %v vs scan %v", f, hitKeys(ra), hitKeys(rb))
		}
	}
}

// E51a: a zero vector under cosine is stored and readable but not a
// neighbour; the vector modality keeps advancing.
func TestZeroVectorE51a(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items"), 10).GetSchemaGenerationToken()
	mustIngest(t, e, mb("table:100", 1, tok,
		itemUpsert(1, 20, 1, "zero", "z", 0, []float32{0, 0, 0}),
		itemUpsert(2, 21, 2, "unit", "u", 0, []float32{0, 1, 0})))
	mustAdvance(t, e, "table:100", 1, 30)
	e.WaitIndexed()
	if st := status(t, e, "items"); st.GetSafeTs() != 30 {
		t.Fatalf("safe_ts %d: vector modality stalled", st.GetSafeTs())
	}
	r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{0, 1, 0}}})
	if err != nil || !eqKeys(hitKeys(r), "2") {
		t.Fatalf("vector hits %v %v", r, err)
	}
	if g, _ := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "items", PrimaryKey: "1"}); !g.GetFound() {
		t.Fatal("zero-vector document not stored")
	}
}

// E2: the document modality's scan: filters, key order, pagination.
func TestScanE2(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	var muts []*apiv1.Mutation
	for i := 1; i <= 12; i++ {
		muts = append(muts, docUpsert(uint64(i), 20, i, fmt.Sprint("b", i)))
	}
	mustIngest(t, e, mb("table:200", 1, tok, muts...))
	f := []*apiv1.Filter{{Field: "n", Op: apiv1.FilterOp_FILTER_OP_GTE, Value: val(5)}}
	page1, _, err := e.Scan(bg, "docs", f, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range page1 {
		keys = append(keys, d.GetPrimaryKey())
	}
	// Keys sort as strings: 1,10,11,12,2,...; n = id % 10 >= 5 -> 5..9.
	if !eqKeys(keys, "5", "6", "7") {
		t.Fatalf("page1 %v", keys)
	}
	page2, _, _ := e.Scan(bg, "docs", f, "7", 10)
	if len(page2) != 2 || page2[0].GetPrimaryKey() != "8" || page2[1].GetPrimaryKey() != "9" {
		t.Fatalf("page2 %v", page2)
	}
	if _, _, err := e.Scan(bg, "nope", nil, "", 1); ReasonOf(err) != "COLLECTION_NOT_FOUND" {
		t.Fatalf("unknown collection: %v", err)
	}
	if _, _, err := e.Scan(bg, "docs", []*apiv1.Filter{{Field: "zz", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val(1)}}, "", 1); ReasonOf(err) != "INVALID_QUERY" {
		t.Fatalf("bad filter: %v", err)
	}
}

// E95: metadata_aux numeric columns keep nothing per row on ingest (a
// write marks them stale) and a range search after any write narrows to
// exactly what a scan of the documents finds (writes, updates and deletes
// interleaved with searches).
func TestE95_AuxNumericColumnFollowsWrites(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	e, ta, tb := newAuxScanPair(t,
		&apiv1.Field{Name: "n", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
		&apiv1.Field{Name: "f", Type: apiv1.FieldType_FIELD_TYPE_FLOAT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
	)
	column := func(field string) (int, bool) {
		e.mu.RLock()
		defer e.mu.RUnlock()
		col := e.colls["aux"].aux.numeric[field]
		col.mu.Lock()
		defer col.mu.Unlock()
		return len(col.sorted), col.dirty || len(col.changed) > 0
	}
	ops := []apiv1.FilterOp{apiv1.FilterOp_FILTER_OP_EQ, apiv1.FilterOp_FILTER_OP_LT, apiv1.FilterOp_FILTER_OP_LTE, apiv1.FilterOp_FILTER_OP_GT, apiv1.FilterOp_FILTER_OP_GTE}
	var seq uint64
	searched := false
	for i := 0; i < 600; i++ {
		seq++
		id := rng.Intn(60)
		var m *apiv1.Mutation
		if rng.Intn(5) == 0 {
			m = del(seq, uint64(10+i), id)
		} else {
			f := map[string]*apiv1.Value{"id": val(id)}
			if rng.Intn(6) != 0 {
				f["n"] = val(int64(rng.Intn(20) - 5))
			}
			if rng.Intn(4) != 0 {
				f["f"] = val(float64(rng.Intn(40)) / 4)
			}
			m = &apiv1.Mutation{Seq: seq, CommitTs: uint64(10 + i), Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id), Fields: f}
		}
		mustIngest(t, e, mb("table:1", 1, ta, m))
		mustIngest(t, e, mb("table:2", 1, tb, m))
		// rule: E95 — ingest keeps no value per row: before any range
		// search the column is empty, and every write leaves it stale
		// (dirty, or the written key recorded: E97).
		if n, dirty := column("n"); !dirty || (!searched && n != 0) {
			t.Fatalf("E95: after write %d the column holds %d entries (stale %v, searched %v)", i, n, dirty, searched)
		}
		if i < 20 || rng.Intn(4) != 0 {
			continue
		}
		for q := 0; q < 3; q++ {
			field := []string{"n", "f"}[rng.Intn(2)]
			var arg *apiv1.Value
			if field == "n" {
				arg = val(int64(rng.Intn(24) - 7))
			} else {
				arg = val(float64(rng.Intn(44))/4 - 0.5)
			}
			f := &apiv1.Filter{Field: field, Op: ops[rng.Intn(len(ops))], Value: arg}
			ra, rb := searchAuxAndScan(t, e, f, 1000)
			// rule: E95 — a range search after writes finds what a scan finds.
			if !eqKeys(hitKeys(ra), hitKeys(rb)...) || ra.GetTotal() != rb.GetTotal() {
				t.Fatalf("seed %d: after write %d, filter %v: aux %v vs scan %v", seed, i, f, hitKeys(ra), hitKeys(rb))
			}
			if _, dirty := column(field); dirty {
				t.Fatalf("E95: column %s still stale after a range search", field)
			}
			searched = true
		}
	}
}

// E97: once a range search built a numeric column, later writes record
// only their keys and the next range search merges those keys' current
// values instead of re-reading and sorting every document; a write of
// more keys than a quarter of the column sends it back to a whole
// rebuild. Answers equal a scan's throughout.
func TestE97_RangeSearchMergesWrittenKeys(t *testing.T) {
	e, ta, tb := newAuxScanPair(t,
		&apiv1.Field{Name: "n", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
	)
	var seq, ts uint64 = 0, 10
	write := func(muts func(seq, ts uint64) []*apiv1.Mutation) {
		ts++
		ms := muts(0, ts)
		for _, m := range ms {
			seq++
			m.Seq = seq
		}
		mustIngest(t, e, mb("table:1", 1, ta, ms...))
		mustIngest(t, e, mb("table:2", 1, tb, ms...))
	}
	upsert := func(seq, ts uint64, id int, n int64) *apiv1.Mutation {
		return &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: fmt.Sprint(id),
			Fields: map[string]*apiv1.Value{"id": val(id), "n": val(n)}}
	}
	const docs = 6000
	write(func(seq, ts uint64) []*apiv1.Mutation {
		var ms []*apiv1.Mutation
		for id := 0; id < docs; id++ {
			ms = append(ms, upsert(seq, ts, id, int64(id%100)))
		}
		return ms
	})
	rebuilds := func() int {
		e.mu.RLock()
		defer e.mu.RUnlock()
		col := e.colls["aux"].aux.numeric["n"]
		col.mu.Lock()
		defer col.mu.Unlock()
		return col.rebuilds
	}
	check := func(step string, op apiv1.FilterOp, x int64) {
		t.Helper()
		f := &apiv1.Filter{Field: "n", Op: op, Value: val(x)}
		ra, rb := searchAuxAndScan(t, e, f, 10000)
		if !eqKeys(hitKeys(ra), hitKeys(rb)...) || ra.GetTotal() != rb.GetTotal() {
			t.Fatalf("E97 %s: filter %v: aux %d hits vs scan %d", step, f, len(hitKeys(ra)), len(hitKeys(rb)))
		}
	}
	check("first search", apiv1.FilterOp_FILTER_OP_LT, 10)
	if got := rebuilds(); got != 1 {
		t.Fatalf("E97: %d rebuilds after the first range search, want 1", got)
	}
	for i := 0; i < 30; i++ {
		id := (i * 197) % docs
		switch i % 3 {
		case 0: // an update moves a document across the range
			write(func(seq, ts uint64) []*apiv1.Mutation { return []*apiv1.Mutation{upsert(seq, ts, id, int64(-i))} })
		case 1: // a delete
			write(func(seq, ts uint64) []*apiv1.Mutation { return []*apiv1.Mutation{del(seq, ts, id)} })
		default: // a new document and an update
			write(func(seq, ts uint64) []*apiv1.Mutation {
				return []*apiv1.Mutation{upsert(seq, ts, docs+i, 5), upsert(seq, ts, id, 95)}
			})
		}
		check(fmt.Sprintf("after write %d", i), []apiv1.FilterOp{apiv1.FilterOp_FILTER_OP_LT, apiv1.FilterOp_FILTER_OP_GTE, apiv1.FilterOp_FILTER_OP_EQ}[i%3], int64(i%12))
	}
	if got := rebuilds(); got != 1 {
		t.Fatalf("E97: %d rebuilds after 30 small writes, want 1 (the written keys merged)", got)
	}
	// More keys than a quarter of the column (+1024): a whole rebuild.
	write(func(seq, ts uint64) []*apiv1.Mutation {
		var ms []*apiv1.Mutation
		for id := 0; id < docs/4+1100; id++ {
			ms = append(ms, upsert(seq, ts, id, int64(id%7)))
		}
		return ms
	})
	check("after a large write", apiv1.FilterOp_FILTER_OP_LTE, 3)
	if got := rebuilds(); got != 2 {
		t.Fatalf("E97: %d rebuilds after a write of a third of the keys, want 2", got)
	}
}

// newAuxScanPair creates two collections of the same fields (id, the
// primary key, then fields): "aux" on table:1 with metadata_aux and
// "scan" on table:2 without, so every filtered search of the first can
// be checked against a scan of the second. It returns their tokens.
func newAuxScanPair(t *testing.T, fields ...*apiv1.Field) (e *Emulator, auxToken, scanToken string) {
	t.Helper()
	mk := func(name, part string, aux bool) *apiv1.CollectionDefinition {
		return &apiv1.CollectionDefinition{
			Name:       name,
			Fields:     append([]*apiv1.Field{{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY}}, fields...),
			PrimaryKey: []string{"id"}, SourcePartitions: []string{part}, MetadataAux: aux,
		}
	}
	e = openMem(t, Options{})
	auxToken = mustCreate(t, e, mk("aux", "table:1", true), 1).GetSchemaGenerationToken()
	scanToken = mustCreate(t, e, mk("scan", "table:2", false), 1).GetSchemaGenerationToken()
	return e, auxToken, scanToken
}

// searchAuxAndScan runs one keys-only filtered search on both collections
// of an aux/scan pair.
func searchAuxAndScan(t *testing.T, e *Emulator, f *apiv1.Filter, limit uint32) (aux, scan *apiv1.SearchResponse) {
	t.Helper()
	search := func(collection string) *apiv1.SearchResponse {
		r, err := e.Search(bg, &apiv1.SearchRequest{Collection: collection, Filters: []*apiv1.Filter{f}, Limit: limit, KeysOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return search("aux"), search("scan")
}
