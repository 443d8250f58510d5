package emulator

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// E1, E23, E26: creation with the zero-state tuple creates a lineage with
// a fresh token; the collection is listed with its modalities.
func TestCreateCollectionE23E26(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 100)
	if lin.GetSchemaVersion() != 1 || lin.GetLastDdlCommitTs() != 100 || lin.GetGeneration() != 1 {
		t.Fatalf("lineage %v", lin)
	}
	if tok := lin.GetSchemaGenerationToken(); tok == "" || tok == apiv1.InitialGenerationToken {
		t.Fatalf("E26: token %q", tok)
	}
	st, err := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "items"})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != apiv1.CollectionState_COLLECTION_STATE_ACTIVE || len(st.GetModalities()) != 4 {
		t.Fatalf("status %v", st)
	}
	// E2: a collection without TEXT/VECTOR fields or metadata_aux has the
	// document modality only (E62: this emulator runs in memory).
	mustCreate(t, e, docDef("plain"), 100)
	if st, _ := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "plain"}); len(st.GetModalities()) != 1 || st.GetModalities()[0].GetModality() != apiv1.Modality_MODALITY_DOCUMENT {
		t.Fatalf("E2: modalities %v", st.GetModalities())
	}
	_, err = e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "nope"})
	requireReason(t, "E72", err, contract.ReasonCollectionNotFound, "name")
	// E23: a second INITIAL_CREATION is ALREADY_EXISTS (different key, so not a replay).
	req := createReq(itemsDef("items"), 101)
	_, err = e.PutCollectionSchema(bg, req)
	requireReason(t, "E23", err, contract.ReasonAlreadyExists, "scope.collection")
}

