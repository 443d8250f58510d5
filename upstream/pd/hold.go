package pd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Hold keeps a registered ServiceSafePoint alive while an adapter runs:
// a wall-clock loop renews it (every quarter of RefreshEvery), the adapter
// reports its checkpoints with Advance, and a lost history (PD's minimum
// passed the checkpoint) is recorded for the adapter to turn into a fatal
// error at its next checkpoint (SR2). Unlike Run, stopping does not always
// remove the entry: after a fatal stop it stays, so the next adapter (or a
// restart within the TTL) still finds the history (P6).
type Hold struct {
	sp *ServiceSafePoint

	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	lost error

	stopOnce sync.Once
	stopErr  error
}

// StartHold starts renewing sp, which must be registered (HoldGC).
func StartHold(sp *ServiceSafePoint) *Hold {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hold{sp: sp, cancel: cancel, done: make(chan struct{})}
	go h.loop(ctx, max(sp.cfg.RefreshEvery/4, time.Millisecond))
	return h
}

// SafePoint is the held service safe point.
func (h *Hold) SafePoint() *ServiceSafePoint { return h.sp }

func (h *Hold) loop(ctx context.Context, period time.Duration) {
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
		if err := h.sp.Tick(ctx, time.Now().UnixMilli()); errors.Is(err, ErrSnapshotLostByGC) {
			h.mu.Lock()
			h.lost = err
			h.mu.Unlock()
			return
		}
	}
}

// Err is the lost-history error (ErrSnapshotLostByGC) once a renewal
// found PD's minimum past the checkpoint, else nil.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// Stop ends the renewal loop; remove (a clean stop) also deletes the
// entry in PD. It is idempotent: later calls return the first result.
func (h *Hold) Stop(remove bool) error {
	h.stopOnce.Do(func() {
		h.cancel()
		<-h.done
		if remove {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.sp.Remove(ctx); err != nil {
				h.stopErr = fmt.Errorf("pd: clean stop: %w", err)
			}
		}
	})
	return h.stopErr
}
