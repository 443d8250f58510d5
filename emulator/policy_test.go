package emulator

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

func status(t *testing.T, e *Emulator, name string) *apiv1.CollectionStatus {
	t.Helper()
	st, err := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func seedItems(t *testing.T, e *Emulator, tok string) {
	t.Helper()
	mustIngest(t, e, mb("table:100", 1, tok,
		itemUpsert(1, 20, 1, "red apple", "fruit", 1.5, []float32{1, 0, 0}),
		itemUpsert(2, 21, 2, "green pear", "fruit", 2.5, []float32{0, 1, 0}),
		itemUpsert(3, 22, 3, "blue car", "toy", 9.0, []float32{0, 0, 1}),
	))
	mustAdvance(t, e, "table:100", 1, 30)
	e.WaitIndexed()
}

// E26, E27, E28 (ADDITIVE), E35: documents kept, new token required.
func TestAdditiveKeepsDocumentsE28(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	e.mu.RLock()
	textWBefore := e.colls["items"].textW
	e.mu.RUnlock()
	def := itemsDef("items")
	def.Fields = append(def.Fields, &apiv1.Field{Name: "color", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY})
	resp, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDocumentsKept() != 3 || resp.GetLineage().GetSchemaGenerationToken() == lin.GetSchemaGenerationToken() {
		t.Fatalf("E26/E28: %v", resp)
	}
	st := status(t, e, "items")
	if st.GetDocCount() != 3 || st.GetSafeTs() != 30 {
		t.Fatalf("E28/E53: additive change lost documents or watermark: %v", st)
	}
	_, err = e.Ingest(bg, mb("table:100", 1, lin.GetSchemaGenerationToken(), itemUpsert(4, 50, 4, "x", "y", 1, nil)))
	requireReason(t, "E35", err, contract.ReasonStaleGeneration, "schema_generation_token")
	m := itemUpsert(4, 50, 4, "x", "y", 1, nil)
	m.Fields["color"] = val("red")
	mustIngest(t, e, mb("table:100", 1, resp.GetLineage().GetSchemaGenerationToken(), m))
	// E51a: the text index survived (reused, same worker) and still finds old docs.
	e.mu.RLock()
	reused := e.colls["items"].textW == textWBefore
	e.mu.RUnlock()
	if !reused {
		t.Fatal("E51a: ADDITIVE change with unchanged text fields rebuilt the text index")
	}
	sr, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "apple"}})
	if err != nil || len(sr.GetHits()) != 1 || sr.GetHits()[0].GetPrimaryKey() != "1" {
		t.Fatalf("search after additive: %v %v", sr, err)
	}
	// E27: ADDITIVE for a removal is too weak.
	lin2 := resp.GetLineage()
	def3 := proto.Clone(def).(*apiv1.CollectionDefinition)
	def3.Fields = def3.Fields[:len(def3.Fields)-1]
	_, err = e.PutCollectionSchema(bg, changeReq(def3, lin2, 60, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE))
	ce := requireReason(t, "E27", err, contract.ReasonPolicyTooWeak, "update_policy")
	if ce.Expected != "SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE" {
		t.Fatalf("E27 expected: %+v", ce)
	}
	// E24: a stale fence.
	_, err = e.PutCollectionSchema(bg, changeReq(def, lin, 70, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE))
	requireReason(t, "E24", err, contract.ReasonFenceMismatch, "fence.expected_prev_schema_version")
}

// E28 (REBUILD_IN_PLACE): removed fields dropped, re-typed values nulled,
// documents of removed partitions deleted, indexes rebuilt.
func TestRebuildInPlaceE28(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items", "table:100", "table:101"), 10)
	tok := lin.GetSchemaGenerationToken()
	seedItems(t, e, tok)
	mustIngest(t, e, mb("table:101", 1, tok, itemUpsert(1, 25, 9, "red kite", "toy", 3, []float32{1, 1, 0})))
	mustAdvance(t, e, "table:101", 1, 30)
	def := itemsDef("items", "table:100") // table:101 removed
	def.Fields = def.Fields[:4]           // emb removed -> vector modality gone
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT
	resp, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDocumentsKept() != 3 || resp.GetDocumentsRemoved() != 1 {
		t.Fatalf("kept/removed %v", resp)
	}
	g, _ := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "items", PrimaryKey: "1"})
	f := g.GetDocument().GetFields()
	if _, has := f["emb"]; has {
		t.Fatal("removed field kept")
	}
	if _, isNull := f["price"].GetKind().(*apiv1.Value_NullValue); !isNull {
		t.Fatalf("re-typed value not nulled: %v", f["price"])
	}
	if g, _ := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "items", PrimaryKey: "9"}); g.GetFound() {
		t.Fatal("document of removed partition kept")
	}
	prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{})
	if len(prog.GetPartitions()) != 1 {
		t.Fatalf("E29: removed partition state kept: %v", prog)
	}
	e.WaitIndexed()
	st := status(t, e, "items")
	if len(st.GetModalities()) != 3 || st.GetSafeTs() != 30 {
		t.Fatalf("modalities/safe after rebuild: %v", st)
	}
	sr, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red"}})
	if err != nil || len(sr.GetHits()) != 1 {
		t.Fatalf("text after rebuild: %v %v", sr, err)
	}
}

