package emulator

import (
	"math/rand"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
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

// encoded turns positional rows into their E96 form: each row encoded by
// the docstore's value encoders (strings and JSON without a UTF-8 check,
// as a caller may send them).
func encoded(t testing.TB, rows *contract.Rows) *contract.Rows {
	out := &contract.Rows{Layout: rows.Layout, Enc: make([][]byte, len(rows.Vals))}
	for i, vals := range rows.Vals {
		if vals == nil {
			continue
		}
		row := []byte{}
		for _, v := range vals {
			switch k := v.GetKind().(type) {
			case nil:
				if v == nil {
					row = docstore.AppendAbsent(row)
					continue
				}
				row = append(row, docstore.KindUnset)
			case *apiv1.Value_StringValue:
				row = docstore.AppendString(row, k.StringValue)
			case *apiv1.Value_JsonValue:
				row = docstore.AppendJSON(row, k.JsonValue)
			default:
				var err error
				if row, err = docstore.AppendValue(row, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		out.Enc[i] = row
	}
	return out
}

// TestE44_IngestRowsEqualsIngest: random batches (upserts carrying a
// random subset of fields, nulls, deletes, stale redeliveries, on two
// partitions) go into one emulator in the canonical form and into another
// positionally (E44): every response, every observable state (documents
// with their fields, tombstones, progress), text and filtered searches and
// the state reloaded from disk are the same. A third emulator takes the
// same rows encoded (E96) and must match too.
func TestE44_IngestRowsEqualsIngest(t *testing.T) {
	seed := testSeed(t)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()
	open := func(dir string) *Emulator {
		e, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b, c := open(dirA), open(dirB), open(dirC)
	tokC := mustCreate(t, c, itemsDef("items", "table:100", "table:101"), 1).GetSchemaGenerationToken()
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
		pc, vrows := positional(mb(part, 1, tokC, muts...), layout)
		rc, errC := c.IngestRows(bg, pc, encoded(t, vrows))
		if (errA == nil) != (errC == nil) || !proto.Equal(ra, rc) {
			t.Fatalf("round %d: canonical %v %v, encoded (E96) %v %v", round, ra, errA, rc, errC)
		}
		next[part] += uint64(len(muts))
		if rng.Intn(4) == 0 {
			mustAdvance(t, a, part, 1, ts-1)
			mustAdvance(t, b, part, 1, ts-1)
			mustAdvance(t, c, part, 1, ts-1)
		}
	}
	for _, part := range []string{"table:100", "table:101"} {
		mustAdvance(t, a, part, 1, ts)
		mustAdvance(t, b, part, 1, ts)
		mustAdvance(t, c, part, 1, ts)
	}
	a.WaitIndexed() // text and vector apply asynchronously (E51)
	b.WaitIndexed()
	c.WaitIndexed()
	if da, db, dc := dump(t, a), dump(t, b), dump(t, c); da != db || da != dc {
		t.Fatalf("state differs:\ncanonical:\n%s\npositional:\n%s\nencoded:\n%s", da, db, dc)
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
		sc, errC := c.Search(bg, req)
		if errC != nil || !proto.Equal(sa, sc) {
			t.Fatalf("search %v: canonical %v %v\nencoded %v %v", req, sa, errA, sc, errC)
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
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	a, b, c = open(dirA), open(dirB), open(dirC)
	defer a.Close()
	defer b.Close()
	defer c.Close()
	a.WaitIndexed()
	b.WaitIndexed()
	c.WaitIndexed()
	if da, db, dc := dump(t, a), dump(t, b), dump(t, c); da != want || db != want || dc != want {
		t.Fatalf("reloaded state differs:\ncanonical:\n%s\npositional:\n%s\nencoded:\n%s", da, db, dc)
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
			pe, vrows := positional(mb("table:100", 1, tok, ok, bad), layout)
			_, errE := e.IngestRows(bg, pe, encoded(t, vrows))
			wantC := requireReason(t, "E36 canonical", errC, contract.ReasonOf(errC), "")
			requireReason(t, "E44 positional", errP, wantC.Reason, wantC.Field)
			requireReason(t, "E96 encoded", errE, wantC.Reason, wantC.Field)
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

// TestE96_EncodedRowsCheckedAndKept: rows sent encoded (E96) are checked
// before anything is applied: a malformed row (cut short, bytes after the
// last value, an unknown kind, a varint not in its shortest form, a bool
// byte other than 0 or 1, a length past the row) is INVALID_MUTATION at
// mutations[i].fields, rows in both forms are INVALID_BATCH, and a row
// that passes is kept byte for byte as the document's compact row, which
// is what its values encode to (E45).
func TestE96_EncodedRowsCheckedAndKept(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items"), 1).GetSchemaGenerationToken()
	layout := contract.NewLayout([]string{"id", "title", "tag", "price", "emb"})
	good := func() *apiv1.Mutation { return itemUpsert(1, 5, 7, "red kite", "toy", 2.5, nil) }
	for _, tc := range []struct {
		name string
		row  func(row []byte) []byte
	}{
		{"cut short", func(row []byte) []byte { return row[:len(row)-1] }},
		{"empty", func(row []byte) []byte { return nil }},
		{"bytes after the last value", func(row []byte) []byte { return append(row, docstore.KindNull) }},
		{"unknown kind", func(row []byte) []byte { return append([]byte{0x42}, row[2:]...) }},
		{"varint not shortest", func(row []byte) []byte { return append([]byte{docstore.KindInt64, 0x8e, 0x00}, row[2:]...) }},
		{"bool byte", func(row []byte) []byte { return append([]byte{docstore.KindBool, 2}, row[2:]...) }},
		{"length past the row", func(row []byte) []byte { return append(append([]byte{}, row[:2]...), docstore.KindString, 0x7f, 'a') }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pb, vrows := positional(mb("table:100", 1, tok, good()), layout)
			rows := encoded(t, vrows)
			if rows.Enc[0][0] != docstore.KindInt64 || rows.Enc[0][1] != 14 {
				t.Fatalf("row starts % x, want the id 7 as a one-byte varint", rows.Enc[0][:2])
			}
			rows.Enc[0] = tc.row(rows.Enc[0])
			_, err := e.IngestRows(bg, pb, rows)
			requireReason(t, "E96 "+tc.name, err, contract.ReasonInvalidMutation, "mutations[0].fields")
		})
	}
	pb, vrows := positional(mb("table:100", 1, tok, good()), layout)
	both := encoded(t, vrows)
	both.Vals = vrows.Vals
	_, err := e.IngestRows(bg, pb, both)
	requireReason(t, "E96 both forms", err, contract.ReasonInvalidBatch, "mutations")
	if e.colls["items"].docs.Live() != 0 {
		t.Fatalf("a refused batch changed state: %d documents", e.colls["items"].docs.Live())
	}
	pb, vrows = positional(mb("table:100", 1, tok, good()), layout)
	rows := encoded(t, vrows)
	if _, err := e.IngestRows(bg, pb, rows); err != nil {
		t.Fatal(err)
	}
	want, err := docstore.EncodeRow(nil, vrows.Vals[0])
	if err != nil {
		t.Fatal(err)
	}
	ent, ok := e.colls["items"].docs.Get("7")
	if !ok || string(ent.Row) != string(want) || &ent.Row[0] != &rows.Enc[0][0] || ent.Layout != layout {
		t.Fatalf("stored row % x (kept: %v), want the caller's % x", ent.Row, ok && &ent.Row[0] == &rows.Enc[0][0], want)
	}
}
