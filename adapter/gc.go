package adapter

import (
	"context"
	"fmt"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// gcCallback advances the GC hold on every checkpoint next accepted, and
// turns a lost history into the callback's (fatal) error (SR2).
type gcCallback struct {
	next minicdc.Callback
	hold *pd.Hold
}

func (g gcCallback) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	return g.next.OnRowChanged(ctx, ev)
}

func (g gcCallback) OnDDL(ctx context.Context, ev minicdc.DDLOutput) error {
	return g.next.OnDDL(ctx, ev)
}

func (g gcCallback) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	if err := g.hold.Err(); err != nil {
		return fmt.Errorf("adapter: checkpoint %d: %w", cp.GlobalResolvedTs, err)
	}
	if err := g.next.OnCheckpoint(ctx, cp); err != nil {
		return err
	}
	g.hold.SafePoint().Advance(cp.GlobalResolvedTs)
	return nil
}
