package httpapi

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

func ts(at time.Time) uint64 { return uint64(at.UnixMilli()) << 18 }

// statusBackend serves collections and partitions the test changes.
type statusBackend struct {
	*fakeBackend
	mu    sync.Mutex
	cols  []*apiv1.CollectionStatus
	parts []*apiv1.PartitionState
}

func (b *statusBackend) ListCollections(context.Context, *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &apiv1.ListCollectionsResponse{Collections: b.cols}, nil
}

func (b *statusBackend) GetProgress(context.Context, *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &apiv1.GetProgressResponse{Partitions: b.parts}, nil
}

func (b *statusBackend) set(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

type fakeProvider struct {
	mu sync.Mutex
	ps ProviderStatus
}

func (p *fakeProvider) Status(context.Context) ProviderStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ps
}

func collection(name string, docs, safe uint64, version, ddlTs uint64, policy apiv1.SchemaUpdatePolicy) *apiv1.CollectionStatus {
	return &apiv1.CollectionStatus{
		Definition: &apiv1.CollectionDefinition{Name: name},
		Lineage:    &apiv1.Lineage{SchemaVersion: version, LastDdlCommitTs: ddlTs, LastUpdatePolicy: policy, Generation: 1},
		DocCount:   docs, SafeTs: safe,
		Modalities: []*apiv1.ModalityProgress{{Modality: apiv1.Modality_MODALITY_DOCUMENT, AppliedTs: safe}, {Modality: apiv1.Modality_MODALITY_TEXT, AppliedTs: safe}},
	}
}

