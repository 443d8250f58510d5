package grpcapi

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// E75..E78 over gRPC: sort, highlights, search_after and facets; a bad
// option is InvalidArgument with the ContractError naming the field.
func TestSearchOptionsOverLoopback(t *testing.T) {
	_, conn := serve(t, Options{})
	ctx := context.Background()
	cr, err := apiv1.NewControlClient(conn).PutCollectionSchema(ctx, create())
	if err != nil {
		t.Fatal(err)
	}
	ing := apiv1.NewIngestClient(conn)
	if _, err := ing.Ingest(ctx, &apiv1.MutationBatch{SourcePartition: "table:7", SourceEpoch: 1, FirstSeq: 1, SchemaGenerationToken: cr.GetLineage().GetSchemaGenerationToken(),
		Mutations: []*apiv1.Mutation{upsert(1, 10, 1, "go programming"), upsert(2, 11, 2, "rust programming"), upsert(3, 12, 3, "gardening")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.AdvancePartition(ctx, &apiv1.PartitionProgress{SourcePartition: "table:7", SourceEpoch: 1, ResolvedTs: 20}); err != nil {
		t.Fatal(err)
	}
	qry := apiv1.NewQueryClient(conn)
	req := &apiv1.SearchRequest{Collection: "books", Text: &apiv1.TextQuery{Query: "programming"}, MinTs: 20, Limit: 1,
		Sort: []*apiv1.SortField{{Field: "id", Descending: true}}, Highlight: &apiv1.HighlightRequest{}}
	sr, err := qry.Search(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.GetHits()) != 1 || sr.GetHits()[0].GetPrimaryKey() != "2" || sr.GetTotal() != 2 ||
		sr.GetHits()[0].GetHighlights()["title"] != "rust <em>programming</em>" {
		t.Fatalf("first page: %v", sr)
	}
	req.SearchAfter = sr.GetHits()[0].GetSortValues()
	sr, err = qry.Search(ctx, req)
	if err != nil || len(sr.GetHits()) != 1 || sr.GetHits()[0].GetPrimaryKey() != "1" {
		t.Fatalf("second page: %v %v", sr, err)
	}
	_, err = qry.Search(ctx, &apiv1.SearchRequest{Collection: "books", Text: &apiv1.TextQuery{Query: "x"}, Facets: []*apiv1.FacetRequest{{Field: "title"}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("facet on a text field: %v", err)
	}
	for _, d := range status.Convert(err).Details() {
		if ce, ok := d.(*apiv1.ContractError); ok && ce.GetField() == "facets[0].field" {
			return
		}
	}
	t.Fatalf("no ContractError naming facets[0].field: %v", err)
}
