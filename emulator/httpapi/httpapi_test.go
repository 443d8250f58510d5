package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// fakeBackend records every call and answers from canned state.
type fakeBackend struct {
	mu    sync.Mutex
	calls []string
	reqs  []proto.Message
	// err, when set, is returned by every call.
	err   error
	panic bool
	docs  map[string]*apiv1.Document
}

func (f *fakeBackend) record(name string, req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	f.reqs = append(f.reqs, proto.Clone(req))
	if f.panic {
		panic("boom")
	}
	return f.err
}

func (f *fakeBackend) ncalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeBackend) last() proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func notFound(name string) error {
	return contract.Errf(contract.ReasonCollectionNotFound, "collection", "an active collection", name, "no collection %q", name)
}

func (f *fakeBackend) ListCollections(_ context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	if err := f.record("ListCollections", req); err != nil {
		return nil, err
	}
	return &apiv1.ListCollectionsResponse{Collections: []*apiv1.CollectionStatus{{
		Definition: &apiv1.CollectionDefinition{Name: "books"},
		SafeTs:     42,
	}}}, nil
}

func (f *fakeBackend) GetCollection(_ context.Context, req *apiv1.GetCollectionRequest) (*apiv1.CollectionStatus, error) {
	if err := f.record("GetCollection", req); err != nil {
		return nil, err
	}
	if req.GetName() != "books" {
		return nil, notFound(req.GetName())
	}
	return &apiv1.CollectionStatus{
		Definition: &apiv1.CollectionDefinition{Name: "books"},
		DocCount:   3,
		SafeTs:     42,
		Modalities: []*apiv1.ModalityProgress{{Modality: apiv1.Modality_MODALITY_TEXT, AppliedTs: 40}},
	}, nil
}

func (f *fakeBackend) GetDocument(_ context.Context, req *apiv1.GetDocumentRequest) (*apiv1.GetDocumentResponse, error) {
	if err := f.record("GetDocument", req); err != nil {
		return nil, err
	}
	if req.GetCollection() != "books" {
		return nil, notFound(req.GetCollection())
	}
	if req.GetMinTs() > 42 {
		return nil, contract.Errf(contract.ReasonNotYetFresh, "min_ts", "safe_ts >= 100", "42", "not yet fresh")
	}
	d, ok := f.docs[req.GetPrimaryKey()]
	return &apiv1.GetDocumentResponse{Found: ok, Document: d, ReadTs: 42}, nil
}

func (f *fakeBackend) Search(_ context.Context, req *apiv1.SearchRequest) (*apiv1.SearchResponse, error) {
	if err := f.record("Search", req); err != nil {
		return nil, err
	}
	if req.GetCollection() != "books" {
		return nil, notFound(req.GetCollection())
	}
	if req.GetText() == nil && req.GetVector() == nil && len(req.GetFilters()) == 0 {
		return nil, contract.Errf(contract.ReasonInvalidQuery, "text", "one of text, vector, filters", "none", "empty search")
	}
	return &apiv1.SearchResponse{Hits: []*apiv1.SearchHit{{PrimaryKey: "1", Score: 1.5}}, ReadTs: 42, Total: 1}, nil
}

func (f *fakeBackend) GetProgress(_ context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	if err := f.record("GetProgress", req); err != nil {
		return nil, err
	}
	return &apiv1.GetProgressResponse{Partitions: []*apiv1.PartitionState{{SourcePartition: "table:1", Collection: "books", SourceEpoch: 2, LastSeq: 9, ResolvedTs: 41}}}, nil
}

type harness struct {
	t    *testing.T
	fake *fakeBackend
	srv  *Server
	tok  string
}

func start(t *testing.T, opts Options) *harness {
	t.Helper()
	fake := &fakeBackend{docs: map[string]*apiv1.Document{
		"1":     {PrimaryKey: "1", CommitTs: 40, Fields: map[string]*apiv1.Value{"title": {Kind: &apiv1.Value_StringValue{StringValue: "Dune"}}}},
		"a/b c": {PrimaryKey: "a/b c", CommitTs: 41},
	}}
	if opts.Backend == nil {
		opts.Backend = fake
	}
	h, err := New(opts)
	require.NoError(t, err)
	srv, err := Start("127.0.0.1:0", h)
	require.NoError(t, err)
	t.Cleanup(func() {
		// A connection the client dialed but never sent a request on is
		// "new" to the server, and Shutdown treats new connections as idle
		// only after 5 s: close the client's spare connections first so a
		// clean shutdown does not race that threshold.
		http.DefaultClient.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
	})
	return &harness{t: t, fake: fake, srv: srv, tok: opts.Token}
}

