package minicdc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/searchfabric/sfemu/schemafence"
)

// activeInstance is the process-wide slot behind the single-active-instance
// rule (M8). There is no service registry to protect; the slot exists
// because one process hosts one adapter.
var activeInstance atomic.Bool

// Runtime is a started Mini-CDC instance. Create it with Start, stop it
// with Close.
type Runtime struct {
	cfg  StartConfig
	deps Deps
	opts Options
	cb   Callback
	time TimeSource

	startTs uint64

	runCtx context.Context
	owner  *errOwner

	// paths is built during startup, then changed by the control
	// goroutine only (M50-M52).
	paths     map[int64]*tablePath
	pathOrder []*tablePath
	nextSubID uint64
	// changes queues table-set changes asked for from other goroutines
	// (ChangeTables); the control goroutine applies them.
	changes chan changeReq

	// mu guards fence: resolved-ts reports come from every path's delivery
	// goroutine, the control loop reads it.
	mu    sync.Mutex
	fence *schemafence.Fence
	// progress is signalled (non-blocking) on every resolved-ts advance.
	progress chan struct{}

	ctl control
	// known are the definitions of the followed tables (DDL.PreTable):
	// written at startup, then by the control goroutine only.
	// known is keyed by logical id.
	known knownTables

	loops         sync.WaitGroup
	sourceStarted bool
	sourceDone    chan struct{}

	closeOnce sync.Once
	closeErr  error
	holdsSlot bool

	stats counters
}

type counters struct {
	rows          atomic.Uint64
	droppedStart  atomic.Uint64
	skippedEmpty  atomic.Uint64
	ddls          atomic.Uint64
	checkpoints   atomic.Uint64
	lastGlobalTs  atomic.Uint64
	fetchFailures atomic.Uint64
}

// Stats is a snapshot of the runtime's counters, for status lines.
type Stats struct {
	RowsDelivered      uint64 // OnRowChanged calls that returned nil
	DroppedStartBound  uint64 // entries with commit_ts <= start ts (M20)
	SkippedEmpty       uint64 // entries that decoded to no row (M23)
	DDLsDelivered      uint64
	Checkpoints        uint64
	LastCheckpointTs   uint64 // GlobalResolvedTs of the last checkpoint
	TransientFetchErrs uint64
}

// Start validates cfg, wires deps and runs the startup sequence of
// specs/minicdc.md M15. It returns once every table has initial progress
// and the control loop runs, or the startup's fatal error (a *FatalError)
// after releasing everything it started.
//
// The runtime stops when ctx is cancelled (cleanly), on a fatal error, or
// on Close; Close must be called in every case to wait for it.
func Start(ctx context.Context, cfg StartConfig, deps Deps, cb Callback, opts Options) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		closeDeps(deps)
		return nil, &FatalError{Trigger: TriggerConfig, Err: err}
	}
	if err := deps.check(); err != nil {
		closeDeps(deps)
		return nil, &FatalError{Trigger: TriggerDependency, Err: err}
	}
	if cb == nil {
		closeDeps(deps)
		return nil, &FatalError{Trigger: TriggerDependency, Err: errors.New("nil Callback")}
	}
	if !activeInstance.CompareAndSwap(false, true) {
		closeDeps(deps)
		return nil, &FatalError{Trigger: TriggerDependency, Err: ErrAnotherInstance}
	}
	cfg.TableIDs = append([]int64(nil), cfg.TableIDs...)
	if cfg.TableStartTs != nil {
		starts := make(map[int64]uint64, len(cfg.TableStartTs))
		for id, ts := range cfg.TableStartTs {
			starts[id] = ts
		}
		cfg.TableStartTs = starts
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &Runtime{
		cfg:        cfg,
		deps:       deps,
		opts:       opts.withDefaults(),
		cb:         cb,
		time:       deps.Time,
		runCtx:     runCtx,
		owner:      newErrOwner(cancel),
		paths:      make(map[int64]*tablePath, len(cfg.TableIDs)),
		progress:   make(chan struct{}, 1),
		changes:    make(chan changeReq, 16),
		sourceDone: make(chan struct{}),
		holdsSlot:  true,
	}
	if r.time == nil {
		r.time = RealTime{}
	}
	if err := r.startup(ctx); err != nil {
		r.owner.fail(err)
		// Close returns the first recorded error, which may be err or an
		// earlier one raised concurrently (e.g. by a path during the wait).
		return nil, r.Close()
	}
	// A parent context cancelled after startup is a clean stop.
	go func() {
		select {
		case <-runCtx.Done():
			if ctx.Err() != nil {
				r.owner.fail(nil)
			}
		case <-r.owner.done:
		}
	}()
	return r, nil
}

