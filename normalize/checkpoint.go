package normalize

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// advance stores the partition's progress when it grew (N22, N23).
func (b *Bridge) advance(ctx context.Context, p *partition, ts uint64) error {
	if p.held || p.retired || !p.coll.active || ts <= p.advanced {
		return nil
	}
	if _, err := b.sink.AdvancePartition(ctx, &apiv1.PartitionProgress{
		SourcePartition: p.name, SourceEpoch: p.seq.epoch, ResolvedTs: ts,
	}); err != nil {
		return fmt.Errorf("normalize: advance %s to %d: %w", p.name, ts, err)
	}
	p.advanced = ts
	p.stateInSink = true
	return nil
}

// CheckpointRegressionError is N23's fatal regression.
type CheckpointRegressionError struct {
	Partition string
	Old, New  uint64
}

func (e *CheckpointRegressionError) Error() string {
	return fmt.Sprintf("normalize: checkpoint for %s regressed: old=%d new=%d", e.Partition, e.Old, e.New)
}

// Checkpoint is the checkpoint path (N22): per partition, ascending by
// name, seal at its resolved ts, ingest, then advance progress.
func (b *Bridge) Checkpoint(ctx context.Context, tableResolved map[int64]uint64) error {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	if !b.opened {
		return fmt.Errorf("normalize: checkpoint before Open")
	}
	if err := b.checkStopped(); err != nil {
		return err
	}
	if b.tableSet != nil {
		// Every DDL of the change's FinishedTs group was delivered (the
		// runtime emits a group before its next checkpoint, M32): the
		// adapter must restart now (N35).
		return b.tableSet
	}
	for id := range tableResolved {
		if _, ok := b.partByID(id); !ok {
			return fmt.Errorf("normalize: checkpoint names table %d, which is not configured", id)
		}
	}
	for _, p := range b.parts {
		ts, ok := tableResolved[p.tableID]
		if !ok {
			continue
		}
		if ts < p.lastCP {
			return &CheckpointRegressionError{Partition: p.name, Old: p.lastCP, New: ts}
		}
		p.lastCP = ts
		if p.held {
			continue // its snapshot is being ingested (LT6)
		}
		if err := b.drainAndIngest(ctx, p, ts, false); err != nil {
			return err
		}
		if err := b.advance(ctx, p, ts); err != nil {
			return err
		}
	}
	return nil
}
