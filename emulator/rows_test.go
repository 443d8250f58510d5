package emulator

import (
	"math/rand"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// positional turns a canonical batch into its E44 form over layout: the
// mutations without fields maps, their values by position.
func positional(b *apiv1.MutationBatch, layout *contract.Layout) (*apiv1.MutationBatch, *contract.Rows) {
	out := proto.Clone(b).(*apiv1.MutationBatch)
	rows := &contract.Rows{Layout: layout}
	for i, m := range out.GetMutations() {
		var vals []*apiv1.Value
		if m.GetKind() != apiv1.MutationKind_MUTATION_KIND_DELETE {
			vals = make([]*apiv1.Value, len(layout.Names))
			for name, v := range b.GetMutations()[i].GetFields() {
				if j := layout.Index(name); j >= 0 {
					vals[j] = v
				}
			}
		}
		m.Fields = nil
		rows.Vals = append(rows.Vals, vals)
	}
	return out, rows
}

// TestE44_IngestRowsEqualsIngest: random batches (upserts carrying a
// random subset of fields, nulls, deletes, stale redeliveries, on two
// partitions) go into one emulator in the canonical form and into another
// positionally (E44): every response, every observable state (documents
// with their fields, tombstones, progress), text and filtered searches and
// the state reloaded from disk are the same.
func TestE44_IngestRowsEqualsIngest(t *testing.T) {
	seed := testSeed(t)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dirA, dirB := t.TempDir(), t.TempDir()
	open := func(dir string) *Emulator {
		e, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := open(dirA), open(dirB)
	tokA := mustCreate(t, a, itemsDef("items", "table:100", "table:101"), 1).GetSchemaGenerationToken()
	tokB := mustCreate(t, b, itemsDef("items", "table:100", "table:101"), 1).GetSchemaGenerationToken()
	// A layout in another order than the definition's, with a field the
	// rows never carry values for.
	layout := contract.NewLayout([]string{"emb", "price", "id", "tag", "title"})
	words := []string{"red", "apple", "blue", "kite", "green", "tea"}
	next := map[string]uint64{"table:100": 1, "table:101": 1}
	ts := uint64(10)
	for round := 0; round < 60; round++ {
		part := []string{"table:100", "table:101"}[rng.Intn(2)]
		var muts []*apiv1.Mutation
		for n := 1 + rng.Intn(12); n > 0; n-- {
			seq := next[part] + uint64(len(muts))
			id := rng.Intn(40)
			mts := ts
			if rng.Intn(8) == 0 {
				mts = ts - uint64(1+rng.Intn(5)) // stale or equal-version redelivery
			}
			if rng.Intn(5) == 0 {
				muts = append(muts, del(seq, mts, id))
				continue
			}
			m := itemUpsert(seq, mts, id, words[rng.Intn(len(words))]+" "+words[rng.Intn(len(words))], words[rng.Intn(3)], float64(rng.Intn(100))/4, nil)
			switch rng.Intn(4) {
			case 0:
				delete(m.Fields, "tag") // absent
			case 1:
				m.Fields["price"] = val(nil) // null
			case 2:
				m.Fields["emb"] = val([]float32{float32(rng.Intn(5) + 1), 1, float32(rng.Intn(3))})
			}
			muts = append(muts, m)
		}
		ts++
		ca := mb(part, 1, tokA, muts...)
		pb, rows := positional(mb(part, 1, tokB, muts...), layout)
		ra, errA := a.Ingest(bg, ca)
		rb, errB := b.IngestRows(bg, pb, rows)
		if (errA == nil) != (errB == nil) || !proto.Equal(ra, rb) {
			t.Fatalf("round %d: canonical %v %v, positional %v %v", round, ra, errA, rb, errB)
		}
		next[part] += uint64(len(muts))
		if rng.Intn(4) == 0 {
			mustAdvance(t, a, part, 1, ts-1)
			mustAdvance(t, b, part, 1, ts-1)
		}
	}
	for _, part := range []string{"table:100", "table:101"} {
		mustAdvance(t, a, part, 1, ts)
		mustAdvance(t, b, part, 1, ts)
	}
	a.WaitIndexed() // text and vector apply asynchronously (E51)
	b.WaitIndexed()
	if da, db := dump(t, a), dump(t, b); da != db {
		t.Fatalf("state differs:\ncanonical:\n%s\npositional:\n%s", da, db)
	}
	for _, req := range []*apiv1.SearchRequest{
		{Collection: "items", Text: &apiv1.TextQuery{Query: "apple"}, MinTs: ts, Limit: 100},
		{Collection: "items", Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val("blue")}}, Limit: 100},
		{Collection: "items", Filters: []*apiv1.Filter{{Field: "price", Op: apiv1.FilterOp_FILTER_OP_IS_NULL}}, Limit: 100},
	} {
		sa, errA := a.Search(bg, req)
		sb, errB := b.Search(bg, req)
		if errA != nil || errB != nil || !proto.Equal(sa, sb) {
			t.Fatalf("search %v: canonical %v %v\npositional %v %v", req, sa, errA, sb, errB)
		}
	}
	// On disk: the positional rows were stored as the canonical ones.
	want := dump(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	a, b = open(dirA), open(dirB)
	defer a.Close()
	defer b.Close()
	a.WaitIndexed()
	b.WaitIndexed()
	if da, db := dump(t, a), dump(t, b); da != want || db != want {
		t.Fatalf("reloaded state differs:\ncanonical:\n%s\npositional:\n%s", da, db)
	}
}

// TestE44_IngestRowsRejectsAsIngest: a positional row breaking E36/E42
// gets the reason and field path the canonical batch gets; a positional
// batch whose mutations still carry fields maps, or whose rows do not
// match its mutations, is refused, and nothing is applied.
func TestE44_IngestRowsRejectsAsIngest(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items"), 1).GetSchemaGenerationToken()
	layout := contract.NewLayout([]string{"id", "title", "tag", "price", "emb", "nope"})
	good := func() *apiv1.Mutation { return itemUpsert(1, 5, 7, "red kite", "toy", 2.5, nil) }
	for _, tc := range []struct {
		name   string
		mutate func(m *apiv1.Mutation)
	}{
		{"unknown field", func(m *apiv1.Mutation) { m.Fields["nope"] = val(1) }},
		{"type mismatch", func(m *apiv1.Mutation) { m.Fields["price"] = val("cheap") }},
		{"vector dimension", func(m *apiv1.Mutation) { m.Fields["emb"] = val([]float32{1}) }},
		{"null key", func(m *apiv1.Mutation) { m.Fields["id"] = val(nil) }},
		{"absent key", func(m *apiv1.Mutation) { delete(m.Fields, "id") }},
		{"key mismatch", func(m *apiv1.Mutation) { m.PrimaryKey = "8" }},
		{"invalid UTF-8", func(m *apiv1.Mutation) { m.Fields["title"] = val("\xff") }},
		{"no commit ts", func(m *apiv1.Mutation) { m.CommitTs = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := good()
			bad := good()
			tc.mutate(bad)
			bad.Seq = 2
			_, errC := e.Ingest(bg, mb("table:100", 1, tok, ok, bad))
			pb, rows := positional(mb("table:100", 1, tok, ok, bad), layout)
			_, errP := e.IngestRows(bg, pb, rows)
			wantC := requireReason(t, "E36 canonical", errC, contract.ReasonOf(errC), "")
			requireReason(t, "E44 positional", errP, wantC.Reason, wantC.Field)
		})
	}
	pb, rows := positional(mb("table:100", 1, tok, good()), layout)
	pb.GetMutations()[0].Fields = good().GetFields()
	_, err := e.IngestRows(bg, pb, rows)
	requireReason(t, "E44 fields map and rows", err, contract.ReasonInvalidMutation, "mutations[0].fields")
	pb, rows = positional(mb("table:100", 1, tok, good()), layout)
	rows.Vals = append(rows.Vals, nil)
	_, err = e.IngestRows(bg, pb, rows)
	requireReason(t, "E44 rows count", err, contract.ReasonInvalidBatch, "mutations")
	pb, rows = positional(mb("table:100", 1, tok, good()), layout)
	rows.Vals[0] = rows.Vals[0][:2]
	_, err = e.IngestRows(bg, pb, rows)
	requireReason(t, "E44 row width", err, contract.ReasonInvalidMutation, "mutations[0].fields")
	if e.colls["items"].docs.Live() != 0 {
		t.Fatalf("a refused batch changed state: %d documents", e.colls["items"].docs.Live())
	}
}

// TestE44_SameFieldsOnRead: a positional document reads back (GetDocument,
// Scan, search hits) with the fields map of the canonical one, and the
// fields a row did not carry are absent, not null.
func TestE44_SameFieldsOnRead(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items"), 1).GetSchemaGenerationToken()
	layout := contract.NewLayout([]string{"id", "title", "tag", "price", "emb"})
	m := itemUpsert(1, 5, 7, "red kite", "toy", 2.5, nil)
	pb, rows := positional(mb("table:100", 1, tok, m), layout)
	if _, err := e.IngestRows(bg, pb, rows); err != nil {
		t.Fatal(err)
	}
	mustAdvance(t, e, "table:100", 1, 5)
	got, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "items", PrimaryKey: "7"})
	if err != nil || !got.GetFound() {
		t.Fatalf("get: %v %v", got, err)
	}
	want := &apiv1.Document{PrimaryKey: "7", Fields: m.GetFields(), CommitTs: 5, SourcePartition: "table:100"}
	if !proto.Equal(got.GetDocument(), want) {
		t.Fatalf("GetDocument: %v, want %v", got.GetDocument(), want)
	}
	if _, has := got.GetDocument().GetFields()["emb"]; has {
		t.Fatal("a field the row did not carry reads as present")
	}
	docs, _, err := e.Scan(bg, "items", nil, "", 10)
	if err != nil || len(docs) != 1 || !proto.Equal(docs[0], want) {
		t.Fatalf("Scan: %v %v", docs, err)
	}
	r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "kite"}, MinTs: 5})
	if err != nil || len(r.GetHits()) != 1 || !proto.Equal(&apiv1.Document{PrimaryKey: "7", Fields: r.GetHits()[0].GetFields(), CommitTs: 5, SourcePartition: "table:100"}, want) {
		t.Fatalf("Search: %v %v", r, err)
	}
}
