package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// gcHold keeps the adapter's service GC safe point alive while it runs:
// every checkpoint the runtime reports (after the bridge took it) advances
// it, a ticker renews it, and a lost history (PD's minimum passed the
// checkpoint) stops the runtime at its next checkpoint (SR2).
type gcHold struct {
	keeper *pd.ServiceSafePoint

	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	lost error

	stopOnce sync.Once
	stopErr  error
}

func startGCHold(keeper *pd.ServiceSafePoint, cfg pd.ServiceSafePointConfig) *gcHold {
	every := cfg.RefreshEvery
	if every <= 0 {
		every = time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &gcHold{keeper: keeper, cancel: cancel, done: make(chan struct{})}
	go h.loop(ctx, max(every/4, time.Millisecond))
	return h
}

func (h *gcHold) loop(ctx context.Context, period time.Duration) {
	defer close(h.done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Renewal errors other than a lost history are retried on the
		// next tick: the TTL leaves ample time (P7).
		if err := h.keeper.Tick(ctx, time.Now().UnixMilli()); errors.Is(err, pd.ErrSnapshotLostByGC) {
			h.mu.Lock()
			h.lost = err
			h.mu.Unlock()
			return
		}
	}
}

func (h *gcHold) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// stop ends the renewal loop; remove (a clean stop) also deletes the
// entry in PD.
func (h *gcHold) stop(remove bool) error {
	h.stopOnce.Do(func() {
		h.cancel()
		<-h.done
		if remove {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.keeper.Remove(ctx); err != nil {
				h.stopErr = fmt.Errorf("pipeline: clean stop: %w", err)
			}
		}
	})
	return h.stopErr
}

// gcCallback advances the GC hold on every checkpoint next accepted, and
// turns a lost history into the callback's (fatal) error.
type gcCallback struct {
	next minicdc.Callback
	hold *gcHold
}

func (g gcCallback) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	return g.next.OnRowChanged(ctx, ev)
}

func (g gcCallback) OnDDL(ctx context.Context, ev minicdc.DDLOutput) error {
	return g.next.OnDDL(ctx, ev)
}

func (g gcCallback) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	if err := g.hold.err(); err != nil {
		return fmt.Errorf("pipeline: checkpoint %d: %w", cp.GlobalResolvedTs, err)
	}
	if err := g.next.OnCheckpoint(ctx, cp); err != nil {
		return err
	}
	g.hold.keeper.Advance(cp.GlobalResolvedTs)
	return nil
}
