package emulator

import (
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// E60, E61, E22, E54: close and reopen mid-stream; the state is identical,
// indexes answer as before, idempotency and stream positions survive.
//
// Rule VEC-P1: the vector index is rebuilt from the document store on start.
func TestRestartRestoresEverythingE60E61(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	createItems := createReq(itemsDef("items"), 10)
	r0, err := e.PutCollectionSchema(bg, createItems)
	if err != nil {
		t.Fatal(err)
	}
	lin := r0.GetLineage()
	seedItems(t, e, lin.GetSchemaGenerationToken())
	dlin := mustCreate(t, e, docDef("docs"), 10)
	mustIngest(t, e, mb("table:200", 1, dlin.GetSchemaGenerationToken(), docUpsert(1, 20, 1, "x"), del(2, 21, 1), docUpsert(3, 22, 2, "y")))
	mustAdvance(t, e, "table:200", 1, 25)
	glin := mustCreate(t, e, docDef("gone", "table:300"), 10)
	dr := changeReq(docDef("gone", "table:300"), glin, 30, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP)
	if _, err := e.PutCollectionSchema(bg, dr); err != nil {
		t.Fatal(err)
	}
	e.WaitIndexed()
	before := dump(t, e)
	searchBefore, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "apple pear"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ingest(bg, mb("table:200", 1, dlin.GetSchemaGenerationToken(), docUpsert(4, 30, 9, "z"))); ReasonOf(err) != "CLOSED" {
		t.Fatalf("write after close: %v", err)
	}

	e2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if after := dump(t, e2); after != before {
		t.Fatalf("state after restart differs:\n--- before\n%s\n--- after\n%s", before, after)
	}
	searchAfter, err := e2.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "apple pear"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if !eqKeys(hitKeys(searchAfter), hitKeys(searchBefore)...) || searchAfter.GetReadTs() != searchBefore.GetReadTs() {
		t.Fatalf("E61: search differs after restart: %v vs %v", searchAfter, searchBefore)
	}
	// E22 survives restart.
	again, err := e2.PutCollectionSchema(bg, createItems)
	if err != nil || !again.GetReplayed() {
		t.Fatalf("idempotent replay after restart: %v %v", again, err)
	}
	// E34/E54: the stream continues where it was; replays are no-ops; the
	// tombstone still guards.
	r := mustIngest(t, e2, mb("table:200", 1, dlin.GetSchemaGenerationToken(), docUpsert(1, 20, 1, "x")))
	if r.GetOutcome() != apiv1.IngestOutcome_INGEST_OUTCOME_REPLAY_NOOP {
		t.Fatalf("replay after restart: %v", r)
	}
	r = mustIngest(t, e2, mb("table:200", 2, dlin.GetSchemaGenerationToken(), docUpsert(1, 20, 1, "x")))
	if r.GetStaleMutations() != 1 {
		t.Fatalf("tombstone lost on restart: %v", r)
	}
	// The re-created name keeps counting generations.
	lin2 := mustCreate(t, e2, docDef("gone", "table:300"), 40)
	if lin2.GetGeneration() != 3 {
		t.Fatalf("generation counter lost: %v", lin2)
	}
}