// E28 (REBUILD_FULL), E29 (new partitions start at ddl ts), E30 (DROP and re-create).
func TestRebuildFullAndDropE28E29E30(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	def := itemsDef("items", "table:100", "table:102")
	def.Fields[0].Type = apiv1.FieldType_FIELD_TYPE_UINT
	_, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE))
	requireReason(t, "E27", err, contract.ReasonPolicyTooWeak, "update_policy")
	resp, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDocumentsRemoved() != 3 || status(t, e, "items").GetDocCount() != 0 {
		t.Fatalf("REBUILD_FULL kept documents: %v", resp)
	}
	prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{SourcePartitions: []string{"table:100", "table:102"}})
	if len(prog.GetPartitions()) != 2 || prog.GetPartitions()[0].GetResolvedTs() != 30 || prog.GetPartitions()[1].GetResolvedTs() != 40 {
		t.Fatalf("E28/E29 stream state: %v", prog)
	}
	e.WaitIndexed()
	if s := status(t, e, "items").GetSafeTs(); s != 30 {
		t.Fatalf("safe %d", s)
	}
	lin2 := resp.GetLineage()
	drop := changeReq(itemsDef("items"), lin2, 50, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_DROP)
	drop.Definition = nil
	if _, err := e.PutCollectionSchema(bg, drop); err != nil {
		t.Fatal(err)
	}
	if st := status(t, e, "items"); st.GetState() != apiv1.CollectionState_COLLECTION_STATE_DROPPED {
		t.Fatalf("E30: %v", st)
	}
	_, err = e.Ingest(bg, mb("table:100", 1, lin2.GetSchemaGenerationToken(), itemUpsert(4, 60, 1, "a", "b", 1, nil)))
	requireReason(t, "E30", err, contract.ReasonPartitionNotMapped, "source_partition")
	_, err = e.Search(bg, &apiv1.SearchRequest{Collection: "items", Filters: []*apiv1.Filter{{Field: "tag", Op: apiv1.FilterOp_FILTER_OP_EQ, Value: val("x")}}})
	requireReason(t, "E72", err, contract.ReasonCollectionNotFound, "collection")
	list, _ := e.ListCollections(bg, &apiv1.ListCollectionsRequest{})
	if len(list.GetCollections()) != 0 {
		t.Fatal("dropped collection listed")
	}
	// Re-create: zero-state again; the token is new (E26).
	lin3 := mustCreate(t, e, itemsDef("items"), 70)
	if lin3.GetGeneration() != 4 || lin3.GetSchemaGenerationToken() == lin.GetSchemaGenerationToken() {
		t.Fatalf("E26 after re-create: %v", lin3)
	}
	if st := status(t, e, "items"); st.GetDocCount() != 0 || st.GetSafeTs() != 0 {
		t.Fatalf("re-created collection not empty: %v", st)
	}
	// Unknown collection and non-initial policy.
	_, err = e.PutCollectionSchema(bg, changeReq(itemsDef("ghost"), lin3, 80, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE))
	requireReason(t, "E23", err, contract.ReasonCollectionNotFound, "scope.collection")
	req := createReq(itemsDef("ghost", "table:5"), 80)
	req.UpdatePolicy = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_UNSPECIFIED
	_, err = e.PutCollectionSchema(bg, req)
	requireReason(t, "E21", err, contract.ReasonUnspecifiedPolicy, "update_policy")
	req = createReq(itemsDef("ghost", "table:5"), 80)
	req.SchemaVersion = 3
	_, err = e.PutCollectionSchema(bg, req)
	requireReason(t, "E23", err, contract.ReasonInvalidZeroState, "schema_version")
	next := changeReq(itemsDef("items"), lin3, 60, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE)
	_, err = e.PutCollectionSchema(bg, next)
	requireReason(t, "E25", err, contract.ReasonNonMonotonicSchema, "scope.ddl_commit_ts")
	next = changeReq(itemsDef("items"), lin3, 90, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE)
	next.Meta.ClientKind = apiv1.ClientKind_CLIENT_KIND_UNSPECIFIED
	_, err = e.PutCollectionSchema(bg, next)
	requireReason(t, "E20", err, contract.ReasonInvalidMeta, "meta.client_kind")
}
