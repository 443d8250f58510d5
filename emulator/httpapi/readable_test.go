package httpapi

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// typedBackend answers GetCollection with a vector, an INT and a synthetic
// field, and Search with hits that carry both legs' scores and fields.
type typedBackend struct{ *fakeBackend }

func (b typedBackend) GetCollection(ctx context.Context, req *apiv1.GetCollectionRequest) (*apiv1.CollectionStatus, error) {
	if _, err := b.fakeBackend.GetCollection(ctx, req); err != nil {
		return nil, err
	}
	return &apiv1.CollectionStatus{
		Definition: &apiv1.CollectionDefinition{Name: "books", Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY, SourceColumnId: 1},
			{Name: "emb", Type: apiv1.FieldType_FIELD_TYPE_VECTOR, Role: apiv1.FieldRole_FIELD_ROLE_VECTOR, VectorDim: 3, SourceColumnId: 2},
			{Name: "_synthetic", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_STORED_ONLY},
		}},
		DocCount: 3,
	}, nil
}

func (b typedBackend) Search(ctx context.Context, req *apiv1.SearchRequest) (*apiv1.SearchResponse, error) {
	if _, err := b.fakeBackend.Search(ctx, req); err != nil {
		return nil, err
	}
	return &apiv1.SearchResponse{Hits: []*apiv1.SearchHit{{PrimaryKey: "1", Score: 1.5, TextScore: 1.5,
		Fields: map[string]*apiv1.Value{"title": {Kind: &apiv1.Value_StringValue{StringValue: "Dune"}}}}}, ReadTs: 42, Total: 1}, nil
}

func startTyped(t *testing.T) *harness {
	fb := &fakeBackend{}
	h := start(t, Options{Backend: typedBackend{fb}})
	h.fake = fb
	return h
}

// H4: fields that do not apply are left out; zero values that are facts
// stay.
func TestNotApplicableFieldsLeftOut(t *testing.T) {
	h := startTyped(t)
	r := h.do("GET", "/v1/collections/books", "")
	require.Equal(t, 200, r.code, r.body)
	fields := r.json["definition"].(map[string]any)["fields"].([]any)
	id, emb, syn := fields[0].(map[string]any), fields[1].(map[string]any), fields[2].(map[string]any)
	require.NotContains(t, id, "vector_dim", "INT field: %s", r.body)
	require.NotContains(t, id, "vector_metric", "INT field: %s", r.body)
	require.Equal(t, "FIELD_TYPE_INT", id["type"])
	require.Equal(t, "1", id["source_column_id"])
	require.Equal(t, float64(3), emb["vector_dim"])
	require.Equal(t, "VECTOR_METRIC_UNSPECIFIED", emb["vector_metric"], "a VECTOR field keeps its metric (UNSPECIFIED means COSINE)")
	require.NotContains(t, syn, "source_column_id", "a synthetic field has no column")
	require.Contains(t, r.json, "tombstone_count", "a zero count is a fact and stays")
	require.NotContains(t, r.body, "VECTOR_METRIC_UNSPECIFIED\",\"source_column_id\":\"1\"")

	// Search hits: a text-only search has no vector_distance; keys_only has
	// no fields.
	r = h.do("POST", "/v1/collections/books/search", `{"text":{"query":"dune"}}`)
	require.Equal(t, 200, r.code, r.body)
	hit := r.json["hits"].([]any)[0].(map[string]any)
	require.Contains(t, hit, "text_score")
	require.NotContains(t, hit, "vector_distance")
	require.Contains(t, hit, "fields")
	r = h.do("POST", "/v1/collections/books/search", `{"vector":{"field":"emb","vector":[1,0,0]},"keys_only":true}`)
	require.Equal(t, 200, r.code, r.body)
	hit = r.json["hits"].([]any)[0].(map[string]any)
	require.NotContains(t, hit, "text_score")
	require.Contains(t, hit, "vector_distance")
	require.NotContains(t, hit, "fields")
	// The request's rules do not leak into the next request.
	r = h.do("POST", "/v1/collections/books/search", `{"filters":[{"field":"id","op":"FILTER_OP_EQ","values":[{"int64_value":"1"}]}]}`)
	require.Equal(t, 200, r.code, r.body)
	hit = r.json["hits"].([]any)[0].(map[string]any)
	require.NotContains(t, hit, "text_score")
	require.Contains(t, hit, "fields")
}

