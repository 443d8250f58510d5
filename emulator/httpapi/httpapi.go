// Package httpapi is the emulator's HTTP/JSON API: read-only collection,
// document, search and progress endpoints with protojson bodies (the
// messages of emulator/api/v1), plus /healthz and Prometheus /metrics.
//
// Routes (rules H1..H12 in specs/emulator-http.md):
//
//	GET  /healthz                              no auth; {"status":"ok"}
//	GET  /metrics                              Prometheus text format
//	GET  /v1/collections[?include_dropped=true] ListCollectionsResponse
//	GET  /v1/collections/{name}                CollectionStatus
//	GET  /v1/collections/{name}/docs/{pk...}[?min_ts=N] GetDocumentResponse
//	POST /v1/collections/{name}/search         SearchRequest -> SearchResponse
//	GET  /v1/progress[?partition=P...]         GetProgressResponse
//
// Bodies are protojson with the proto field names (snake_case) and every
// field emitted; 64-bit integers are JSON strings, as protojson specifies,
// and are accepted as strings or numbers. Errors are a ContractError body
// with a status code from the reason (specs/emulator-contract.md §7).
//
// New returns the http.Handler; Listen/Serve bind it, to loopback unless an
// explicit host is given.
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// Backend is what the API reads from; *emulator.Emulator implements it.
type Backend interface {
	ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error)
	GetCollection(ctx context.Context, req *apiv1.GetCollectionRequest) (*apiv1.CollectionStatus, error)
	GetDocument(ctx context.Context, req *apiv1.GetDocumentRequest) (*apiv1.GetDocumentResponse, error)
	Search(ctx context.Context, req *apiv1.SearchRequest) (*apiv1.SearchResponse, error)
	GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error)
}

// DefaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// Reasons the HTTP layer itself produces (in addition to the contract's).
const (
	ReasonUnauthorized     contract.Reason = "UNAUTHORIZED"
	ReasonRequestTooLarge  contract.Reason = "REQUEST_TOO_LARGE"
	ReasonMalformedRequest contract.Reason = "MALFORMED_REQUEST"
	ReasonUnsupportedMedia contract.Reason = "UNSUPPORTED_MEDIA_TYPE"
	ReasonNotFound         contract.Reason = "NOT_FOUND"
	ReasonMethodNotAllowed contract.Reason = "METHOD_NOT_ALLOWED"
	ReasonCanceled         contract.Reason = "CANCELED"
	ReasonDocumentNotFound contract.Reason = "DOCUMENT_NOT_FOUND"
)

// Options configure New.
type Options struct {
	// Backend answers the queries. Required.
	Backend Backend
	// Token, when non-empty, is the bearer token every endpoint but /healthz
	// requires (H3).
	Token string
	// MaxBodyBytes bounds request bodies (H5); 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Gatherer is what /metrics exposes besides the API's own HTTP metrics
	// and the go_*/process_* collectors, normally the emulator's registry
	// (with the adapter's). Nil exposes only the API's own.
	Gatherer prometheus.Gatherer
	// Pprof serves /debug/pprof/* (H14); off, those paths are 404.
	Pprof bool
	// Board feeds the status page and /v1/status (H15); nil makes one over
	// Backend and Gatherer that nobody samples (no plot, no adapter).
	Board *Board
}

type api struct {
	opts     Options
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	metrics  http.Handler
	mux      *http.ServeMux
}

var (
	marshal   = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
	unmarshal = protojson.UnmarshalOptions{} // unknown fields are an error (H6)
)