// E22: replays return the stored answer and change nothing; a reused key
// with other content is a conflict.
func TestIdempotencyE22(t *testing.T) {
	e := openMem(t, Options{})
	req := createReq(itemsDef("items"), 100)
	first, err := e.PutCollectionSchema(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	lin := first.GetLineage()
	// Move the lineage on.
	def2 := itemsDef("items")
	def2.Fields = append(def2.Fields, &apiv1.Field{Name: "extra", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY})
	if _, err := e.PutCollectionSchema(bg, changeReq(def2, lin, 200, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE)); err != nil {
		t.Fatal(err)
	}
	before := dump(t, e)
	again, err := e.PutCollectionSchema(bg, proto.Clone(req).(*apiv1.PutCollectionSchemaRequest))
	if err != nil {
		t.Fatalf("replay rejected: %v", err)
	}
	if !again.GetReplayed() || !proto.Equal(again.GetLineage(), lin) {
		t.Fatalf("replay answer %v, want original lineage %v", again, lin)
	}
	if after := dump(t, e); after != before {
		t.Fatalf("replay changed state:\n%s\nvs\n%s", before, after)
	}
	other := proto.Clone(req).(*apiv1.PutCollectionSchemaRequest)
	other.Scope.DdlCommitTs = 99
	_, err = e.PutCollectionSchema(bg, other)
	requireReason(t, "E22", err, contract.ReasonIdempotencyConflict, "meta.idempotency_key")
	if after := dump(t, e); after != before {
		t.Fatal("E91: conflict changed state")
	}
}

// E13: a partition feeds at most one collection.
func TestPartitionConflictE13(t *testing.T) {
	e := openMem(t, Options{})
	mustCreate(t, e, itemsDef("a", "table:1"), 10)
	_, err := e.PutCollectionSchema(bg, createReq(itemsDef("b", "table:2", "table:1"), 11))
	requireReason(t, "E13", err, contract.ReasonPartitionConflict, "definition.source_partitions[1]")
}

// E32..E35, E91: each bad batch is rejected with its reason and changes nothing.
func TestIngestAdmissionE32toE35(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, docDef("docs", "table:200"), 10).GetSchemaGenerationToken()
	mustCreate(t, e, docDef("other", "table:300"), 10)
	r := mustIngest(t, e, mb("table:200", 1, tok, docUpsert(1, 20, 1, "a"), docUpsert(2, 21, 2, "b")))
	if r.GetOutcome() != apiv1.IngestOutcome_INGEST_OUTCOME_APPLIED || r.GetLastSeq() != 2 || r.GetAppliedMutations() != 2 {
		t.Fatalf("first batch %v", r)
	}
	before := dump(t, e)
	cases := []struct {
		rule   string
		b      *apiv1.MutationBatch
		reason Reason
		field  string
	}{
		{"E32 unmapped", mb("table:999", 1, tok, docUpsert(3, 22, 3, "c")), contract.ReasonPartitionNotMapped, "source_partition"},
		{"E32 wrong collection", func() *apiv1.MutationBatch {
			b := mb("table:200", 1, tok, docUpsert(3, 22, 3, "c"))
			b.Collection = "other"
			return b
		}(), contract.ReasonPartitionNotMapped, "collection"},
		{"E33 epoch back", mb("table:200", 0, tok, docUpsert(3, 22, 3, "c")), contract.ReasonInvalidBatch, "source_epoch"},
		{"E34 gap", mb("table:200", 1, tok, docUpsert(4, 22, 3, "c")), contract.ReasonSeqGap, "first_seq"},
		{"E34 overlap", mb("table:200", 1, tok, docUpsert(2, 22, 3, "c"), docUpsert(3, 22, 4, "d")), contract.ReasonSeqOverlap, "first_seq"},
		{"E35 stale token", mb("table:200", 1, "g0-v0-t0", docUpsert(3, 22, 3, "c")), contract.ReasonStaleGeneration, "schema_generation_token"},
		{"E36 unknown field", func() *apiv1.MutationBatch {
			m := docUpsert(3, 22, 3, "c")
			m.Fields["zzz"] = val(1)
			return mb("table:200", 1, tok, m)
		}(), contract.ReasonUnknownField, "mutations[0].fields.zzz"},
		{"E36 pk mismatch", func() *apiv1.MutationBatch {
			m := docUpsert(3, 22, 3, "c")
			m.PrimaryKey = "33"
			return mb("table:200", 1, tok, m)
		}(), contract.ReasonPrimaryKeyMismatch, "mutations[0].primary_key"},
		{"E36 atomic: last mutation bad", func() *apiv1.MutationBatch {
			m := docUpsert(4, 22, 4, "c")
			m.Fields["n"] = val("not a number")
			return mb("table:200", 1, tok, docUpsert(3, 22, 3, "c"), m)
		}(), contract.ReasonTypeMismatch, "mutations[1].fields.n"},
	}
	for _, c := range cases {
		_, err := e.Ingest(bg, c.b)
		ce := requireReason(t, c.rule, err, c.reason, c.field)
		if ce.Error() == "" {
			t.Fatal("empty message")
		}
		if after := dump(t, e); after != before {
			t.Fatalf("%s: E91 rejected batch changed state:\n%s\nvs\n%s", c.rule, before, after)
		}
	}
	// E34: an exact replay is a no-op, even with an old token.
	r = mustIngest(t, e, mb("table:200", 1, "whatever", docUpsert(1, 20, 1, "CHANGED")))
	if r.GetOutcome() != apiv1.IngestOutcome_INGEST_OUTCOME_REPLAY_NOOP || r.GetLastSeq() != 2 {
		t.Fatalf("E34 replay outcome %v", r)
	}
	if after := dump(t, e); after != before {
		t.Fatal("E34: replay changed state")
	}
	// E33: a higher epoch resets the seq to 1; afterwards the old epoch is a regression.
	mustIngest(t, e, mb("table:200", 2, tok, docUpsert(1, 30, 5, "e")))
	_, err := e.Ingest(bg, mb("table:200", 1, tok, docUpsert(3, 31, 6, "f")))
	ce := requireReason(t, "E33", err, contract.ReasonEpochRegression, "source_epoch")
	if ce.Expected != ">= 2" || ce.Actual != "1" {
		t.Fatalf("E90 expected/actual: %+v", ce)
	}
	prog, _ := e.GetProgress(bg, &apiv1.GetProgressRequest{SourcePartitions: []string{"table:200"}})
	if p := prog.GetPartitions()[0]; p.GetSourceEpoch() != 2 || p.GetLastSeq() != 1 || p.GetCollection() != "docs" {
		t.Fatalf("E54 progress %v", p)
	}
}

