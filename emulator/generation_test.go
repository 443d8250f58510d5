package emulator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/storage"
)

// holdRebuilds makes every index built by a later schema change wait until
// the returned release is called (idempotent; also run at cleanup).
func holdRebuilds(t *testing.T, e *Emulator) (release func()) {
	gate := make(chan struct{})
	e.mu.Lock()
	e.indexGate = func() { <-gate }
	e.mu.Unlock()
	released := false
	release = func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release)
	return release
}

func searchKeys(t *testing.T, e *Emulator, req *apiv1.SearchRequest) ([]string, uint64) {
	t.Helper()
	r, err := e.Search(bg, req)
	if err != nil {
		t.Fatalf("search %v: %v", req, err)
	}
	return hitKeys(r), r.GetReadTs()
}

func metricsText(t *testing.T, e *Emulator) string {
	t.Helper()
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// E55, E56, E57, E58: while REBUILD_IN_PLACE builds the new generation's
// indexes, searches are answered by the previous generation at its read_ts,
// documents already show the new definition, safe_ts holds, min_ts above it
// waits, and the status and metrics say "rebuilding". Then the new
// generation takes over in one step.
func TestRebuildBesideServingGenerationE55(t *testing.T) {
	e := openMem(t, Options{MaxReadWait: 50 * time.Millisecond})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	text := &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red pear car"}, KeysOnly: true}
	vec := &apiv1.SearchRequest{Collection: "items", Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0, 0}}, KeysOnly: true}
	before, ts := searchKeys(t, e, text)
	if len(before) != 3 || ts != 30 {
		t.Fatalf("before: %v at %d", before, ts)
	}

	release := holdRebuilds(t, e)
	def := itemsDef("items")
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT // price FLOAT -> INT: values nulled
	resp, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE))
	if err != nil {
		t.Fatal(err)
	}
	tok := resp.GetLineage().GetSchemaGenerationToken()

	// rule: E55 — the previous generation answers, whole.
	for _, req := range []*apiv1.SearchRequest{text, vec} {
		keys, ts := searchKeys(t, e, req)
		if len(keys) != 3 || ts != 30 {
			t.Fatalf("E55: search during rebuild: %v at read_ts %d", keys, ts)
		}
	}
	// rule: E28 — documents switch at the schema change; read_ts is the held one.
	g, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "items", PrimaryKey: "1"})
	if err != nil || g.GetReadTs() != 30 {
		t.Fatalf("get during rebuild: %v %v", g, err)
	}
	if _, null := g.GetDocument().GetFields()["price"].GetKind().(*apiv1.Value_NullValue); !null {
		t.Fatalf("E28: document not projected: %v", g)
	}
	// rule: E58 — status and metrics show the rebuild.
	st := status(t, e, "items")
	if rb := st.GetRebuild(); rb.GetGeneration() != 2 || rb.GetServingGeneration() != 1 || rb.GetPercent() != 0 || st.GetSafeTs() != 30 {
		t.Fatalf("E58: status during rebuild: %v", st)
	}
	for _, m := range st.GetModalities() {
		if m.GetAppliedTs() != 30 {
			t.Fatalf("E56: serving generation's applied_ts: %v", st)
		}
	}
	mt := metricsText(t, e)
	for _, want := range []string{
		`sfemu_collection_rebuilding{collection="items"} 1`,
		`sfemu_collection_rebuild_percent{collection="items"} 0`,
		`sfemu_collection_generation{collection="items",role="newest"} 2`,
		`sfemu_collection_generation{collection="items",role="serving"} 1`,
		`sfemu_collection_safe_ts{collection="items"} 30`,
	} {
		if !strings.Contains(mt, want) {
			t.Fatalf("E58: metrics lack %s:\n%s", want, mt)
		}
	}

	// Ingest continues into the new generation; the serving one does not
	// move, and safe_ts holds (rule: E56).
	kite := itemUpsert(4, 35, 4, "red kite", "toy", 0, []float32{1, 0, 0})
	kite.Fields["price"] = val(3)
	mustIngest(t, e, mb("table:100", 1, tok, kite))
	mustAdvance(t, e, "table:100", 1, 50)
	keys, ts := searchKeys(t, e, text)
	if len(keys) != 3 || ts != 30 {
		t.Fatalf("E55: serving generation moved: %v at %d", keys, ts)
	}
	// rule: E57 — min_ts above the held safe_ts waits for the new generation.
	_, err = e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red"}, MinTs: 50})
	ce := requireReason(t, "E57", err, contract.ReasonNotYetFresh, "min_ts")
	if ce.Actual != "30" {
		t.Fatalf("E57: actual %q", ce.Actual)
	}

	release()
	e.WaitIndexed()
	keys, ts = searchKeys(t, e, text)
	if len(keys) != 4 || ts != 50 {
		t.Fatalf("E55: after the swap: %v at %d", keys, ts)
	}
	st = status(t, e, "items")
	if st.GetRebuild() != nil || st.GetSafeTs() != 50 {
		t.Fatalf("E58: status after the swap: %v", st)
	}
	if mt := metricsText(t, e); !strings.Contains(mt, `sfemu_collection_rebuilding{collection="items"} 0`) {
		t.Fatalf("E58: metrics after the swap:\n%s", mt)
	}
}

