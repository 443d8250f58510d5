package pd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// GCAPI is the part of the PD client the GC helpers use (the real
// pd.Client satisfies it; tests pass doubles).
type GCAPI interface {
	UpdateServiceGCSafePoint(ctx context.Context, serviceID string, ttl int64, safePoint uint64) (uint64, error)
}

// ErrStartTsBeforeGC: a subscription or snapshot would start below the GC
// safe point, where history may already be collected.
var ErrStartTsBeforeGC = errors.New("start ts is below the GC safe point")

// ErrSnapshotLostByGC: while running, the cluster's GC safe point passed
// the adapter's checkpoint (its service safe point lapsed): the history the
// adapter still needs may be gone.
var ErrSnapshotLostByGC = errors.New("checkpoint is below the GC safe point: history lost")

// probeServiceID is the throwaway service id used to read the current
// minimum service safe point: an update with ttl 0 deletes the (absent)
// entry and answers the minimum of the others (facts §6). Never use the
// adapter's real id for this.
const probeServiceID = "sfemu-gc-probe"

// GCSafePoint returns the minimum service GC safe point, which bounds the
// cluster's GC safe point from above (TiDB's GC worker registers under
// "gc_worker" before advancing it) (P3).
func GCSafePoint(ctx context.Context, api GCAPI) (uint64, error) {
	min, err := api.UpdateServiceGCSafePoint(ctx, probeServiceID, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("pd: read GC safe point: %w", err)
	}
	return min, nil
}

// CheckStartTs fails with ErrStartTsBeforeGC, naming both values, when
// startTs is below the GC safe point (P3).
func CheckStartTs(ctx context.Context, api GCAPI, startTs uint64) error {
	sp, err := GCSafePoint(ctx, api)
	if err != nil {
		return err
	}
	if startTs < sp {
		return fmt.Errorf("pd: start ts %d < GC safe point %d: %w", startTs, sp, ErrStartTsBeforeGC)
	}
	return nil
}

// ServiceSafePointConfig tunes a ServiceSafePoint.
type ServiceSafePointConfig struct {
	// ServiceID names the adapter's entry in PD (required; one per
	// adapter instance).
	ServiceID string
	// TTL is how long PD keeps the entry without a renewal (default 24 h,
	// TiCDC's gc-ttl): a stopped adapter holds GC back at most this long.
	TTL time.Duration
	// RefreshEvery is the renewal period (default 1 min, as TiCDC).
	RefreshEvery time.Duration
}

// ServiceSafePoint keeps a PD service GC safe point at the adapter's
// checkpoint − 1 (reads at the checkpoint, and at checkpoint − 1 for the
// schema snapshot, stay possible), renews it while running and removes it
// on a clean stop (P4-P7). Time is passed in (milliseconds), so tests drive
// it without sleeping; Run is the wall-clock loop.
type ServiceSafePoint struct {
	api GCAPI
	cfg ServiceSafePointConfig

	mu          sync.Mutex
	checkpoint  uint64
	lastRenewMs int64
	registered  bool
}

// NewServiceSafePoint returns a keeper; nothing is sent before Register.
func NewServiceSafePoint(api GCAPI, cfg ServiceSafePointConfig) (*ServiceSafePoint, error) {
	if cfg.ServiceID == "" {
		return nil, fmt.Errorf("pd: service safe point: empty service id")
	}
	if cfg.ServiceID == probeServiceID {
		return nil, fmt.Errorf("pd: service safe point: %q is reserved for probing", probeServiceID)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = time.Minute
	}
	if cfg.RefreshEvery >= cfg.TTL {
		return nil, fmt.Errorf("pd: service safe point: refresh period %s must be shorter than the TTL %s", cfg.RefreshEvery, cfg.TTL)
	}
	return &ServiceSafePoint{api: api, cfg: cfg}, nil
}

func heldFor(checkpoint uint64) uint64 {
	if checkpoint == 0 {
		return 0
	}
	return checkpoint - 1
}

func (k *ServiceSafePoint) ttlSeconds() int64 {
	s := int64(k.cfg.TTL / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// update sends the held value and checks PD kept it: PD refuses a value
// below the current minimum and answers that minimum instead.
func (k *ServiceSafePoint) update(ctx context.Context, checkpoint uint64, nowMs int64, sentinel error) error {
	held := heldFor(checkpoint)
	min, err := k.api.UpdateServiceGCSafePoint(ctx, k.cfg.ServiceID, k.ttlSeconds(), held)
	if err != nil {
		return fmt.Errorf("pd: update service safe point %q to %d: %w", k.cfg.ServiceID, held, err)
	}
	if min > held {
		return fmt.Errorf("pd: service %q: ts %d (held at %d) < GC safe point %d: %w", k.cfg.ServiceID, checkpoint, held, min, sentinel)
	}
	k.lastRenewMs = nowMs
	return nil
}

// Register creates the entry at startTs − 1 and fails with
// ErrStartTsBeforeGC (naming both) when the GC safe point is already past
// it (P4).
func (k *ServiceSafePoint) Register(ctx context.Context, startTs uint64, nowMs int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.update(ctx, startTs, nowMs, ErrStartTsBeforeGC); err != nil {
		return err
	}
	k.checkpoint = startTs
	k.registered = true
	return nil
}

// Advance records a new checkpoint (only increases count). It is sent on
// the next renewal, not at once: PD is not called per checkpoint (P5).
func (k *ServiceSafePoint) Advance(checkpoint uint64) {
	k.mu.Lock()
	if checkpoint > k.checkpoint {
		k.checkpoint = checkpoint
	}
	k.mu.Unlock()
}

// Held is the safe point value the keeper holds (checkpoint − 1).
func (k *ServiceSafePoint) Held() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return heldFor(k.checkpoint)
}

// Tick renews the entry when RefreshEvery has passed since the last
// renewal (P5). It returns ErrSnapshotLostByGC when PD's minimum passed
// the checkpoint (the entry had lapsed and GC ran).
func (k *ServiceSafePoint) Tick(ctx context.Context, nowMs int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.registered || nowMs-k.lastRenewMs < k.cfg.RefreshEvery.Milliseconds() {
		return nil
	}
	return k.update(ctx, k.checkpoint, nowMs, ErrSnapshotLostByGC)
}

// Remove deletes the entry (ttl 0, safe point MaxUint64), so a cleanly
// stopped adapter does not hold GC back (P6).
func (k *ServiceSafePoint) Remove(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.registered {
		return nil
	}
	if _, err := k.api.UpdateServiceGCSafePoint(ctx, k.cfg.ServiceID, 0, math.MaxUint64); err != nil {
		return fmt.Errorf("pd: remove service safe point %q: %w", k.cfg.ServiceID, err)
	}
	k.registered = false
	return nil
}

// Run renews on a wall-clock ticker until ctx ends, then removes the entry
// (with its own short deadline, since ctx is already done) (P7). A lost
// history is returned at once; renewal errors from PD are retried on the
// next tick, because the TTL leaves ample time.
func (k *ServiceSafePoint) Run(ctx context.Context, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	period := k.cfg.RefreshEvery / 4
	if period <= 0 {
		period = k.cfg.RefreshEvery
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return k.Remove(rctx)
		case <-t.C:
			if err := k.Tick(ctx, now().UnixMilli()); errors.Is(err, ErrSnapshotLostByGC) {
				return err
			}
		}
	}
}