// New returns the API handler.
func New(opts Options) (http.Handler, error) {
	if opts.Backend == nil {
		return nil, errors.New("httpapi: Options.Backend is required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	a := &api{opts: opts, reg: prometheus.NewRegistry()}
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sfemu_http_requests_total",
		Help: "HTTP API requests by route and status code.",
	}, []string{"route", "code"})
	a.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sfemu_http_request_seconds",
		Help:    "HTTP API request latency by route (includes min_ts waits).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"route"})
	a.reg.MustRegister(a.requests, a.latency)
	a.reg.MustRegister(runtimeCollectors()...)
	gs := prometheus.Gatherers{a.reg}
	if opts.Gatherer != nil {
		gs = append(gs, opts.Gatherer)
	}
	a.metrics = metricsHandler(gs)

	mux := http.NewServeMux()
	routes := []struct {
		method, path, name string
		h                  http.HandlerFunc
	}{
		{"GET", "/healthz", "healthz", a.healthz},
		{"GET", "/metrics", "metrics", a.metrics.ServeHTTP},
		{"GET", "/v1/collections", "list_collections", a.listCollections},
		{"GET", "/v1/collections/{name}", "get_collection", a.getCollection},
		{"GET", "/v1/collections/{name}/docs/{pk...}", "get_document", a.getDocument},
		{"POST", "/v1/collections/{name}/search", "search", a.search},
		{"GET", "/v1/progress", "progress", a.progress},
	}
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+rt.path, named(rt.name, rt.h))
		// The same path without a method catches the other methods, so they
		// get a JSON 405 with Allow instead of the mux's plain-text one.
		allow := rt.method
		if allow == "GET" {
			allow = "GET, HEAD"
		}
		mux.HandleFunc(rt.path, named(rt.name, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, &contract.Error{Reason: ReasonMethodNotAllowed, Field: "method", Expected: allow, Actual: r.Method, Message: "method not allowed on " + r.URL.Path})
		}))
	}
	if opts.Pprof {
		registerPprof(mux)
	}
	if opts.Board == nil {
		opts.Board = NewBoard(BoardConfig{Backend: opts.Backend, Gatherer: opts.Gatherer})
	}
	registerPage(mux, opts.Board)
	mux.HandleFunc("/", named("unmatched", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, &contract.Error{Reason: ReasonNotFound, Field: "path", Actual: r.URL.Path, Message: "no such endpoint"})
	}))
	a.mux = mux
	return a, nil
}

// named labels the request's metrics with the route name.
func named(name string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if sw, ok := w.(*statusWriter); ok {
			sw.route = name
		}
		h(w, r)
	}
}

// ServeHTTP authenticates (every path but /healthz and the status page's
// static files, H3, H15), dispatches, recovers
// from handler panics (H11) and records the request metrics.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, route: "unmatched"}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			if sw.code == 0 {
				writeError(sw, http.StatusInternalServerError, &contract.Error{Reason: contract.ReasonInternal, Message: fmt.Sprintf("handler panic: %v", p)})
			}
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		a.requests.WithLabelValues(sw.route, strconv.Itoa(code)).Inc()
		a.latency.WithLabelValues(sw.route).Observe(time.Since(start).Seconds())
	}()
	if r.URL.Path != "/healthz" && !pageAsset(r) && !a.authorized(sw, r) {
		return
	}
	pretty, perr := parsePretty(r)
	if perr != nil {
		writeError(sw, http.StatusBadRequest, perr)
		return
	}
	sw.view.pretty = pretty
	a.mux.ServeHTTP(sw, r)
}

// metricsHandler serves the gathered metrics in the negotiated exposition
// format. It stands in for promhttp, whose zstd support would pull a module
// (klauspost/compress) the project's go.mod does not carry. Gathering errors
// still serve what was gathered (like promhttp's ContinueOnError) and are
// reported in a response header.
func metricsHandler(g prometheus.Gatherer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mfs, gerr := g.Gather()
		format := expfmt.Negotiate(r.Header)
		w.Header().Set("Content-Type", string(format))
		if gerr != nil {
			w.Header().Set("X-Sfemu-Metrics-Error", strings.ReplaceAll(gerr.Error(), "\n", "; "))
		}
		enc := expfmt.NewEncoder(w, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				return // the client sees a truncated body; nothing else to do
			}
		}
		if c, ok := enc.(expfmt.Closer); ok {
			_ = c.Close()
		}
	}
}

// statusWriter records the status code for the request metrics.
type statusWriter struct {
	http.ResponseWriter
	code  int
	route string
	view  view // how JSON bodies are rendered (H13)
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// authorized enforces the bearer token before anything else runs, so a
// rejected request never reaches the backend (H3). It writes the 401.
func (a *api) authorized(w http.ResponseWriter, r *http.Request) bool {
	if a.opts.Token == "" {
		return true
	}
	got, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sfemu"`)
		writeError(w, http.StatusUnauthorized, &contract.Error{Reason: ReasonUnauthorized, Field: "Authorization", Expected: "Bearer <token>", Actual: "missing", Message: "a bearer token is required"})
		return false
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(a.opts.Token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sfemu", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, &contract.Error{Reason: ReasonUnauthorized, Field: "Authorization", Message: "the bearer token is not valid"})
		return false
	}
	return true
}

func bearer(h string) (string, bool) {
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(p):])
	return tok, tok != ""
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(indent(viewOf(w), []byte(`{"status":"ok"}`)), '\n'))
}