func (r *Runtime) startup(parent context.Context) error {
	fence, err := schemafence.NewFence(r.cfg.TableIDs)
	if err != nil {
		return &FatalError{Trigger: TriggerConfig, Err: err}
	}
	r.fence = fence

	// Clock/TSO: the start point must not be in the future (M5).
	now, err := r.deps.Clock.CurrentTs(r.runCtx)
	if err != nil {
		return r.startupErr(parent, &FatalError{Trigger: TriggerDependency, Err: fmt.Errorf("reading TSO: %w", err)})
	}
	r.startTs = r.cfg.StartTs
	if r.startTs == 0 {
		r.startTs = now
	} else if r.startTs > now {
		return &FatalError{Trigger: TriggerConfig, Ts: r.startTs, Err: fmt.Errorf("StartConfig.StartTs %d is after the current TSO %d", r.startTs, now)}
	}

	// KV source runs for the runtime's whole life (M15 step 4).
	r.sourceStarted = true
	go func() {
		defer close(r.sourceDone)
		err := r.deps.Source.Run(r.runCtx)
		if r.runCtx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("Run returned before shutdown")
		}
		r.owner.fail(&FatalError{Trigger: TriggerSource, Err: err})
	}()

	// Explicit keyspace registration with the long-lived context (M15, M16).
	if err := r.deps.SchemaStore.RegisterKeyspace(r.runCtx, r.cfg.KeyspaceID); err != nil {
		return r.startupErr(parent, &FatalError{Trigger: TriggerDependency, Err: fmt.Errorf("RegisterKeyspace(%d): %w", r.cfg.KeyspaceID, err)})
	}

	for _, id := range r.cfg.TableIDs {
		// M55: a table with progress of its own above the start ts starts
		// there (it may not even exist at the start ts).
		p, err := r.preparePath(id, max(r.startTs, r.cfg.TableStartTs[id]), TriggerStartupReadiness)
		if err != nil {
			return r.startupErr(parent, err)
		}
		if err := r.subscribePath(p); err != nil {
			return r.startupErr(parent, err)
		}
	}

	if err := r.waitInitialProgress(); err != nil {
		return r.startupErr(parent, err)
	}
	r.ctl.init(r)
	if !r.opts.manualControl {
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			r.controlLoop()
		}()
	}
	return nil
}

// startupErr prefers the error already recorded (a path may have failed
// during the wait) and turns a cancelled parent into its context error.
func (r *Runtime) startupErr(parent context.Context, err error) error {
	if prev := r.owner.get(); prev != nil {
		return prev
	}
	if parent.Err() != nil {
		return parent.Err()
	}
	return err
}

// waitStoreReady polls GetTableDDLEventState with bounded backoff until the
// store's resolved ts for table reaches ts, or timeout passes (M16, M22); a
// store that announces its progress (StoreNotifier) wakes it at once. It
// returns the store's resolved ts it saw (>= ts).
func (r *Runtime) waitStoreReady(table int64, ts uint64, timeout time.Duration, trigger Trigger) (uint64, error) {
	deadline := r.time.Now().Add(timeout)
	backoff := r.opts.PollBackoffMin
	var last uint64
	for {
		advanced := r.storeAdvanced() // before the read: a later advance closes it
		st, err := r.deps.SchemaStore.GetTableDDLEventState(table)
		if err != nil {
			return 0, &FatalError{Trigger: trigger, TableID: table, Ts: ts, Err: fmt.Errorf("GetTableDDLEventState: %w", err)}
		}
		if st.ResolvedTs >= ts {
			return st.ResolvedTs, nil
		}
		last = st.ResolvedTs
		if !r.time.Now().Before(deadline) {
			return 0, &FatalError{Trigger: trigger, TableID: table, Ts: ts,
				Err: fmt.Errorf("schema store resolved ts %d did not reach %d within %v", last, ts, timeout)}
		}
		select {
		case <-r.runCtx.Done():
			return 0, r.runCtx.Err()
		case <-advanced:
			continue // the store moved: check again at once
		case <-r.time.After(backoff):
		}
		backoff *= 2
		if backoff > r.opts.PollBackoffMax {
			backoff = r.opts.PollBackoffMax
		}
	}
}