// E55: a change that arrives while a rebuild runs discards the unfinished
// generation; the generation that was serving keeps serving (two at most).
func TestRebuildDuringRebuildKeepsServingE55(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	release := holdRebuilds(t, e)
	def := itemsDef("items")
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT
	r1, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.PutCollectionSchema(bg, changeReq(itemsDef("items"), r1.GetLineage(), 41, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL))
	if err != nil {
		t.Fatal(err)
	}
	e.mu.RLock()
	c := e.colls["items"]
	serving := c.serving().rec.GetLineage().GetGeneration()
	e.mu.RUnlock()
	if serving != 1 || r2.GetLineage().GetGeneration() != 3 {
		t.Fatalf("E55: serving generation %d, newest %v", serving, r2.GetLineage())
	}
	keys, ts := searchKeys(t, e, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red pear car"}})
	if len(keys) != 3 || ts != 30 {
		t.Fatalf("E55: %v at %d", keys, ts)
	}
	release()
	e.WaitIndexed()
	// REBUILD_FULL emptied the documents; the new generation serves once it
	// has caught up with the held safe_ts (30, the partition's resolved ts).
	keys, ts = searchKeys(t, e, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red pear car"}})
	if len(keys) != 0 || ts != 30 {
		t.Fatalf("E55: after REBUILD_FULL: %v at %d", keys, ts)
	}
}

// E56: a schema change that maps a partition at a ddl ts below the reported
// safe_ts (E29) does not make safe_ts fall back: the previous generation
// keeps answering until the new one passes the held value.
func TestSafeTsHeldAcrossGenerationsE56(t *testing.T) {
	e := openMem(t, Options{})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	mustAdvance(t, e, "table:100", 1, 100)
	e.WaitIndexed()
	resp, err := e.PutCollectionSchema(bg, changeReq(itemsDef("items", "table:100", "table:101"), lin, 60, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE))
	if err != nil {
		t.Fatal(err)
	}
	e.WaitIndexed()
	if st := status(t, e, "items"); st.GetSafeTs() != 100 {
		t.Fatalf("E56: safe_ts fell back to %d", st.GetSafeTs())
	}
	if _, ts := searchKeys(t, e, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red"}}); ts != 100 {
		t.Fatalf("E56: read_ts %d", ts)
	}
	mustIngest(t, e, mb("table:101", 1, resp.GetLineage().GetSchemaGenerationToken(), itemUpsert(1, 70, 7, "red bus", "toy", 3, nil)))
	mustAdvance(t, e, "table:101", 1, 90)
	e.WaitIndexed()
	if st := status(t, e, "items"); st.GetSafeTs() != 100 {
		t.Fatalf("E56: safe_ts %d while the new partition is at 90", st.GetSafeTs())
	}
	mustAdvance(t, e, "table:101", 1, 120)
	e.WaitIndexed()
	st := status(t, e, "items")
	if st.GetSafeTs() != 100 || st.GetRebuild() != nil {
		t.Fatalf("E56: after the new generation passed the held value: %v", st)
	}
	mustAdvance(t, e, "table:100", 1, 130)
	e.WaitIndexed()
	if st := status(t, e, "items"); st.GetSafeTs() != 120 {
		t.Fatalf("E56: safe_ts %d", st.GetSafeTs())
	}
}

// E61, E55: a process stopped in the middle of a rebuild resumes it on Open,
// which returns only once every index is complete.
func TestRebuildResumesAfterRestartE61(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	release := holdRebuilds(t, e)
	def := itemsDef("items")
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT
	if _, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE)); err != nil {
		t.Fatal(err)
	}
	if st := status(t, e, "items"); st.GetRebuild() == nil {
		t.Fatalf("no rebuild in progress: %v", st)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	release() // the held worker returns and sees the stop
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	st := status(t, e2, "items")
	if st.GetRebuild() != nil || st.GetSafeTs() != 30 || st.GetLineage().GetGeneration() != 2 {
		t.Fatalf("E61: status after restart: %v", st)
	}
	keys, ts := searchKeys(t, e2, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red pear car"}, Filters: []*apiv1.Filter{{Field: "price", Op: apiv1.FilterOp_FILTER_OP_IS_NULL}}})
	if len(keys) != 3 || ts != 30 {
		t.Fatalf("E61: search after restart: %v at %d", keys, ts)
	}
}

// E57: during a rebuild a read with min_ts at or below the held safe_ts is
// answered at once by the serving generation; one above it waits until the
// new generation serves and reaches min_ts, and is then answered by it.
func TestMinTsDuringRebuildE57(t *testing.T) {
	clk := newFakeClock()
	e := openMem(t, Options{Clock: clk, MaxReadWait: time.Hour})
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	release := holdRebuilds(t, e)
	def := itemsDef("items")
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT
	resp, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE))
	if err != nil {
		t.Fatal(err)
	}
	kite := itemUpsert(4, 35, 4, "red kite", "toy", 0, []float32{1, 0, 0})
	kite.Fields["price"] = val(3)
	mustIngest(t, e, mb("table:100", 1, resp.GetLineage().GetSchemaGenerationToken(), kite))
	mustAdvance(t, e, "table:100", 1, 50)

	// rule: E57 — min_ts at the held safe_ts: no wait (under a cancelled
	// context a wait ends at once in NOT_YET_FRESH), the serving generation.
	text := &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "red pear car"}, KeysOnly: true, MinTs: 30}
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	r, err := e.Search(cancelled, text)
	if err != nil || len(r.GetHits()) != 3 || r.GetReadTs() != 30 {
		t.Fatalf("E57: min_ts at the held safe_ts: %v at read_ts %d (%v)", hitKeys(r), r.GetReadTs(), err)
	}

	// rule: E57 — min_ts above it waits for the swap.
	type answer struct {
		keys []string
		ts   uint64
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		req := proto.Clone(text).(*apiv1.SearchRequest)
		req.MinTs = 50
		r, err := e.Search(bg, req)
		got <- answer{hitKeys(r), r.GetReadTs(), err}
	}()
	for clk.pending() == 0 {
		select {
		case a := <-got:
			t.Fatalf("E57: min_ts above the held safe_ts answered before the swap: %v at %d (%v)", a.keys, a.ts, a.err)
		default:
			waitABit()
		}
	}
	// The read waits on the watermark notification; the swap must wake it
	// (the fake clock never ends the wait).
	release()
	a := <-got
	if a.err != nil || len(a.keys) != 4 || a.ts != 50 {
		t.Fatalf("E57: after the swap: %v at read_ts %d (%v)", a.keys, a.ts, a.err)
	}
}

