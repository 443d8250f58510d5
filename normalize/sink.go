package normalize

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
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

// RowSink is a Sink that also takes batches whose upserts carry their
// values positionally (E44): the in-process emulator. The bridge and the
// snapshot build such batches for it, which saves a map per row on both
// sides; any other sink (gRPC, wrappers, test doubles) gets the canonical
// form.
type RowSink interface {
	IngestRows(ctx context.Context, b *apiv1.MutationBatch, rows *contract.Rows) (*apiv1.IngestResponse, error)
}

// sinkIngest sends b (with rows, when it was built positionally).
func sinkIngest(ctx context.Context, s Sink, b *apiv1.MutationBatch, rows *contract.Rows) (*apiv1.IngestResponse, error) {
	if rows == nil {
		return s.Ingest(ctx, b)
	}
	rs, ok := s.(RowSink)
	if !ok {
		// Built positionally only for a RowSink: never send the
		// mutations without their values.
		return nil, fmt.Errorf("normalize: batch of %s built with positional rows for a sink (%T) that does not take them", b.GetSourcePartition(), s)
	}
	return rs.IngestRows(ctx, b, rows)
}
