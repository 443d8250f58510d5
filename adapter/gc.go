package adapter

// Startup phase 2, the GC hold: over PD the adapter holds a service GC
// safe point at its resume point before anything reads history, and then
// at every checkpoint it reports (SR2). In process there is no GC.

import (
	"context"
	"fmt"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// holdGC registers the service safe point at startTs − 1 and starts
// renewing it; nil (no hold) when the upstream is not read through PD. A
// start ts GC already passed fails here, naming both (P4).
func holdGC(ctx context.Context, up *Upstream, cfg pd.ServiceSafePointConfig, startTs uint64) (*pd.Hold, error) {
	if up.PD == nil {
		return nil, nil
	}
	keeper, err := up.PD.HoldGC(ctx, cfg, startTs)
	if err != nil {
		return nil, fmt.Errorf("adapter: start ts %d: %w", startTs, err)
	}
	return pd.StartHold(keeper), nil
}

// gcCallback advances the GC hold on every checkpoint next accepted, and
// turns a lost history into the callback's (fatal) error (SR2).
type gcCallback struct {
	next minicdc.Callback
	hold *pd.Hold
}

func (g gcCallback) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	return g.next.OnRowChanged(ctx, ev)
}

func (g gcCallback) OnDDL(ctx context.Context, ev minicdc.DDL) error {
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