// E38, E40: version guard, tombstones, source partition per document.
func TestVersionGuardE38(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	p := "table:200"
	mustIngest(t, e, mb(p, 1, tok, docUpsert(1, 50, 1, "v50")))
	r := mustIngest(t, e, mb(p, 1, tok, docUpsert(2, 40, 1, "v40")))
	if r.GetStaleMutations() != 1 || r.GetAppliedMutations() != 0 {
		t.Fatalf("older upsert not stale: %v", r)
	}
	get := func(id string) *apiv1.GetDocumentResponse {
		t.Helper()
		g, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "docs", PrimaryKey: id})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if d := get("1"); d.GetDocument().GetFields()["body"].GetStringValue() != "v50" || d.GetDocument().GetCommitTs() != 50 || d.GetDocument().GetSourcePartition() != p {
		t.Fatalf("doc %v", d)
	}
	mustIngest(t, e, mb(p, 1, tok, docUpsert(3, 50, 1, "v50b"))) // equal version replaces
	if d := get("1"); d.GetDocument().GetFields()["body"].GetStringValue() != "v50b" {
		t.Fatalf("equal-version upsert did not replace: %v", d)
	}
	mustIngest(t, e, mb(p, 1, tok, del(4, 60, 1)))
	if d := get("1"); d.GetFound() {
		t.Fatal("deleted doc found")
	}
	// Redelivery of an older upsert after the delete: the tombstone guards.
	r = mustIngest(t, e, mb(p, 1, tok, docUpsert(5, 55, 1, "late")))
	if r.GetStaleMutations() != 1 || get("1").GetFound() {
		t.Fatalf("tombstone did not guard: %v", r)
	}
	// Older delete of a newer doc is stale too.
	mustIngest(t, e, mb(p, 1, tok, docUpsert(6, 70, 2, "x")))
	if r := mustIngest(t, e, mb(p, 1, tok, del(7, 65, 2))); r.GetStaleMutations() != 1 || !get("2").GetFound() {
		t.Fatalf("older delete applied: %v", r)
	}
	// In-batch order: delete then re-insert at the same ts keeps the insert.
	mustIngest(t, e, mb(p, 1, tok, del(8, 80, 3), docUpsert(9, 80, 3, "back")))
	if !get("3").GetFound() {
		t.Fatal("E37: seq order within batch not respected")
	}
	st, _ := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "docs"})
	if st.GetDocCount() != 2 || st.GetTombstoneCount() != 1 {
		t.Fatalf("counts %v", st)
	}
}

// tso builds a TSO from physical milliseconds.
func tso(ms uint64) uint64 { return ms << 18 }

// E39: tombstones are collected only after safe_ts passes them by the retention.
func TestTombstoneRetentionE39(t *testing.T) {
	e := openMem(t, Options{TombstoneRetention: 1000 * 1e6}) // 1s
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	p := "table:200"
	mustIngest(t, e, mb(p, 1, tok, docUpsert(1, tso(1000), 1, "a"), del(2, tso(2000), 1)))
	mustAdvance(t, e, p, 1, tso(2500))
	st, _ := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "docs"})
	if st.GetTombstoneCount() != 1 {
		t.Fatalf("tombstone collected too early: %v", st)
	}
	mustAdvance(t, e, p, 1, tso(3000)) // 2000 + 1000 <= 3000
	st, _ = e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "docs"})
	if st.GetTombstoneCount() != 0 {
		t.Fatalf("tombstone kept after retention: %v", st)
	}
}

