package grpcapi

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

func serve(t *testing.T, opts Options) (*emulator.Emulator, *grpc.ClientConn) {
	t.Helper()
	e, err := emulator.Open("", emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(e, opts)
	go func() { _ = s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
		_ = e.Close()
	})
	return e, conn
}

func def() *apiv1.CollectionDefinition {
	return &apiv1.CollectionDefinition{
		Name: "books",
		Fields: []*apiv1.Field{
			{Name: "id", Type: apiv1.FieldType_FIELD_TYPE_INT, Role: apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY},
			{Name: "title", Type: apiv1.FieldType_FIELD_TYPE_STRING, Role: apiv1.FieldRole_FIELD_ROLE_TEXT},
		},
		PrimaryKey:       []string{"id"},
		SourcePartitions: []string{"table:7"},
	}
}

func create() *apiv1.PutCollectionSchemaRequest {
	return &apiv1.PutCollectionSchemaRequest{
		Meta:          &apiv1.RequestMeta{IdempotencyKey: "c1", ClientId: "t", ClientKind: apiv1.ClientKind_CLIENT_KIND_TEST},
		Scope:         &apiv1.SchemaScope{Collection: "books", DdlCommitTs: 5},
		SchemaVersion: 1,
		Fence:         &apiv1.SchemaFence{SchemaGenerationToken: apiv1.InitialGenerationToken, EnforceMonotonicApply: true},
		Definition:    def(),
		UpdatePolicy:  apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_INITIAL_CREATION,
	}
}

func upsert(seq, ts uint64, id int64, title string) *apiv1.Mutation {
	return &apiv1.Mutation{Seq: seq, CommitTs: ts, Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, PrimaryKey: apiv1.JoinKey([]string{itoa(id)}),
		Fields: map[string]*apiv1.Value{
			"id":    {Kind: &apiv1.Value_Int64Value{Int64Value: id}},
			"title": {Kind: &apiv1.Value_StringValue{StringValue: title}},
		}}
}

func itoa(i int64) string {
	v := &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: i}}
	s, _ := apiv1.KeyComponent(v)
	return s
}

// Over a real loopback listener: every service answers, and contract errors
// arrive with their code and ContractError detail (E90).
func TestServicesOverLoopback(t *testing.T) {
	_, conn := serve(t, Options{})
	ctx := context.Background()
	ctl := apiv1.NewControlClient(conn)
	ing := apiv1.NewIngestClient(conn)
	qry := apiv1.NewQueryClient(conn)

	cr, err := ctl.PutCollectionSchema(ctx, create())
	if err != nil {
		t.Fatal(err)
	}
	tok := cr.GetLineage().GetSchemaGenerationToken()
	if _, err := ing.Ingest(ctx, &apiv1.MutationBatch{SourcePartition: "table:7", SourceEpoch: 1, FirstSeq: 1, SchemaGenerationToken: tok,
		Mutations: []*apiv1.Mutation{upsert(1, 10, 1, "the go programming language"), upsert(2, 11, 2, "distributed systems")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ing.AdvancePartition(ctx, &apiv1.PartitionProgress{SourcePartition: "table:7", SourceEpoch: 1, ResolvedTs: 20}); err != nil {
		t.Fatal(err)
	}
	sr, err := qry.Search(ctx, &apiv1.SearchRequest{Collection: "books", Text: &apiv1.TextQuery{Query: "programming"}, MinTs: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.GetHits()) != 1 || sr.GetHits()[0].GetPrimaryKey() != "1" || sr.GetReadTs() != 20 {
		t.Fatalf("search: %v", sr)
	}
	gd, err := qry.GetDocument(ctx, &apiv1.GetDocumentRequest{Collection: "books", PrimaryKey: "2"})
	if err != nil || !gd.GetFound() {
		t.Fatalf("get: %v %v", gd, err)
	}
	st, err := ctl.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "books"})
	if err != nil || st.GetDocCount() != 2 {
		t.Fatalf("status: %v %v", st, err)
	}
	ls, err := ctl.ListCollections(ctx, &apiv1.ListCollectionsRequest{})
	if err != nil || len(ls.GetCollections()) != 1 {
		t.Fatalf("list: %v %v", ls, err)
	}
	pg, err := ctl.GetProgress(ctx, &apiv1.GetProgressRequest{})
	if err != nil || len(pg.GetPartitions()) != 1 || pg.GetPartitions()[0].GetLastSeq() != 2 {
		t.Fatalf("progress: %v %v", pg, err)
	}

	// Errors: code and detail.
	_, err = ing.Ingest(ctx, &apiv1.MutationBatch{SourcePartition: "table:7", SourceEpoch: 1, FirstSeq: 5, SchemaGenerationToken: tok, Mutations: []*apiv1.Mutation{upsert(5, 30, 3, "x")}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("seq gap code: %v", err)
	}
	d := FromStatus(err)
	if d == nil || d.GetReason() != string(contract.ReasonSeqGap) || d.GetField() != "first_seq" || d.GetExpected() != "3" || d.GetActual() != "5" {
		t.Fatalf("detail: %v", d)
	}
	_, err = ctl.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("not found code: %v", err)
	}
	bad := create()
	bad.UpdatePolicy = apiv1.SchemaUpdatePolicy_SCHEMA_UPDATE_POLICY_UNSPECIFIED
	bad.Meta.IdempotencyKey = "c2"
	_, err = ctl.PutCollectionSchema(ctx, bad)
	if status.Code(err) != codes.InvalidArgument || FromStatus(err).GetReason() != "UNSPECIFIED_POLICY" {
		t.Fatalf("unspecified policy: %v", err)
	}
}

// A wrong or missing token is Unauthenticated and touches nothing.
func TestBearerToken(t *testing.T) {
	e, conn := serve(t, Options{Token: "s3cret"})
	ctl := apiv1.NewControlClient(conn)
	_, err := ctl.PutCollectionSchema(context.Background(), create())
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("missing token: %v", err)
	}
	wrong := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer nope")
	_, err = ctl.PutCollectionSchema(wrong, create())
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	ls, _ := e.ListCollections(context.Background(), &apiv1.ListCollectionsRequest{IncludeDropped: true})
	if len(ls.GetCollections()) != 0 {
		t.Fatal("unauthenticated call changed state")
	}
	good := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if _, err := ctl.PutCollectionSchema(good, create()); err != nil {
		t.Fatal(err)
	}
}

// Oversized requests are rejected by the transport.
func TestOversizedRequest(t *testing.T) {
	_, conn := serve(t, Options{MaxRecvBytes: 1024})
	big := create()
	big.Meta.IdempotencyKey = string(make([]byte, 2048))
	_, err := apiv1.NewControlClient(conn).PutCollectionSchema(context.Background(), big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized: %v", err)
	}
}

func TestCodeTable(t *testing.T) {
	for r, want := range map[contract.Reason]codes.Code{
		contract.ReasonSeqOverlap: codes.FailedPrecondition, contract.ReasonNotYetFresh: codes.Unavailable,
		contract.ReasonTypeMismatch: codes.InvalidArgument, contract.ReasonIdempotencyConflict: codes.Aborted,
		contract.ReasonInternal: codes.Internal,
	} {
		if got := Code(r); got != want {
			t.Errorf("%s -> %v want %v", r, got, want)
		}
	}
}