// H15, H16: the status document joins the emulator's collections and
// partitions, the provider's upstream, adapter, DDL statements and errors,
// and the sampled plot; lags are measured against the upstream's ts.
func TestBoardStatus(t *testing.T) {
	ctx := context.Background()
	be := &statusBackend{fakeBackend: &fakeBackend{}}
	create := apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION
	be.cols = []*apiv1.CollectionStatus{
		collection("demo.products", 10, ts(t0.Add(-2*time.Second)), 5, ts(t0.Add(-time.Hour)), create),
		collection("demo.events", 7, ts(t0.Add(-500*time.Millisecond)), 3, ts(t0.Add(-time.Hour)), create),
	}
	be.parts = []*apiv1.PartitionState{{SourcePartition: "table:9", Collection: "demo.products", SourceEpoch: 2, LastSeq: 40, ResolvedTs: ts(t0.Add(-3 * time.Second))}}
	reg := prometheus.NewRegistry()
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sfemu_ingest_mutations_total"}, []string{"collection", "effect"})
	reg.MustRegister(rows)
	prov := &fakeProvider{ps: ProviderStatus{
		Upstream: &UpstreamStatus{Mode: "embedded", Address: "127.0.0.1:2379", CurrentTs: ts(t0)},
		Adapter:  &AdapterStatus{State: AdapterStreaming, Epoch: 2, StartTs: ts(t0.Add(-time.Minute)), CheckpointTs: ts(t0.Add(-time.Minute))},
		Errors:   []ErrorRow{{At: t0, Message: "adapter restarted: table set changed"}},
	}}
	b := NewBoard(BoardConfig{Backend: be, Provider: prov, Gatherer: reg, Window: 10 * time.Second, Every: time.Second})

	require.NoError(t, b.Sample(ctx, t0))
	for i := 1; i <= 3; i++ {
		rows.WithLabelValues("demo.products", "applied").Add(100)
		now := t0.Add(time.Duration(i) * time.Second)
		prov.mu.Lock()
		prov.ps.Upstream.CurrentTs = ts(now)
		prov.ps.Adapter.CheckpointTs = ts(t0.Add(-time.Minute + time.Duration(i)*10*time.Second)) // 10 s of upstream per second
		prov.mu.Unlock()
		require.NoError(t, b.Sample(ctx, now))
	}
	// An ADD COLUMN on products: the lineage moves, the adapter reports
	// the statement at the same ts.
	alterTs := ts(t0.Add(3 * time.Second))
	be.set(func() {
		be.cols[0] = collection("demo.products", 10, ts(t0.Add(2*time.Second)), 6, alterTs, apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_ADDITIVE)
	})
	prov.mu.Lock()
	prov.ps.DDLs = []DDLEvent{{Ts: alterTs, Table: "demo.products", Query: "ALTER TABLE products ADD COLUMN note TEXT"}, {Ts: alterTs + 5, Table: "demo.other", Query: "CREATE TABLE other (id INT PRIMARY KEY)"}}
	prov.mu.Unlock()
	now := t0.Add(4 * time.Second)
	require.NoError(t, b.Sample(ctx, now))

	doc, err := b.Status(ctx, now)
	require.NoError(t, err)
	require.Equal(t, "embedded", doc.Upstream.Mode)
	require.Len(t, doc.Collections, 2)
	require.Equal(t, "demo.events", doc.Collections[0].Name, "sorted by name")
	p := doc.Collections[1]
	require.Equal(t, uint64(10), p.Documents)
	require.Equal(t, uint64(6), p.SchemaVersion)
	require.InDelta(t, 1.0, *p.SafeLag, 1e-9, "upstream at t0+3s, safe_ts at t0+2s")
	require.Equal(t, "document", p.Applied[0].Modality)
	require.Len(t, doc.Partitions, 1)
	require.Equal(t, uint64(40), doc.Partitions[0].LastSeq)
	require.InDelta(t, 6.0, *doc.Partitions[0].Lag, 1e-9)

	// The plot: 4 rates (5 samples), 100 rows/s after the first.
	pts := doc.Series.Points
	require.Len(t, pts, 4)
	require.InDelta(t, 100, pts[0].RowsPerSec, 1e-9)
	require.InDelta(t, 0, pts[3].RowsPerSec, 1e-9)
	require.InDelta(t, 3.0, pts[0].SafeLag["demo.products"], 1e-9)

	// DDLs newest first: the unmatched CREATE, the ALTER with its policy and
	// statement, then the creations seen on the first sample.
	require.Len(t, doc.DDLs, 4)
	require.Equal(t, "CREATE TABLE other (id INT PRIMARY KEY)", doc.DDLs[0].Query)
	require.Empty(t, doc.DDLs[0].Policy, "it changed no collection")
	require.Equal(t, "demo.products", doc.DDLs[1].Collection)
	require.Equal(t, "SCHEMA_UPDATE_POLICY_ADDITIVE", doc.DDLs[1].Policy)
	require.Equal(t, "ALTER TABLE products ADD COLUMN note TEXT", doc.DDLs[1].Query)
	require.Equal(t, "SCHEMA_UPDATE_POLICY_INITIAL_CREATION", doc.DDLs[2].Policy)

	// H17: the adapter catches up from its start ts to the upstream ts seen
	// when it was first observed (60 s of backlog, 30 s replayed at 10 s
	// per second, then a second without progress: the smoothed rate is 7).
	a := doc.Adapter
	require.Equal(t, AdapterStreaming, a.State)
	require.InDelta(t, 33, *a.CheckpointLag, 1e-9)
	require.NotNil(t, a.Progress)
	require.Equal(t, "catch-up", a.Progress.What)
	require.InDelta(t, 30, a.Progress.Done, 1e-9)
	require.InDelta(t, 60, a.Progress.Total, 1e-9)
	require.InDelta(t, 7, a.Progress.Rate, 1e-9)
	require.InDelta(t, 30.0/7, *a.Progress.ETASeconds, 1e-9)
	require.Equal(t, "catch-up 50% (30.0s/60.0s) at 7.0s/s ETA 4s", a.Progress.Line())
	require.Len(t, doc.Errors, 1)

	// The JSON: ts as strings, undefined lags left out.
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"safe_ts":"`)
	require.Contains(t, string(raw), `"current_ts":"`)

	// Caught up: no progress.
	prov.mu.Lock()
	prov.ps.Adapter.CheckpointTs = ts(t0.Add(time.Second))
	prov.mu.Unlock()
	doc, err = b.Status(ctx, now)
	require.NoError(t, err)
	require.Nil(t, doc.Adapter.Progress)
	// The plot window drops old points.
	doc, err = b.Status(ctx, t0.Add(12*time.Second))
	require.NoError(t, err)
	require.Len(t, doc.Series.Points, 2)
}

