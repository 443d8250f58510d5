package emulator

import (
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// E51b: a search shows a document only from an acknowledged batch. A batch
// whose durable commit fails is refused, and neither its text nor its
// document ever shows, while the acknowledged one before it does.
func TestSearchShowsOnlyAcknowledgedBatchesE51b(t *testing.T) {
	e, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	lin := mustCreate(t, e, shopDef("shop", "table:901"), 10)
	doc := func(id int, title string) map[string]*apiv1.Value {
		return shopDoc{id: id, title: title}.fields()
	}
	mustIngest(t, e, &apiv1.MutationBatch{SourcePartition: "table:901", SourceEpoch: 1, FirstSeq: 1, SchemaGenerationToken: lin.GetSchemaGenerationToken(),
		Mutations: []*apiv1.Mutation{{Seq: 1, CommitTs: 20, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "1", Fields: doc(1, "acknowledged lamp")}}})
	// The store goes away under the emulator: the next commit fails.
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = e.Ingest(bg, &apiv1.MutationBatch{SourcePartition: "table:901", SourceEpoch: 1, FirstSeq: 2, SchemaGenerationToken: lin.GetSchemaGenerationToken(),
		Mutations: []*apiv1.Mutation{
			{Seq: 2, CommitTs: 21, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "2", Fields: doc(2, "unacknowledged zebra")},
			{Seq: 3, CommitTs: 22, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: "1", Fields: doc(1, "unacknowledged zebra lamp")},
		}})
	if err == nil {
		t.Fatal("a batch whose commit failed was acknowledged")
	}
	e.WaitIndexed()
	for _, q := range []string{"zebra", "unacknowledged"} {
		r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: q}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetHits()) != 0 || r.GetTotal() != 0 {
			t.Errorf("search %q shows an unacknowledged batch: %v", q, r.GetHits())
		}
	}
	r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "shop", Text: &apiv1.TextQuery{Query: "acknowledged"}})
	if err != nil || len(r.GetHits()) != 1 || r.GetHits()[0].GetFields()["title"].GetStringValue() != "acknowledged lamp" {
		t.Fatalf("the acknowledged document: %v %v", r, err)
	}
	if d, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "shop", PrimaryKey: "2"}); err != nil || d.GetFound() {
		t.Errorf("document of the refused batch: %v %v", d, err)
	}
}
