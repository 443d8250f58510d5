package adapter

// Startup phase 5, the bridge: the callback chain the runtime delivers
// to. The normalize bridge turns callbacks into batches, schema requests
// and progress; a test's tap sees each callback first, and over PD the GC
// hold follows every checkpoint the bridge accepted.

import (
	"context"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// callbacks chains tap (optional) → bridge, behind the GC hold (optional).
func callbacks(bridge *normalize.Bridge, tap minicdc.Callback, hold *pd.Hold) minicdc.Callback {
	var cb minicdc.Callback = bridge
	if tap != nil {
		cb = tapped{tap: tap, next: bridge}
	}
	if hold != nil {
		cb = gcCallback{next: cb, hold: hold}
	}
	return cb
}

// tapped calls tap, then next.
type tapped struct{ tap, next minicdc.Callback }

func (t tapped) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	if err := t.tap.OnRowChanged(ctx, ev); err != nil {
		return err
	}
	return t.next.OnRowChanged(ctx, ev)
}

func (t tapped) OnDDL(ctx context.Context, ev minicdc.DDL) error {
	if err := t.tap.OnDDL(ctx, ev); err != nil {
		return err
	}
	return t.next.OnDDL(ctx, ev)
}

func (t tapped) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	if err := t.tap.OnCheckpoint(ctx, cp); err != nil {
		return err
	}
	return t.next.OnCheckpoint(ctx, cp)
}