func (a *api) listCollections(w http.ResponseWriter, r *http.Request) {
	req := &apiv1.ListCollectionsRequest{}
	q := r.URL.Query()
	if v := q.Get("include_dropped"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "include_dropped", Expected: "true or false", Actual: v, Message: "bad query parameter"})
			return
		}
		req.IncludeDropped = b
	}
	if !onlyParams(w, q, "include_dropped") {
		return
	}
	resp, err := a.opts.Backend.ListCollections(r.Context(), req)
	a.reply(w, resp, err)
}

func (a *api) getCollection(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r.URL.Query()) {
		return
	}
	resp, err := a.opts.Backend.GetCollection(r.Context(), &apiv1.GetCollectionRequest{Name: r.PathValue("name")})
	a.reply(w, resp, err)
}

func (a *api) getDocument(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !onlyParams(w, q, "min_ts") {
		return
	}
	req := &apiv1.GetDocumentRequest{Collection: r.PathValue("name"), PrimaryKey: r.PathValue("pk")}
	if req.PrimaryKey == "" {
		writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "primary_key", Expected: "non-empty", Actual: `""`, Message: "the document path needs a primary key"})
		return
	}
	if v := q.Get("min_ts"); v != "" {
		ts, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "min_ts", Expected: "unsigned 64-bit integer", Actual: v, Message: "bad query parameter"})
			return
		}
		req.MinTs = ts
	}
	resp, err := a.opts.Backend.GetDocument(r.Context(), req)
	if err == nil && resp != nil && !resp.GetFound() {
		// H8: a missing document is a 404 whose body still carries read_ts.
		writeMessage(w, http.StatusNotFound, resp)
		return
	}
	a.reply(w, resp, err)
}

func (a *api) search(w http.ResponseWriter, r *http.Request) {
	if !onlyParams(w, r.URL.Query()) {
		return
	}
	req := &apiv1.SearchRequest{}
	if !a.readBody(w, r, req) {
		return
	}
	name := r.PathValue("name")
	if req.GetCollection() != "" && req.GetCollection() != name {
		writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "collection", Expected: name, Actual: req.GetCollection(), Message: "body collection differs from the path"})
		return
	}
	req.Collection = name
	setRules(w, searchRules(req))
	resp, err := a.opts.Backend.Search(r.Context(), req)
	a.reply(w, resp, err)
}

func (a *api) progress(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !onlyParams(w, q, "partition") {
		return
	}
	req := &apiv1.GetProgressRequest{SourcePartitions: q["partition"]}
	resp, err := a.opts.Backend.GetProgress(r.Context(), req)
	a.reply(w, resp, err)
}

// onlyParams rejects unknown query parameters (H6), so a typo such as
// ?mints=5 is not silently ignored.
func onlyParams(w http.ResponseWriter, q map[string][]string, allowed ...string) bool {
	for k := range q {
		ok := k == "pretty" // every JSON endpoint takes it (H13)
		for _, a := range allowed {
			if k == a {
				ok = true
			}
		}
		if !ok {
			writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: k, Expected: "one of [" + strings.Join(allowed, " ") + "]", Actual: k, Message: "unknown query parameter"})
			return false
		}
	}
	return true
}

// readBody reads a size-limited protojson body into m (H5, H6).
func (a *api) readBody(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, &contract.Error{Reason: ReasonUnsupportedMedia, Field: "Content-Type", Expected: "application/json", Actual: ct, Message: "request body must be JSON"})
			return false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, &contract.Error{Reason: ReasonRequestTooLarge, Field: "body", Expected: fmt.Sprintf("<= %d bytes", mbe.Limit), Actual: fmt.Sprintf("> %d bytes", mbe.Limit), Message: "request body too large"})
			return false
		}
		writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "body", Message: "reading body: " + err.Error()})
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "body", Expected: "a JSON object", Actual: "empty body", Message: "request body is required"})
		return false
	}
	if err := unmarshal.Unmarshal(body, m); err != nil {
		writeError(w, http.StatusBadRequest, &contract.Error{Reason: ReasonMalformedRequest, Field: "body", Message: "invalid " + string(m.ProtoReflect().Descriptor().Name()) + " JSON: " + err.Error()})
		return false
	}
	return true
}