// storeAdvanced is the store's progress announcement (StoreNotifier), or
// nil (a channel that never fires) for a store without one.
func (r *Runtime) storeAdvanced() <-chan struct{} {
	if n, ok := r.deps.SchemaStore.(StoreNotifier); ok {
		return n.ResolvedAdvanced()
	}
	return nil
}

// waitInitialProgress waits until every table reported a resolved ts (M18).
func (r *Runtime) waitInitialProgress() error {
	deadline := r.time.Now().Add(r.opts.InitialProgressTimeout)
	for {
		r.mu.Lock()
		_, ok := r.fence.Value()
		var missing []int64
		if !ok {
			missing = r.fence.Missing()
		}
		r.mu.Unlock()
		if ok {
			return nil
		}
		if err := r.owner.get(); err != nil {
			return err
		}
		if !r.time.Now().Before(deadline) {
			return &FatalError{Trigger: TriggerInitialProgress, TableID: missing[0], Ts: r.startTs,
				Err: fmt.Errorf("tables %v reported no resolved ts within %v", missing, r.opts.InitialProgressTimeout)}
		}
		select {
		case <-r.runCtx.Done():
			if err := r.owner.get(); err != nil {
				return err
			}
			return r.runCtx.Err()
		case <-r.progress:
		case <-r.time.After(r.opts.PollBackoffMax):
		}
	}
}

// signalProgress wakes the control loop without blocking the path.
func (r *Runtime) signalProgress() {
	select {
	case r.progress <- struct{}{}:
	default:
	}
}

// StartTs is the effective start ts (the TSO read at startup when
// StartConfig.StartTs was 0).
func (r *Runtime) StartTs() uint64 { return r.startTs }

// Done is closed when the runtime stops: a fatal error, a cancelled parent
// context, or Close.
func (r *Runtime) Done() <-chan struct{} { return r.owner.done }

// Err returns the fatal error, or nil while running or after a clean stop.
func (r *Runtime) Err() error { return r.owner.get() }

// Stats returns the current counters.
func (r *Runtime) Stats() Stats {
	return Stats{
		RowsDelivered:      r.stats.rows.Load(),
		DroppedStartBound:  r.stats.droppedStart.Load(),
		SkippedEmpty:       r.stats.skippedEmpty.Load(),
		DDLsDelivered:      r.stats.ddls.Load(),
		Checkpoints:        r.stats.checkpoints.Load(),
		LastCheckpointTs:   r.stats.lastGlobalTs.Load(),
		TransientFetchErrs: r.stats.fetchFailures.Load(),
	}
}

// Close stops the runtime in the order of M40 and returns the first fatal
// error (nil after a clean stop). It is idempotent.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		r.owner.fail(nil) // clean stop unless a fatal error came first
		r.loops.Wait()
		if r.sourceStarted {
			<-r.sourceDone
		}
		closeErrs := closeDeps(r.deps)
		if r.holdsSlot {
			activeInstance.Store(false)
		}
		r.closeErr = r.owner.get()
		if r.closeErr == nil && closeErrs != nil {
			r.closeErr = closeErrs
		}
	})
	return r.closeErr
}

// closeDeps closes the source and, when it can be closed, the schema store
// (M9).
func closeDeps(d Deps) error {
	var errs []error
	if d.Source != nil {
		if err := d.Source.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing KV source: %w", err))
		}
	}
	if c, ok := d.SchemaStore.(io.Closer); ok && c != nil {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing schema store: %w", err))
		}
	}
	return errors.Join(errs...)
}