// E55, E61: a process that dies in the middle of a rebuild (no Close: the
// store file as it is on disk while the rebuild is held) resumes the
// rebuild on Open, which returns with every index complete; the first read
// sees the new generation whole.
func TestRebuildResumesAfterCrashE55(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lin := mustCreate(t, e, itemsDef("items"), 10)
	seedItems(t, e, lin.GetSchemaGenerationToken())
	release := holdRebuilds(t, e)
	def := itemsDef("items")
	def.Fields[3].Type = apiv1.FieldType_FIELD_TYPE_INT
	if _, err := e.PutCollectionSchema(bg, changeReq(def, lin, 40, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_IN_PLACE)); err != nil {
		t.Fatal(err)
	}
	if st := status(t, e, "items"); st.GetRebuild() == nil {
		t.Fatalf("no rebuild in progress: %v", st)
	}
	// The crash image: every accepted request was fsynced before it
	// returned (E41, E60), so the file copied now is what a crash leaves.
	crashed := t.TempDir()
	img, err := os.ReadFile(filepath.Join(dir, storage.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, storage.FileName), img, 0o600); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(crashed, Options{})
	if err != nil {
		t.Fatalf("E61: open after a crash mid-rebuild: %v", err)
	}
	defer e2.Close()
	st := status(t, e2, "items")
	if st.GetRebuild() != nil || st.GetSafeTs() != 30 || st.GetLineage().GetGeneration() != 2 {
		t.Fatalf("E61: status after the crash: %v", st)
	}
	for _, req := range []*apiv1.SearchRequest{
		{Collection: "items", Text: &apiv1.TextQuery{Query: "red pear car"}, Filters: []*apiv1.Filter{{Field: "price", Op: apiv1.FilterOp_FILTER_OP_IS_NULL}}, KeysOnly: true},
		{Collection: "items", Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 0, 0}}, KeysOnly: true},
	} {
		keys, ts := searchKeys(t, e2, req)
		if len(keys) != 3 || ts != 30 {
			t.Fatalf("E55: search after the crash: %v at read_ts %d", keys, ts)
		}
	}
	release()
}