func (a *api) reply(w http.ResponseWriter, m proto.Message, err error) {
	if err != nil {
		writeBackendError(w, err)
		return
	}
	writeMessage(w, http.StatusOK, m)
}

// readTs is implemented by responses that carry read_ts; it is mirrored in a
// header so clients can read it without parsing the body (H9).
type readTs interface{ GetReadTs() uint64 }

func writeMessage(w http.ResponseWriter, code int, m proto.Message) {
	b, err := renderMessage(w, m)
	if err != nil {
		writeError(w, http.StatusInternalServerError, &contract.Error{Reason: contract.ReasonInternal, Message: "encoding response: " + err.Error()})
		return
	}
	if rt, ok := m.(readTs); ok {
		w.Header().Set("X-Sfemu-Read-Ts", strconv.FormatUint(rt.GetReadTs(), 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// StatusFor maps a contract reason to its HTTP status
// (specs/emulator-contract.md §7, H7).
func StatusFor(r contract.Reason) int {
	switch r {
	case contract.ReasonInvalidMeta, contract.ReasonInvalidDefinition, contract.ReasonUnspecifiedPolicy,
		contract.ReasonInvalidZeroState, contract.ReasonInvalidBatch, contract.ReasonInvalidMutation,
		contract.ReasonUnknownField, contract.ReasonTypeMismatch, contract.ReasonPrimaryKeyMismatch,
		contract.ReasonInvalidQuery, contract.ReasonInvalidArgument, ReasonMalformedRequest:
		return http.StatusBadRequest
	case contract.ReasonCollectionNotFound, ReasonNotFound, ReasonDocumentNotFound:
		return http.StatusNotFound
	case contract.ReasonAlreadyExists, contract.ReasonIdempotencyConflict, contract.ReasonPartitionConflict,
		contract.ReasonFenceMismatch, contract.ReasonNonMonotonicSchema, contract.ReasonPolicyTooWeak,
		contract.ReasonPartitionNotMapped, contract.ReasonEpochRegression, contract.ReasonSeqGap,
		contract.ReasonSeqOverlap, contract.ReasonStaleGeneration, contract.ReasonProgressRegression:
		return http.StatusConflict
	case contract.ReasonNotYetFresh, contract.ReasonClosed:
		return http.StatusServiceUnavailable
	case ReasonUnauthorized:
		return http.StatusUnauthorized
	case ReasonRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case ReasonMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

func writeBackendError(w http.ResponseWriter, err error) {
	var ce *contract.Error
	if errors.As(err, &ce) {
		writeError(w, StatusFor(ce.Reason), ce)
		return
	}
	switch {
	case errors.Is(err, context.Canceled):
		// The client went away; the status is for the logs and metrics only.
		writeError(w, 499, &contract.Error{Reason: ReasonCanceled, Message: "request canceled by the client"})
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, &contract.Error{Reason: contract.ReasonNotYetFresh, Message: "request deadline exceeded: " + err.Error()})
	default:
		writeError(w, http.StatusInternalServerError, &contract.Error{Reason: contract.ReasonInternal, Message: err.Error()})
	}
}

func writeError(w http.ResponseWriter, code int, e *contract.Error) {
	if code == http.StatusServiceUnavailable && e.Reason == contract.ReasonNotYetFresh {
		w.Header().Set("Retry-After", "1")
	}
	// Errors echo client input (parameters, parser messages quoting the
	// body), which may be invalid UTF-8 that protojson refuses to encode.
	clean := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	writeMessage(w, code, &apiv1.ContractError{
		Reason:   clean(string(e.Reason)),
		Field:    clean(e.Field),
		Expected: clean(e.Expected),
		Actual:   clean(e.Actual),
		Message:  clean(e.Message),
	})
}