// E50..E53: watermarks per modality and partition.
func TestWatermarksE50toE53(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, docDef("docs", "table:1", "table:2"), 10).GetSchemaGenerationToken()
	safe := func() uint64 {
		st, err := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "docs"})
		if err != nil {
			t.Fatal(err)
		}
		return st.GetSafeTs()
	}
	mustIngest(t, e, mb("table:1", 1, tok, docUpsert(1, 20, 1, "a")))
	mustAdvance(t, e, "table:1", 1, 100)
	if s := safe(); s != 0 {
		t.Fatalf("E51: safe_ts %d defined before every partition reported", s)
	}
	mustAdvance(t, e, "table:2", 1, 50)
	if s := safe(); s != 50 {
		t.Fatalf("E51: safe_ts %d, want min 50", s)
	}
	mustAdvance(t, e, "table:2", 1, 150)
	if s := safe(); s != 100 {
		t.Fatalf("E51: safe_ts %d, want 100", s)
	}
	before := dump(t, e)
	_, err := e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: "table:1", SourceEpoch: 1, ResolvedTs: 99})
	ce := requireReason(t, "E50", err, contract.ReasonProgressRegression, "resolved_ts")
	if ce.Expected != ">= 100" || ce.Actual != "99" {
		t.Fatalf("E90: %+v", ce)
	}
	_, err = e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: "table:9", SourceEpoch: 1, ResolvedTs: 99})
	requireReason(t, "E50", err, contract.ReasonPartitionNotMapped, "source_partition")
	_, err = e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: "table:1", SourceEpoch: 0, ResolvedTs: 200})
	requireReason(t, "E50", err, contract.ReasonInvalidArgument, "source_epoch")
	if dump(t, e) != before {
		t.Fatal("E91: rejected progress changed state")
	}
	// Equal is a no-op; a new epoch is adopted and resets seq.
	mustAdvance(t, e, "table:1", 1, 100)
	mustAdvance(t, e, "table:1", 2, 120)
	_, err = e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: "table:1", SourceEpoch: 1, ResolvedTs: 130})
	requireReason(t, "E50", err, contract.ReasonEpochRegression, "source_epoch")
	mustIngest(t, e, mb("table:1", 2, tok, docUpsert(1, 125, 1, "b")))
}

// E51, E52: text and vector apply asynchronously; safe_ts covers them.
func TestModalityWatermarksE51E52(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items"), 10).GetSchemaGenerationToken()
	mustIngest(t, e, mb("table:100", 1, tok, itemUpsert(1, 20, 1, "red apple", "fruit", 1.5, []float32{1, 0, 0})))
	mustAdvance(t, e, "table:100", 1, 30)
	e.WaitIndexed()
	st, _ := e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "items"})
	if st.GetSafeTs() != 30 {
		t.Fatalf("safe_ts %d", st.GetSafeTs())
	}
	for _, m := range st.GetModalities() {
		if m.GetAppliedTs() != 30 {
			t.Fatalf("modality %v applied %d", m.GetModality(), m.GetAppliedTs())
		}
	}
	// A modality that has not applied yet holds safe_ts back: stop the
	// text worker and advance.
	e.mu.Lock()
	c := e.colls["items"]
	c.textW.stop()
	<-c.textW.done
	e.mu.Unlock()
	mustAdvance(t, e, "table:100", 1, 40)
	st, _ = e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "items"})
	if st.GetSafeTs() != 30 {
		t.Fatalf("E52: safe_ts %d advanced past a lagging modality", st.GetSafeTs())
	}
	for _, m := range st.GetModalities() {
		want := uint64(40)
		if m.GetModality() == apiv1.Modality_MODALITY_TEXT {
			want = 30
		}
		if m.GetModality() == apiv1.Modality_MODALITY_VECTOR {
			e.WaitIndexed()
			continue
		}
		if m.GetAppliedTs() != want {
			t.Fatalf("E51: %v applied %d want %d", m.GetModality(), m.GetAppliedTs(), want)
		}
	}
}

