// Package grpcsink is the bridge's sink over the emulator's gRPC services:
// it lets normalize.Bridge write to an emulator in another process. It
// lives beside the normalize core so the core stays free of transports.
package grpcsink

import (
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Sink adapts the emulator's gRPC clients to normalize.Sink.
type Sink struct {
	Ingester apiv1.IngestClient
	Control  apiv1.ControlClient
}

// New builds a Sink over one client connection.
func New(cc grpc.ClientConnInterface) *Sink {
	return &Sink{Ingester: apiv1.NewIngestClient(cc), Control: apiv1.NewControlClient(cc)}
}

func (g *Sink) PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	return g.Control.PutCollectionSchema(ctx, req)
}

func (g *Sink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	return g.Ingester.Ingest(ctx, b)
}

func (g *Sink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	return g.Ingester.AdvancePartition(ctx, p)
}

func (g *Sink) GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	return g.Control.GetProgress(ctx, req)
}

func (g *Sink) ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	return g.Control.ListCollections(ctx, req)
}
