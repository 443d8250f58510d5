package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/httpapi"
)

// The real emulator satisfies the Backend seam.
var _ httpapi.Backend = (*emulator.Emulator)(nil)

func sval(s string) *apiv1.Value { return &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: s}} }
func ival(i int64) *apiv1.Value  { return &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: i}} }
func vval(v ...float32) *apiv1.Value {
	return &apiv1.Value{Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: v}}}
}

// End to end through a real listener: a collection created and fed through
// the emulator's Go API is visible over HTTP with its watermarks, documents,
// text/vector/hybrid search, min_ts freshness and metrics.
func TestAgainstRealEmulator(t *testing.T) {
	ctx := context.Background()
	e, err := emulator.Open("", emulator.Options{MaxReadWait: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })

	def := &apiv1.CollectionDefinition{
		Name: "books",
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT},
			{Name: "emb", Type: apiv1.FieldType_FIELD_TYPE_VECTOR, Role: apiv1.FieldRole_FIELD_ROLE_VECTOR, VectorDim: 2},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{"table:7"},
	}
	put, err := e.PutCollectionSchema(ctx, &apiv1.PutCollectionSchemaRequest{
		Meta:          &apiv1.RequestMeta{IdempotencyKey: "create-books", ClientId: "test", ClientKind: apiv1.ClientKind_CLIENT_KIND_TEST},
		Scope:         &apiv1.SchemaScope{Collection: "books", DdlCommitTs: 10},
		SchemaVersion: 1,
		Fence:         &apiv1.SchemaFence{SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true},
		Definition:    def,
		UpdatePolicy:  apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
	})
	require.NoError(t, err)
	token := put.GetLineage().GetSchemaGenerationToken()
	up := func(seq, ts uint64, id int64, title string, emb ...float32) *apiv1.Mutation {
		return &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: strconv.FormatInt(int64(id), 10),
			Fields: map[string]*apiv1.Value{"id": ival(id), "title": sval(title), "emb": vval(emb...)}}
	}
	_, err = e.Ingest(ctx, &apiv1.MutationBatch{SourcePartition: "table:7", SourceEpoch: 1, FirstSeq: 1, SchemaGenerationToken: token,
		Mutations: []*apiv1.Mutation{
			up(1, 20, 1, "the left hand of darkness", 1, 0),
			up(2, 21, 2, "dune messiah", 0, 1),
			up(3, 22, 3, "children of dune", 0.9, 0.1),
		}})
	require.NoError(t, err)
	_, err = e.AdvancePartition(ctx, &apiv1.PartitionProgress{SourcePartition: "table:7", SourceEpoch: 1, ResolvedTs: 30})
	require.NoError(t, err)
	e.WaitIndexed()

	h, err := httpapi.New(httpapi.Options{Backend: e, Token: "tok", Gatherer: e.Registry()})
	require.NoError(t, err)
	srv, err := httpapi.Start("127.0.0.1:0", h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	call := func(method, path, body string) (int, map[string]any, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL()+path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var m map[string]any
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			require.NoError(t, json.Unmarshal(b, &m), string(b))
		}
		return resp.StatusCode, m, string(b)
	}

	code, m, body := call("GET", "/v1/collections/books", "")
	require.Equal(t, 200, code, body)
	require.Equal(t, "3", m["doc_count"])
	require.Equal(t, "30", m["safe_ts"])
	require.NotEmpty(t, m["modalities"])
	require.Equal(t, "books", m["definition"].(map[string]any)["name"])

	code, m, body = call("GET", "/v1/collections", "")
	require.Equal(t, 200, code, body)
	require.Len(t, m["collections"], 1)

	code, m, body = call("GET", "/v1/collections/books/docs/"+strconv.FormatInt(int64(2), 10), "")
	require.Equal(t, 200, code, body)
	require.Equal(t, true, m["found"])
	require.Equal(t, "21", m["document"].(map[string]any)["commit_ts"])
	code, m, _ = call("GET", "/v1/collections/books/docs/"+strconv.FormatInt(int64(99), 10), "")
	require.Equal(t, 404, code)
	require.Equal(t, false, m["found"])

	code, m, body = call("POST", "/v1/collections/books/search", `{"text":{"query":"dune"},"limit":5}`)
	require.Equal(t, 200, code, body)
	require.Len(t, m["hits"], 2)
	require.Equal(t, "30", m["read_ts"])

	code, m, body = call("POST", "/v1/collections/books/search", `{"vector":{"field":"emb","vector":[1,0]},"limit":1}`)
	require.Equal(t, 200, code, body)
	require.Equal(t, strconv.FormatInt(int64(1), 10), m["hits"].([]any)[0].(map[string]any)["primary_key"])

	code, m, body = call("POST", "/v1/collections/books/search", `{"text":{"query":"dune"},"vector":{"field":"emb","vector":[1,0]},"limit":3}`)
	require.Equal(t, 200, code, body)
	require.NotEmpty(t, m["hits"])

	// Contract errors from the real emulator map to statuses.
	code, m, _ = call("POST", "/v1/collections/books/search", `{}`)
	require.Equal(t, 400, code)
	require.Equal(t, "INVALID_QUERY", m["reason"])
	code, m, _ = call("POST", "/v1/collections/nope/search", `{"text":{"query":"x"}}`)
	require.Equal(t, 404, code)
	require.Equal(t, "COLLECTION_NOT_FOUND", m["reason"])
	code, m, _ = call("POST", "/v1/collections/books/search", `{"vector":{"field":"emb","vector":[1,0,0]}}`)
	require.Equal(t, 400, code)
	require.NotEmpty(t, m["reason"])

	// min_ts beyond safe_ts: bounded wait, then 503 NOT_YET_FRESH.
	code, m, body = call("GET", "/v1/collections/books/docs/"+strconv.FormatInt(int64(1), 10)+"?min_ts=1000", "")
	require.Equal(t, 503, code, body)
	require.Equal(t, "NOT_YET_FRESH", m["reason"])
	// ...and it succeeds once the partition advances while it waits.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = e.AdvancePartition(ctx, &apiv1.PartitionProgress{SourcePartition: "table:7", SourceEpoch: 1, ResolvedTs: 1000})
	}()
	code, m, body = call("POST", "/v1/collections/books/search", `{"text":{"query":"dune"},"min_ts":"1000"}`)
	require.Equal(t, 200, code, body)
	require.Equal(t, "1000", m["read_ts"])

	code, m, body = call("GET", "/v1/progress", "")
	require.Equal(t, 200, code, body)
	p := m["partitions"].([]any)[0].(map[string]any)
	require.Equal(t, "table:7", p["source_partition"])
	require.Equal(t, "3", p["last_seq"])

	code, _, body = call("GET", "/metrics", "")
	require.Equal(t, 200, code)
	require.Contains(t, body, "sfemu_ingest_mutations_total")
	require.Contains(t, body, `sfemu_collection_safe_ts{collection="books"} 1000`)
	require.Contains(t, body, "sfemu_http_requests_total")
}