// E71: min_ts waits for safe_ts, bounded by MaxReadWait on the injected clock.
func TestReadWaitsForMinTsE71(t *testing.T) {
	clk := newFakeClock()
	e := openMem(t, Options{Clock: clk, MaxReadWait: 3e9})
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	mustIngest(t, e, mb("table:200", 1, tok, docUpsert(1, 20, 1, "a")))
	mustAdvance(t, e, "table:200", 1, 25)

	got := make(chan *apiv1.GetDocumentResponse, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "docs", PrimaryKey: "2", MinTs: 50})
		got <- r
		errs <- err
	}()
	for clk.pending() == 0 {
		waitABit()
	}
	mustIngest(t, e, mb("table:200", 1, tok, docUpsert(2, 40, 2, "b")))
	mustAdvance(t, e, "table:200", 1, 60)
	r := <-got
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if !r.GetFound() || r.GetReadTs() != 60 {
		t.Fatalf("E70: read after wait %v", r)
	}
	// Timeout path.
	go func() {
		_, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "docs", PrimaryKey: "2", MinTs: 1000})
		errs <- err
	}()
	for clk.pending() < 2 {
		waitABit()
	}
	clk.Advance(3e9)
	ce := requireReason(t, "E71", <-errs, contract.ReasonNotYetFresh, "min_ts")
	if ce.Actual != "60" {
		t.Fatalf("E71: current safe_ts not reported: %+v", ce)
	}
	// Without min_ts no wait.
	r2, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "docs", PrimaryKey: "9"})
	if err != nil || r2.GetFound() || r2.GetReadTs() != 60 {
		t.Fatalf("E72: %v %v", r2, err)
	}
	_, err = e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "nope", PrimaryKey: "9"})
	requireReason(t, "E72", err, contract.ReasonCollectionNotFound, "collection")
}

// E43: after resolved_ts R in epoch N, a new row at or below R in epoch N
// is late; a new epoch may re-deliver; a schema-set resolved ts does not arm it.
func TestLateMutationE43(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	p := "table:200"
	mustIngest(t, e, mb(p, 1, tok, docUpsert(1, 20, 1, "a")))
	mustAdvance(t, e, p, 1, 50)
	before := dump(t, e)
	_, err := e.Ingest(bg, mb(p, 1, tok, docUpsert(2, 60, 2, "ok"), docUpsert(3, 50, 3, "late")))
	ce := requireReason(t, "E43", err, contract.ReasonLateMutation, "mutations[1].commit_ts")
	if ce.Expected != "> 50" || ce.Actual != "50" {
		t.Fatalf("E90: %+v", ce)
	}
	if dump(t, e) != before {
		t.Fatal("E91: late batch changed state")
	}
	mustIngest(t, e, mb(p, 1, tok, docUpsert(2, 51, 2, "fine")))
	// A new epoch re-delivers older rows: allowed, version-guarded.
	r := mustIngest(t, e, mb(p, 2, tok, docUpsert(1, 20, 1, "a")))
	if r.GetStaleMutations() != 0 || r.GetAppliedMutations() != 1 {
		t.Fatalf("re-delivery: %v", r)
	}
	// Progress in epoch 2 re-arms the check.
	mustAdvance(t, e, p, 2, 70)
	_, err = e.Ingest(bg, mb(p, 2, tok, docUpsert(2, 65, 4, "late")))
	requireReason(t, "E43", err, contract.ReasonLateMutation, "mutations[0].commit_ts")
	// A partition added by a schema change starts at the DDL ts unarmed (E29).
	lin := status(t, e, "docs").GetLineage()
	resp, err := e.PutCollectionSchema(bg, changeReq(docDef("docs", "table:200", "table:201"), lin, 100, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE))
	if err != nil {
		t.Fatal(err)
	}
	mustIngest(t, e, mb("table:201", 1, resp.GetLineage().GetSchemaGenerationToken(), docUpsert(1, 90, 9, "before ddl ts")))
}