// H13: ?pretty indents every JSON body (answers, errors, /healthz); the
// content is the same as without it.
func TestPretty(t *testing.T) {
	h := startTyped(t)
	for _, p := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""},
		{"GET", "/v1/collections", ""},
		{"GET", "/v1/collections/books", ""},
		{"GET", "/v1/collections/books/docs/1", ""},
		{"POST", "/v1/collections/books/search", `{"text":{"query":"x"}}`},
		{"GET", "/v1/progress", ""},
		{"GET", "/v1/collections/nope", ""},
		{"GET", "/no/such/path", ""},                                                   // 404 NOT_FOUND (H11)
		{"DELETE", "/v1/progress", ""},                                                 // 405 METHOD_NOT_ALLOWED (H11)
		{"POST", "/v1/collections/books/search", `{"text":{"query":"x"},"offset":-1}`}, // 400 INVALID_QUERY
	} {
		compact := h.do(p.method, p.path, p.body)
		sep := "?"
		if strings.Contains(p.path, "?") {
			sep = "&"
		}
		pretty := h.do(p.method, p.path+sep+"pretty", p.body)
		require.Equal(t, compact.code, pretty.code, p.path)
		require.Equal(t, compact.json, pretty.json, "%s: same content", p.path)
		require.Contains(t, pretty.body, "\n  \"", "%s is indented: %s", p.path, pretty.body)
		require.Equal(t, 1, strings.Count(compact.body, "\n"), "%s is one line without ?pretty: %s", p.path, compact.body)
		explicit := h.do(p.method, p.path+sep+"pretty=true", p.body)
		require.Equal(t, pretty.body, explicit.body)
		off := h.do(p.method, p.path+sep+"pretty=false", p.body)
		require.Equal(t, compact.body, off.body)
	}
	r := h.do("GET", "/v1/collections?pretty=very", "")
	requireErr(t, r, 400, "MALFORMED_REQUEST")
	require.Equal(t, "pretty", r.json["field"])
}

// H12: the standard go_* and process_* families are in the scrape with the
// emulator's and the API's own.
func TestRuntimeCollectors(t *testing.T) {
	h := start(t, Options{})
	r := h.do("GET", "/metrics", "")
	require.Equal(t, 200, r.code)
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		require.Contains(t, r.body, "\n"+name+" ", "metric %s missing", name)
	}
	require.Empty(t, r.header.Get("X-Sfemu-Metrics-Error"))
}

// H14: /debug/pprof/* is served when Options.Pprof is on (behind the
// token), and 404 when it is off.
func TestPprof(t *testing.T) {
	on := start(t, Options{Pprof: true, Token: "t"})
	r := on.do("GET", "/debug/pprof/", "")
	require.Equal(t, 200, r.code)
	require.Contains(t, r.body, "goroutine")
	r = on.do("GET", "/debug/pprof/goroutine?debug=1", "")
	require.Equal(t, 200, r.code)
	require.Contains(t, r.body, "goroutine profile")
	r = on.do("GET", "/debug/pprof/cmdline", "")
	require.Equal(t, 200, r.code)
	on.tok = ""
	requireErr(t, on.do("GET", "/debug/pprof/", ""), 401, "UNAUTHORIZED")

	off := start(t, Options{})
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		requireErr(t, off.do("GET", p, ""), 404, "NOT_FOUND")
	}
}
