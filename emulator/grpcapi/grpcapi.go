// Package grpcapi serves the emulator's gRPC services (Ingest, Control,
// Query from emulator/api/v1) over an *emulator.Emulator. Contract errors
// become gRPC statuses with a ContractError detail (specs/emulator-contract.md
// E90); an optional bearer token guards every method.
package grpcapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// DefaultMaxRecvBytes bounds one request (a mutation batch of a few
// thousand rows fits comfortably).
const DefaultMaxRecvBytes = 64 << 20

// Options configure the server.
type Options struct {
	// Token, when non-empty, must be sent as "authorization: Bearer <token>"
	// metadata on every call; otherwise the call fails Unauthenticated
	// before touching the emulator.
	Token string
	// MaxRecvBytes bounds a request message (default DefaultMaxRecvBytes).
	MaxRecvBytes int
}

// NewServer returns a gRPC server with the three services registered.
func NewServer(e *emulator.Emulator, opts Options) *grpc.Server {
	if opts.MaxRecvBytes <= 0 {
		opts.MaxRecvBytes = DefaultMaxRecvBytes
	}
	var so []grpc.ServerOption
	so = append(so, grpc.MaxRecvMsgSize(opts.MaxRecvBytes))
	if opts.Token != "" {
		so = append(so, grpc.UnaryInterceptor(tokenInterceptor(opts.Token)))
	}
	s := grpc.NewServer(so...)
	Register(s, e)
	return s
}

// Register adds the Ingest, Control and Query services to s.
func Register(s grpc.ServiceRegistrar, e *emulator.Emulator) {
	apiv1.RegisterIngestServer(s, &ingestServer{e: e})
	apiv1.RegisterControlServer(s, &controlServer{e: e})
	apiv1.RegisterQueryServer(s, &queryServer{e: e})
}

func tokenInterceptor(token string) grpc.UnaryServerInterceptor {
	want := []byte("Bearer " + token)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ok := false
		for _, v := range md.Get("authorization") {
			if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(v)), want) == 1 {
				ok = true
			}
		}
		if !ok {
			return nil, status.Error(codes.Unauthenticated, "missing or wrong bearer token")
		}
		return handler(ctx, req)
	}
}

// Code maps a contract reason to its gRPC code (the table in E90).
func Code(r contract.Reason) codes.Code {
	switch r {
	case contract.ReasonInvalidMeta, contract.ReasonInvalidDefinition, contract.ReasonUnspecifiedPolicy,
		contract.ReasonInvalidZeroState, contract.ReasonInvalidBatch, contract.ReasonInvalidMutation,
		contract.ReasonUnknownField, contract.ReasonTypeMismatch, contract.ReasonPrimaryKeyMismatch,
		contract.ReasonInvalidQuery, contract.ReasonInvalidArgument:
		return codes.InvalidArgument
	case contract.ReasonCollectionNotFound:
		return codes.NotFound
	case contract.ReasonAlreadyExists, contract.ReasonPartitionConflict:
		return codes.AlreadyExists
	case contract.ReasonIdempotencyConflict:
		return codes.Aborted
	case contract.ReasonFenceMismatch, contract.ReasonNonMonotonicSchema, contract.ReasonPolicyTooWeak,
		contract.ReasonPartitionNotMapped, contract.ReasonEpochRegression, contract.ReasonSeqGap,
		contract.ReasonSeqOverlap, contract.ReasonStaleGeneration, contract.ReasonProgressRegression,
		contract.ReasonLateMutation:
		return codes.FailedPrecondition
	case contract.ReasonNotYetFresh, contract.ReasonClosed:
		return codes.Unavailable
	}
	return codes.Internal
}

// ToStatus converts an emulator error into a gRPC status error carrying a
// ContractError detail.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	var ce *contract.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) {
			return status.Error(codes.Canceled, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	st := status.New(Code(ce.Reason), ce.Error())
	if d, derr := st.WithDetails(&apiv1.ContractError{
		Reason: string(ce.Reason), Field: ce.Field, Expected: ce.Expected, Actual: ce.Actual, Message: ce.Message,
	}); derr == nil {
		st = d
	}
	return st.Err()
}

// FromStatus extracts the ContractError detail of a status error, or nil.
func FromStatus(err error) *apiv1.ContractError {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if ce, ok := d.(*apiv1.ContractError); ok {
			return ce
		}
	}
	return nil
}

type ingestServer struct {
	apiv1.UnimplementedIngestServer
	e *emulator.Emulator
}

func (s *ingestServer) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	r, err := s.e.Ingest(ctx, b)
	return r, ToStatus(err)
}

func (s *ingestServer) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	r, err := s.e.AdvancePartition(ctx, p)
	return r, ToStatus(err)
}

type controlServer struct {
	apiv1.UnimplementedControlServer
	e *emulator.Emulator
}

func (s *controlServer) PutCollectionSchema(ctx context.Context, r *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	resp, err := s.e.PutCollectionSchema(ctx, r)
	return resp, ToStatus(err)
}

func (s *controlServer) GetCollection(ctx context.Context, r *apiv1.GetCollectionRequest) (*apiv1.CollectionStatus, error) {
	resp, err := s.e.GetCollection(ctx, r)
	return resp, ToStatus(err)
}

func (s *controlServer) ListCollections(ctx context.Context, r *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	resp, err := s.e.ListCollections(ctx, r)
	return resp, ToStatus(err)
}

func (s *controlServer) GetProgress(ctx context.Context, r *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	resp, err := s.e.GetProgress(ctx, r)
	return resp, ToStatus(err)
}

type queryServer struct {
	apiv1.UnimplementedQueryServer
	e *emulator.Emulator
}

func (s *queryServer) GetDocument(ctx context.Context, r *apiv1.GetDocumentRequest) (*apiv1.GetDocumentResponse, error) {
	resp, err := s.e.GetDocument(ctx, r)
	return resp, ToStatus(err)
}

func (s *queryServer) Search(ctx context.Context, r *apiv1.SearchRequest) (*apiv1.SearchResponse, error) {
	resp, err := s.e.Search(ctx, r)
	return resp, ToStatus(err)
}