type reply struct {
	code   int
	header http.Header
	body   string
	json   map[string]any
}

func (h *harness) do(method, path, body string, hdr ...string) reply {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL()+path, rd)
	require.NoError(h.t, err)
	if h.tok != "" {
		req.Header.Set("Authorization", "Bearer "+h.tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	r := reply{code: resp.StatusCode, header: resp.Header, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(h.t, json.Unmarshal(b, &r.json), "body %s", b)
	}
	return r
}

func requireErr(t *testing.T, r reply, code int, reason string) {
	t.Helper()
	require.Equal(t, code, r.code, "body: %s", r.body)
	require.Equal(t, reason, r.json["reason"], "body: %s", r.body)
}

// H2: /healthz answers without a token even when one is configured.
func TestHealthzNoAuth(t *testing.T) {
	h := start(t, Options{Token: "s3cret"})
	h.tok = ""
	r := h.do("GET", "/healthz", "")
	require.Equal(t, 200, r.code)
	require.Equal(t, "ok", r.json["status"])
	require.Zero(t, h.fake.ncalls())
}

// H3: every other endpoint needs the bearer token; a missing or wrong token
// is a 401 that never reaches the backend.
func TestBearerToken(t *testing.T) {
	h := start(t, Options{Token: "s3cret"})
	paths := []struct{ method, path, body string }{
		{"GET", "/v1/collections", ""},
		{"GET", "/v1/collections/books", ""},
		{"GET", "/v1/collections/books/docs/1", ""},
		{"POST", "/v1/collections/books/search", `{"text":{"query":"x"}}`},
		{"GET", "/v1/progress", ""},
		{"GET", "/metrics", ""},
		{"GET", "/no/such/path", ""},
	}
	for _, p := range paths {
		r := h.do(p.method, p.path, p.body, "Authorization", "")
		requireErr(t, r, 401, "UNAUTHORIZED")
		require.Equal(t, `Bearer realm="sfemu"`, r.header.Get("WWW-Authenticate"), p.path)
		r = h.do(p.method, p.path, p.body, "Authorization", "Bearer wrong")
		requireErr(t, r, 401, "UNAUTHORIZED")
		require.Contains(t, r.header.Get("WWW-Authenticate"), "invalid_token")
		r = h.do(p.method, p.path, p.body, "Authorization", "Basic czNjcmV0")
		requireErr(t, r, 401, "UNAUTHORIZED")
	}
	require.Zero(t, h.fake.ncalls(), "rejected requests must not touch the backend")

	r := h.do("GET", "/v1/collections", "")
	require.Equal(t, 200, r.code, r.body)
	r = h.do("GET", "/v1/collections", "", "Authorization", "bearer s3cret")
	require.Equal(t, 200, r.code, "scheme is case-insensitive: %s", r.body)
	require.Equal(t, 2, h.fake.ncalls())
}

// H4, H9: protojson bodies with proto names and 64-bit integers as strings.
func TestCollectionsAndProgress(t *testing.T) {
	h := start(t, Options{})
	r := h.do("GET", "/v1/collections", "")
	require.Equal(t, 200, r.code)
	cs := r.json["collections"].([]any)
	require.Len(t, cs, 1)
	require.Equal(t, "42", cs[0].(map[string]any)["safe_ts"])
	require.False(t, h.fake.last().(*apiv1.ListCollectionsRequest).GetIncludeDropped())

	r = h.do("GET", "/v1/collections?include_dropped=true", "")
	require.Equal(t, 200, r.code)
	require.True(t, h.fake.last().(*apiv1.ListCollectionsRequest).GetIncludeDropped())
	requireErr(t, h.do("GET", "/v1/collections?include_dropped=maybe", ""), 400, "MALFORMED_REQUEST")
	r = h.do("GET", "/v1/collections?includeDropped=true", "")
	requireErr(t, r, 400, "MALFORMED_REQUEST")
	require.Equal(t, "includeDropped", r.json["field"])

	r = h.do("GET", "/v1/collections/books", "")
	require.Equal(t, 200, r.code)
	require.Equal(t, "3", r.json["doc_count"])
	require.Equal(t, "42", r.json["safe_ts"])
	mods := r.json["modalities"].([]any)
	require.Equal(t, "MODALITY_TEXT", mods[0].(map[string]any)["modality"])
	require.Equal(t, "40", mods[0].(map[string]any)["applied_ts"])
	require.Contains(t, r.json, "tombstone_count", "unpopulated fields are emitted")

	r = h.do("GET", "/v1/collections/nope", "")
	requireErr(t, r, 404, "COLLECTION_NOT_FOUND")
	require.Equal(t, "nope", r.json["actual"])

	r = h.do("GET", "/v1/progress?partition=table:1&partition=table:2", "")
	require.Equal(t, 200, r.code)
	require.Equal(t, []string{"table:1", "table:2"}, h.fake.last().(*apiv1.GetProgressRequest).GetSourcePartitions())
	p := r.json["partitions"].([]any)[0].(map[string]any)
	require.Equal(t, "9", p["last_seq"])
	require.Equal(t, "table:1", p["source_partition"])
}

// H8: documents by (escaped) primary key; a missing document is a 404 that
// still carries read_ts; min_ts is passed through; NOT_YET_FRESH is 503.
func TestGetDocument(t *testing.T) {
	h := start(t, Options{})
	r := h.do("GET", "/v1/collections/books/docs/1", "")
	require.Equal(t, 200, r.code, r.body)
	require.Equal(t, "42", r.header.Get("X-Sfemu-Read-Ts"))
	require.Equal(t, true, r.json["found"])
	doc := r.json["document"].(map[string]any)
	require.Equal(t, "Dune", doc["fields"].(map[string]any)["title"].(map[string]any)["string_value"])

	r = h.do("GET", "/v1/collections/books/docs/"+url.PathEscape("a/b c"), "")
	require.Equal(t, 200, r.code, r.body)
	require.Equal(t, "a/b c", h.fake.last().(*apiv1.GetDocumentRequest).GetPrimaryKey())
	r = h.do("GET", "/v1/collections/books/docs/a/b%20c", "")
	require.Equal(t, 200, r.code, "unescaped slash in the key also works: %s", r.body)

	r = h.do("GET", "/v1/collections/books/docs/missing", "")
	require.Equal(t, 404, r.code)
	require.Equal(t, false, r.json["found"])
	require.Equal(t, "42", r.json["read_ts"])

	r = h.do("GET", "/v1/collections/books/docs/1?min_ts=40", "")
	require.Equal(t, 200, r.code)
	require.EqualValues(t, 40, h.fake.last().(*apiv1.GetDocumentRequest).GetMinTs())
	r = h.do("GET", "/v1/collections/books/docs/1?min_ts=100", "")
	requireErr(t, r, 503, "NOT_YET_FRESH")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Equal(t, "42", r.json["actual"])
	r = h.do("GET", "/v1/collections/books/docs/1?min_ts=-1", "")
	requireErr(t, r, 400, "MALFORMED_REQUEST")
	require.Equal(t, "min_ts", r.json["field"])

	requireErr(t, h.do("GET", "/v1/collections/nope/docs/1", ""), 404, "COLLECTION_NOT_FOUND")
	requireErr(t, h.do("GET", "/v1/collections/books/docs/", ""), 400, "MALFORMED_REQUEST")
}

// H5, H6, H7: search body parsing, limits, and error mapping.
func TestSearch(t *testing.T) {
	h := start(t, Options{MaxBodyBytes: 1024})
	body := `{"text":{"query":"dune","fields":["title"]},"vector":{"field":"emb","vector":[0.5,1]},"limit":5,"min_ts":"40","filters":[{"field":"year","op":"FILTER_OP_GT","value":{"int64_value":"1960"}}]}`
	r := h.do("POST", "/v1/collections/books/search", body, "Content-Type", "application/json; charset=utf-8")
	require.Equal(t, 200, r.code, r.body)
	require.Equal(t, "42", r.header.Get("X-Sfemu-Read-Ts"))
	got := h.fake.last().(*apiv1.SearchRequest)
	require.Equal(t, "books", got.GetCollection(), "collection comes from the path")
	require.Equal(t, "dune", got.GetText().GetQuery())
	require.Equal(t, []float32{0.5, 1}, got.GetVector().GetVector())
	require.EqualValues(t, 5, got.GetLimit())
	require.EqualValues(t, 40, got.GetMinTs())
	require.Equal(t, apiv1.FilterOp_FILTER_OP_GT, got.GetFilters()[0].GetOp())
	hits := r.json["hits"].([]any)
	require.Equal(t, "1", hits[0].(map[string]any)["primary_key"])
	require.Equal(t, 1.5, hits[0].(map[string]any)["score"])

	// lowerCamelCase JSON names are accepted too (protojson).
	r = h.do("POST", "/v1/collections/books/search", `{"text":{"query":"x"},"minTs":7}`)
	require.Equal(t, 200, r.code, r.body)
	require.EqualValues(t, 7, h.fake.last().(*apiv1.SearchRequest).GetMinTs())

	r = h.do("POST", "/v1/collections/books/search", `{"collection":"other","text":{"query":"x"}}`)
	requireErr(t, r, 400, "MALFORMED_REQUEST")
	require.Equal(t, "books", r.json["expected"])
	require.Equal(t, "other", r.json["actual"])

	n := h.fake.ncalls()
	r = h.do("POST", "/v1/collections/books/search", `{"text":`)
	requireErr(t, r, 400, "MALFORMED_REQUEST")
	require.Contains(t, r.json["message"], "invalid SearchRequest JSON")
	r = h.do("POST", "/v1/collections/books/search", `{"txet":{"query":"x"}}`)
	requireErr(t, r, 400, "MALFORMED_REQUEST")
	require.Contains(t, r.json["message"], "txet")
	requireErr(t, h.do("POST", "/v1/collections/books/search", `{"limit":"many"}`), 400, "MALFORMED_REQUEST")
	requireErr(t, h.do("POST", "/v1/collections/books/search", ""), 400, "MALFORMED_REQUEST")
	r = h.do("POST", "/v1/collections/books/search", `{"text":{"query":"`+strings.Repeat("a", 2000)+`"}}`)
	requireErr(t, r, 413, "REQUEST_TOO_LARGE")
	require.Equal(t, "<= 1024 bytes", r.json["expected"])
	requireErr(t, h.do("POST", "/v1/collections/books/search", `{}`, "Content-Type", "text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
	requireErr(t, h.do("POST", "/v1/collections/books/search?min_ts=5", `{}`), 400, "MALFORMED_REQUEST")
	require.Equal(t, n, h.fake.ncalls(), "malformed requests must not reach the backend")

	// Contract errors from the backend keep field/expected/actual.
	r = h.do("POST", "/v1/collections/books/search", `{}`)
	requireErr(t, r, 400, "INVALID_QUERY")
	require.Equal(t, "none", r.json["actual"])
	requireErr(t, h.do("POST", "/v1/collections/nope/search", `{"text":{"query":"x"}}`), 404, "COLLECTION_NOT_FOUND")

	r = h.do("GET", "/v1/collections/books/search", "")
	requireErr(t, r, 405, "METHOD_NOT_ALLOWED")
	require.Equal(t, "POST", r.header.Get("Allow"))
	r = h.do("DELETE", "/v1/collections/books", "")
	requireErr(t, r, 405, "METHOD_NOT_ALLOWED")
	require.Equal(t, "GET, HEAD", r.header.Get("Allow"))
	requireErr(t, h.do("GET", "/v2/whatever", ""), 404, "NOT_FOUND")
}

// H10, H11: non-contract errors are 500 INTERNAL; a panicking backend is a
// 500 and the server keeps serving.
func TestInternalErrorsAndPanics(t *testing.T) {
	h := start(t, Options{})
	h.fake.err = errors.New("disk on fire")
	r := h.do("GET", "/v1/collections", "")
	requireErr(t, r, 500, "INTERNAL")
	require.Equal(t, "disk on fire", r.json["message"])
	h.fake.err = nil
	h.fake.panic = true
	r = h.do("GET", "/v1/progress", "")
	requireErr(t, r, 500, "INTERNAL")
	require.Contains(t, r.json["message"], "boom")
	h.fake.panic = false
	require.Equal(t, 200, h.do("GET", "/v1/progress", "").code)

	h.fake.err = context.DeadlineExceeded
	requireErr(t, h.do("GET", "/v1/progress", ""), 503, "NOT_YET_FRESH")
	h.fake.err = nil

	// Error bodies echo input; invalid UTF-8 is replaced, not a 500.
	r = h.do("POST", "/v1/collections/books/search", "\xff\xfe")
	requireErr(t, r, 400, "MALFORMED_REQUEST")
}

// H12: /metrics exposes the API's request metrics and the given gatherer's.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sfemu_test_backend_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	h := start(t, Options{Gatherer: reg, Token: "t"})
	h.do("GET", "/v1/collections/nope", "")
	h.do("GET", "/v1/collections/books", "")
	r := h.do("GET", "/metrics", "")
	require.Equal(t, 200, r.code)
	require.Contains(t, r.header.Get("Content-Type"), "text/plain")
	require.Contains(t, r.body, "sfemu_test_backend_total 3")
	require.Contains(t, r.body, `sfemu_http_requests_total{code="404",route="get_collection"} 1`)
	require.Contains(t, r.body, `sfemu_http_requests_total{code="200",route="get_collection"} 1`)
	require.Contains(t, r.body, `sfemu_http_request_seconds_bucket{route="get_collection"`)
}

// H7: the status table of specs/emulator-contract.md §7.
func TestStatusFor(t *testing.T) {
	cases := map[contract.Reason]int{
		contract.ReasonInvalidMeta: 400, contract.ReasonInvalidDefinition: 400, contract.ReasonUnspecifiedPolicy: 400,
		contract.ReasonInvalidZeroState: 400, contract.ReasonInvalidBatch: 400, contract.ReasonInvalidMutation: 400,
		contract.ReasonUnknownField: 400, contract.ReasonTypeMismatch: 400, contract.ReasonPrimaryKeyMismatch: 400,
		contract.ReasonInvalidQuery: 400, contract.ReasonInvalidArgument: 400,
		contract.ReasonCollectionNotFound: 404,
		contract.ReasonAlreadyExists:      409, contract.ReasonIdempotencyConflict: 409, contract.ReasonPartitionConflict: 409,
		contract.ReasonFenceMismatch: 409, contract.ReasonNonMonotonicSchema: 409, contract.ReasonPolicyTooWeak: 409,
		contract.ReasonPartitionNotMapped: 409, contract.ReasonEpochRegression: 409, contract.ReasonSeqGap: 409,
		contract.ReasonSeqOverlap: 409, contract.ReasonStaleGeneration: 409, contract.ReasonProgressRegression: 409,
		contract.ReasonNotYetFresh: 503, contract.ReasonClosed: 503,
		contract.ReasonInternal: 500, contract.Reason("SOMETHING_NEW"): 500,
		ReasonUnauthorized: 401, ReasonRequestTooLarge: 413, ReasonMalformedRequest: 400,
	}
	for r, code := range cases {
		require.Equal(t, code, StatusFor(r), r)
	}
}

// H1: an empty host binds loopback; explicit hosts are kept.
func TestLoopbackAddr(t *testing.T) {
	for in, want := range map[string]string{
		"":             DefaultAddr,
		":8480":        "127.0.0.1:8480",
		"0.0.0.0:1":    "0.0.0.0:1",
		"[::1]:9":      "[::1]:9",
		"localhost:10": "localhost:10",
	} {
		got, err := LoopbackAddr(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	_, err := LoopbackAddr("nonsense")
	require.Error(t, err)
	require.True(t, IsLoopback("127.0.0.1:1"))
	require.True(t, IsLoopback("[::1]:1"))
	require.True(t, IsLoopback("localhost:1"))
	require.False(t, IsLoopback("0.0.0.0:1"))
	require.False(t, IsLoopback("10.1.2.3:1"))

	h, err := New(Options{Backend: &fakeBackend{}})
	require.NoError(t, err)
	srv, err := Start(":0", h)
	require.NoError(t, err)
	require.True(t, IsLoopback(srv.Addr()), srv.Addr())
	require.NoError(t, srv.Shutdown(context.Background()))
	require.NoError(t, srv.Err())

	_, err = New(Options{})
	require.ErrorContains(t, err, "Backend is required")
}

// The handler is safe under concurrent requests (run with -race).
func TestConcurrentRequests(t *testing.T) {
	h := start(t, Options{Token: "t"})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				req, _ := http.NewRequest("POST", h.srv.URL()+"/v1/collections/books/search", strings.NewReader(`{"text":{"query":"x"}}`))
				req.Header.Set("Authorization", "Bearer t")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 160, h.fake.ncalls())
}