// H17: progress lines, with and without a rate.
func TestProgressLine(t *testing.T) {
	require.Equal(t, "rebuild 25% (250 docs/1000 docs) at 50 docs/s ETA 15s", NewProgress("rebuild", "docs", 250, 1000, 50).Line())
	p := NewProgress("snapshot", "rows", 0, 10, 0)
	require.Nil(t, p.ETASeconds)
	require.Equal(t, "snapshot 0% (0 rows/10 rows) at 0 rows/s ETA unknown", p.Line())
}

// H15: GET / is the embedded page; its assets come from the same origin
// and the page fetches nothing from elsewhere; /v1/status answers JSON.
func TestStatusPageServed(t *testing.T) {
	h := start(t, Options{})
	r := h.do("GET", "/", "")
	require.Equal(t, 200, r.code)
	require.Contains(t, r.header.Get("Content-Type"), "text/html")
	require.Contains(t, r.header.Get("Content-Security-Policy"), "default-src 'self'")
	require.Contains(t, r.body, `<script src="/ui/app.js"`)
	for _, asset := range []string{"/ui/app.js", "/ui/style.css"} {
		r = h.do("GET", asset, "")
		require.Equal(t, 200, r.code, asset)
	}
	requireErr(t, h.do("GET", "/nothing-here", ""), 404, "NOT_FOUND")
	r = h.do("GET", "/v1/status?pretty", "")
	require.Equal(t, 200, r.code, r.body)
	require.Contains(t, r.body, "\n  \"collections\"")
	require.Len(t, r.json["collections"], 1)
	require.Empty(t, r.json["series"].(map[string]any)["points"], "nobody samples this board")
	requireErr(t, h.do("GET", "/v1/status?x=1", ""), 400, "MALFORMED_REQUEST")

	// No asset names another origin (the SVG namespace is an identifier,
	// not a fetch).
	require.NoError(t, fs.WalkDir(uiFiles, "ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFiles.ReadFile(path)
		require.NoError(t, err)
		s := strings.ReplaceAll(string(b), `"http://www.w3.org/2000/svg"`, "")
		require.NotContains(t, s, "http://", path)
		require.NotContains(t, s, "https://", path)
		require.NotContains(t, s, "//cdn", path)
		return nil
	}))
}

// H17: a rebuild beside the serving generation (E58) shows as progress on
// its collection, with the rate across samples.
func TestBoardRebuildProgress(t *testing.T) {
	ctx := context.Background()
	be := &statusBackend{fakeBackend: &fakeBackend{}}
	c := collection("demo.products", 10, ts(t0), 2, ts(t0), apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_REBUILD_FULL)
	c.Rebuild = &apiv1.RebuildStatus{Generation: 3, ServingGeneration: 2, Percent: 10}
	be.cols = []*apiv1.CollectionStatus{c}
	b := NewBoard(BoardConfig{Backend: be})
	require.NoError(t, b.Sample(ctx, t0))
	be.set(func() { be.cols[0].Rebuild = &apiv1.RebuildStatus{Generation: 3, ServingGeneration: 2, Percent: 30} })
	require.NoError(t, b.Sample(ctx, t0.Add(2*time.Second)))
	doc, err := b.Status(ctx, t0.Add(2*time.Second))
	require.NoError(t, err)
	rb := doc.Collections[0].Rebuild
	require.NotNil(t, rb)
	require.Equal(t, "rebuild of generation 3 (serving 2) 30% (30%/100%) at 10%/s ETA 7s", rb.Line())
	be.set(func() { be.cols[0].Rebuild = nil })
	require.NoError(t, b.Sample(ctx, t0.Add(3*time.Second)))
	doc, err = b.Status(ctx, t0.Add(3*time.Second))
	require.NoError(t, err)
	require.Nil(t, doc.Collections[0].Rebuild)
}
