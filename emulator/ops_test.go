package emulator

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// E92: a failed durable commit leaves memory unchanged, returns INTERNAL,
// and the emulator refuses further writes.
func TestStorageFailureE92(t *testing.T) {
	e, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	mustIngest(t, e, mb("table:200", 1, tok, docUpsert(1, 20, 1, "a")))
	before := dump(t, e)
	_ = e.db.Close() // the disk goes away underneath
	_, err = e.Ingest(bg, mb("table:200", 1, tok, docUpsert(2, 21, 2, "b")))
	requireReason(t, "E92", err, contract.ReasonInternal, "")
	if after := dump(t, e); after != before {
		t.Fatalf("E92: memory changed by a failed commit:\n%s\nvs\n%s", before, after)
	}
	_, err = e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: "table:200", SourceEpoch: 1, ResolvedTs: 30})
	requireReason(t, "E92", err, contract.ReasonClosed, "")
	// Reads keep working.
	if g, err := e.GetDocument(bg, &apiv1.GetDocumentRequest{Collection: "docs", PrimaryKey: "1"}); err != nil || !g.GetFound() {
		t.Fatalf("read after failure: %v %v", g, err)
	}
	e.db = nil
	_ = e.Close()
}

// E80: metrics for ingest rows, batches, rejections by reason, watermarks and lag.
func TestMetrics(t *testing.T) {
	clk := newFakeClock()
	e := openMem(t, Options{Clock: clk})
	mustCreate(t, e, itemsDef("items"), 10)
	tok := mustCreate(t, e, docDef("docs"), 10).GetSchemaGenerationToken()
	mustIngest(t, e, mb("table:200", 1, tok, docUpsert(1, 20, 1, "a"), docUpsert(2, 21, 2, "b")))
	_, _ = e.Ingest(bg, mb("table:200", 1, tok, docUpsert(9, 22, 3, "c")))
	physMs := uint64(clk.Now().UnixMilli()) - 1500
	mustAdvance(t, e, "table:200", 1, physMs<<18)
	reg := e.Registry()
	if n := counterValue(t, e.metrics.mutations.WithLabelValues("docs", "applied")); n != 2 {
		t.Fatalf("applied mutations %v", n)
	}
	if n := counterValue(t, e.metrics.rejections.WithLabelValues("ingest", "SEQ_GAP")); n != 1 {
		t.Fatalf("rejections %v", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	lag := -1.0
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		if mf.GetName() == "sfemu_collection_safe_lag_seconds" {
			lag = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	joined := strings.Join(names, ",")
	for _, want := range []string{"sfemu_modality_failed", "sfemu_ingest_mutations_total", "sfemu_ingest_batch_seconds", "sfemu_rejections_total", "sfemu_collection_applied_ts", "sfemu_collection_safe_ts", "sfemu_collection_applied_lag_seconds"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("metric %s missing from %s", want, joined)
		}
	}
	if lag < 1.49 || lag > 1.51 {
		t.Fatalf("safe lag %v, want 1.5s", lag)
	}
}

// Concurrent writers, readers and index workers (run under -race).
func TestConcurrentUse(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items", "table:100", "table:101"), 10).GetSchemaGenerationToken()
	var wg sync.WaitGroup
	for w, part := range []string{"table:100", "table:101"} {
		wg.Add(1)
		go func(w int, part string) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				ts := uint64(100 + i*2)
				id := w*1000 + i
				if _, err := e.Ingest(bg, mb(part, 1, tok, itemUpsert(uint64(i+1), ts, id, "word number", "t", float64(i), []float32{1, float32(i), 0}))); err != nil {
					t.Error(err)
					return
				}
				if _, err := e.AdvancePartition(bg, &apiv1.PartitionProgress{SourcePartition: part, SourceEpoch: 1, ResolvedTs: ts}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w, part)
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "word"}, Vector: &apiv1.VectorQuery{Field: "emb", Vector: []float32{1, 1, 0}}}); err != nil {
					t.Error(err)
					return
				}
				_, _ = e.GetCollection(bg, &apiv1.GetCollectionRequest{Name: "items"})
				_, _ = e.Registry().Gather()
			}
		}()
	}
	wg.Wait()
	e.WaitIndexed()
	r, err := e.Search(bg, &apiv1.SearchRequest{Collection: "items", Text: &apiv1.TextQuery{Query: "word"}, Limit: 1000, MinTs: 198})
	if err != nil || len(r.GetHits()) != 100 {
		t.Fatalf("final search: %d hits, %v", len(r.GetHits()), err)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// E51a: an index that fails stops its modality: applied_ts and safe_ts stay
// put (never advanced over unindexed rows) and the failure is visible.
func TestFailedModalityStallsE51a(t *testing.T) {
	e := openMem(t, Options{})
	tok := mustCreate(t, e, itemsDef("items"), 10).GetSchemaGenerationToken()
	seedItems(t, e, tok)
	e.mu.RLock()
	c := e.colls["items"]
	e.mu.RUnlock()
	if err := c.textIdx.Close(); err != nil { // every later Apply fails
		t.Fatal(err)
	}
	t.Cleanup(func() { // bleve panics on a second Close
		e.mu.Lock()
		c.textIdx = nil
		e.mu.Unlock()
	})
	mustIngest(t, e, mb("table:100", 1, tok, itemUpsert(4, 40, 4, "new", "x", 1, []float32{1, 1, 1})))
	mustAdvance(t, e, "table:100", 1, 50)
	e.WaitIndexed()
	st := status(t, e, "items")
	if st.GetSafeTs() != 30 {
		t.Fatalf("safe_ts %d advanced over a failed text modality", st.GetSafeTs())
	}
	if c.textW.lastErr() == nil {
		t.Fatal("failure not recorded")
	}
	mfs, _ := e.Registry().Gather()
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "sfemu_modality_failed" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "modality" && l.GetValue() == "text" && m.GetGauge().GetValue() == 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Fatal("sfemu_modality_failed{modality=text} != 1")
	}
}
