package emulator

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

func fuzzEmulator(t testing.TB) (*Emulator, string) {
	e, err := Open("", Options{MaxReadWait: 1})
	if err != nil {
		t.Fatal(err)
	}
	tok := mustCreate(t, e, itemsDef("items"), 10).GetSchemaGenerationToken()
	mustIngest(t, e, mb("table:100", 1, tok, itemUpsert(1, 20, 1, "red apple", "fruit", 1.5, []float32{1, 0, 0})))
	mustAdvance(t, e, "table:100", 1, 30)
	e.WaitIndexed() // so dumps compare settled watermarks
	return e, tok
}

// FuzzIngest: any batch is either admitted or rejected with a contract
// error; nothing panics, and a rejection changes nothing (E91).
func FuzzIngest(f *testing.F) {
	seed, _ := proto.Marshal(mb("table:100", 1, "tok", itemUpsert(2, 40, 2, "x", "y", 1, []float32{0, 1, 0})))
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &apiv1.MutationBatch{}
		if proto.Unmarshal(data, b) != nil {
			return
		}
		e, tok := fuzzEmulator(t)
		defer e.Close()
		if b.SchemaGenerationToken == "tok" {
			b.SchemaGenerationToken = tok
		}
		before := dump(t, e)
		if _, err := e.Ingest(bg, b); err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			if dump(t, e) != before {
				t.Fatal("rejected batch changed state")
			}
		}
		e.WaitIndexed()
	})
}

// FuzzSearch: any search request is answered or rejected with a contract
// error; nothing panics.
func FuzzSearch(f *testing.F) {
	seed, _ := proto.Marshal(&apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "apple"},
		Vector:  &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0, 0}},
		Filters: []*apiv1.Filter{{Field: "price", Op: apiv1.FilterOp_FILTER_OP_GT, Value: val(1.0)}}})
	f.Add(seed)
	e, _ := fuzzEmulator(f)
	f.Cleanup(func() { _ = e.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &apiv1.SearchRequest{}
		if proto.Unmarshal(data, r) != nil {
			return
		}
		r.MinTs = 0 // never wait
		if _, err := e.Search(bg, r); err != nil && ReasonOf(err) == "" {
			t.Fatalf("untyped error %v", err)
		}
	})
}
