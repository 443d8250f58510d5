package normalize

import (
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Sink is the narrow slice of the emulator the bridge writes through. The
// in-process emulator and the gRPC client (GRPCSink) both satisfy it.
type Sink interface {
	PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error)
	Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error)
	AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error)
	GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error)
	ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error)
}

// GRPCSink adapts the emulator's gRPC clients to Sink.
type GRPCSink struct {
	Ingester apiv1.IngestClient
	Control  apiv1.ControlClient
}

// NewGRPCSink builds a Sink over one client connection.
func NewGRPCSink(cc grpc.ClientConnInterface) *GRPCSink {
	return &GRPCSink{Ingester: apiv1.NewIngestClient(cc), Control: apiv1.NewControlClient(cc)}
}

func (g *GRPCSink) PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	return g.Control.PutCollectionSchema(ctx, req)
}

func (g *GRPCSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	return g.Ingester.Ingest(ctx, b)
}

func (g *GRPCSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	return g.Ingester.AdvancePartition(ctx, p)
}

func (g *GRPCSink) GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	return g.Control.GetProgress(ctx, req)
}

func (g *GRPCSink) ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	return g.Control.ListCollections(ctx, req)
}
