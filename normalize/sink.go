package normalize

import (
	"context"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Sink is the narrow slice of the emulator the bridge writes through. The
// in-process emulator and the gRPC client (package grpcsink) both satisfy it.
type Sink interface {
	PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error)
	Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error)
	AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error)
	GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error)
	ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error)
}
