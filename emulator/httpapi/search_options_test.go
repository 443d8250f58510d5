package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/httpapi"
)

// E75..E78 over HTTP: sort, facets, highlights and search_after travel as
// protojson; a bad option is a 400 naming the field (H7).
func TestSearchOptionsOverHTTP(t *testing.T) {
	ctx := context.Background()
	e, err := emulator.Open("", emulator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	def := &apiv1.CollectionDefinition{
		Name: "gear",
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT},
			{Name: "brand", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_KEYWORD},
			{Name: "price", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_NUMERIC},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{"table:8"},
	}
	put, err := e.PutCollectionSchema(ctx, &apiv1.PutCollectionSchemaRequest{
		Meta:          &apiv1.RequestMeta{IdempotencyKey: "create-gear", ClientId: "test", ClientKind: apiv1.ClientKind_CLIENT_KIND_TEST},
		Scope:         &apiv1.SchemaScope{Collection: "gear", DdlCommitTs: 10},
		SchemaVersion: 1,
		Fence:         &apiv1.SchemaFence{SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true},
		Definition:    def,
		UpdatePolicy:  apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
	})
	require.NoError(t, err)
	var muts []*apiv1.Mutation
	for i, row := range []struct {
		title, brand string
		price        int64
	}{{"wireless speaker", "acme", 30}, {"wireless mouse", "bolt", 10}, {"usb cable", "acme", 5}, {"Wireless charger", "acme", 20}} {
		id := int64(i + 1)
		muts = append(muts, &apiv1.Mutation{Seq: uint64(id), CommitTs: uint64(20 + id), Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: strconv.FormatInt(id, 10),
			Fields: map[string]*apiv1.Value{"id": ival(id), "title": sval(row.title), "brand": sval(row.brand), "price": ival(row.price)}})
	}
	_, err = e.Ingest(ctx, &apiv1.MutationBatch{SourcePartition: "table:8", SourceEpoch: 1, FirstSeq: 1, SchemaGenerationToken: put.GetLineage().GetSchemaGenerationToken(), Mutations: muts})
	require.NoError(t, err)
	_, err = e.AdvancePartition(ctx, &apiv1.PartitionProgress{SourcePartition: "table:8", SourceEpoch: 1, ResolvedTs: 30})
	require.NoError(t, err)
	e.WaitIndexed()
	h, err := httpapi.New(httpapi.Options{Backend: e})
	require.NoError(t, err)
	srv, err := httpapi.Start("127.0.0.1:0", h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	search := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL()+"/v1/collections/gear/search", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), string(b))
		return resp.StatusCode, m
	}
	keys := func(m map[string]any) []string {
		var out []string
		for _, h := range m["hits"].([]any) {
			out = append(out, h.(map[string]any)["primary_key"].(string))
		}
		return out
	}

	code, m := search(`{"text":{"query":"wireless"},"sort":[{"field":"price","descending":true}],"limit":2,
		"facets":[{"field":"brand"},{"field":"price","ranges":[{"to":15},{"from":15}]}],"highlight":{}}`)
	require.Equal(t, 200, code, m)
	require.Equal(t, []string{"1", "4"}, keys(m))
	require.Equal(t, "3", m["total"])
	tok, _ := m["next_page_token"].(string)
	require.NotEmpty(t, tok, "a full page carries next_page_token (E79)")
	first := m["hits"].([]any)[0].(map[string]any)
	require.Equal(t, "<em>wireless</em> speaker", first["highlights"].(map[string]any)["title"])
	facets := m["facets"].([]any)
	brand := facets[0].(map[string]any)["buckets"].([]any)
	require.Equal(t, "acme", brand[0].(map[string]any)["key"])
	require.Equal(t, "2", brand[0].(map[string]any)["count"])
	price := facets[1].(map[string]any)["buckets"].([]any)
	require.Equal(t, "-15", price[0].(map[string]any)["key"])
	require.Equal(t, "1", price[0].(map[string]any)["count"])

	// The next page continues after the last hit's sort_values.
	last := m["hits"].([]any)[1].(map[string]any)["sort_values"]
	after, err := json.Marshal(last)
	require.NoError(t, err)
	code, m = search(`{"text":{"query":"wireless"},"sort":[{"field":"price","descending":true}],"limit":2,"search_after":` + string(after) + `}`)
	require.Equal(t, 200, code, m)
	require.Equal(t, []string{"2"}, keys(m))

	// E79 over HTTP: the token continues its own query (limit may change)
	// and is refused, naming page_token, on another one.
	code, m = search(`{"text":{"query":"wireless"},"sort":[{"field":"price","descending":true}],"limit":5,"page_token":"` + tok + `"}`)
	require.Equal(t, 200, code, m)
	require.Equal(t, []string{"2"}, keys(m))
	code, m = search(`{"text":{"query":"mouse"},"sort":[{"field":"price","descending":true}],"page_token":"` + tok + `"}`)
	require.Equal(t, 400, code, m)
	require.Equal(t, "INVALID_QUERY", m["reason"], m)
	require.Equal(t, "page_token", m["field"], m)
	require.Contains(t, m["message"], "another query")

	for body, field := range map[string]string{
		`{"text":{"query":"wireless"},"offset":-1}`:                          "offset",
		`{"text":{"query":"wireless"},"sort":[{"field":"nope"}]}`:            "sort[0].field",
		`{"text":{"query":"wireless"},"search_after":[{"int64_value":"1"}]}`: "search_after",
	} {
		code, m = search(body)
		require.Equal(t, 400, code, body)
		require.Equal(t, "INVALID_QUERY", m["reason"], body)
		require.Equal(t, field, m["field"], body)
	}
}
