package minicdc

import (
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/internal/invariants"
	"github.com/searchfabric/sfemu/schemafence"
)

// control is the state of the control loop: the DDL poller (§7) and the
// checkpoint coalescer (§8). Only the control goroutine (or a test driving
// controlStep) touches it.
type control struct {
	r *Runtime

	cursor *schemafence.Cursor
	// ddlKnown: every DDL with FinishedTs <= ddlKnown has reached OnDDL
	// (M33).
	ddlKnown uint64
	finished []uint64 // reused scratch: distinct FinishedTs of a batch
	groupEnd []int    // index after the last event of each FinishedTs group
	failures int      // consecutive transient fetch failures

	// Table-set changes (M50-M54). lastEmitted is the FinishedTs of the
	// last DDL handed to OnDDL (the start ts before any); inDDL is set
	// while OnDDL runs; changed records that a change was applied during
	// the current poll.
	lastEmitted uint64
	inDDL       bool
	changed     bool

	// Checkpoint state, indexed like r.pathOrder.
	cur      []uint64
	last     []uint64
	lastGlob uint64
	emitted  bool
	lastAt   time.Time
	// capped: the last checkpoint computation found a table's resolved ts
	// above ddlKnown (the schema store is behind the table paths, M34a);
	// behind is the loop's current re-poll backoff while it stays so.
	capped bool
	behind time.Duration
	// storeBound: the last poll emitted its whole batch, so ddlKnown is
	// the store's resolved ts, not a DDL held back by the fence (which
	// waits for table progress, and that wakes the loop).
	storeBound bool
}

func (c *control) init(r *Runtime) {
	c.r = r
	c.cursor = schemafence.NewCursor(r.startTs)
	c.ddlKnown = r.startTs
	c.lastEmitted = r.startTs
	c.cur = make([]uint64, len(r.pathOrder))
	c.last = make([]uint64, len(r.pathOrder))
}

// controlLoop runs until the root context ends (M34).
func (r *Runtime) controlLoop() {
	c := &r.ctl
	for {
		if r.owner.stopped() || r.runCtx.Err() != nil {
			return
		}
		advanced := r.storeAdvanced() // before the poll: a later advance wakes the loop
		more, wait, err := c.step()
		if err != nil {
			r.owner.fail(err)
			return
		}
		if more {
			continue
		}
		if wait <= 0 || wait > r.opts.DDLPollInterval {
			wait = r.opts.DDLPollInterval
		}
		wait = c.storeBehindWait(wait)
		select {
		case <-r.runCtx.Done():
			return
		case <-r.progress:
		case <-advanced:
		case <-r.time.After(wait):
		}
	}
}

// step polls DDL once and then considers a checkpoint. more reports that
// a full batch was emitted (poll again at once); wait > 0 is how long until
// a coalesced checkpoint is due.
func (c *control) step() (more bool, wait time.Duration, err error) {
	c.applyQueued()
	more, err = c.pollDDL()
	if err != nil {
		return false, 0, err
	}
	wait, err = c.checkpoint(c.r.time.Now())
	return more, wait, err
}

func (c *control) fence() (uint64, bool) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.fence.Value()
}

// pollDDL fetches the next trigger-DDL batch and emits what the fence
// allows (M28-M35).
func (c *control) pollDDL() (more bool, err error) {
	r := c.r
	fence, ok := c.fence()
	if !ok { // M29: nothing before every table has initial progress
		return false, nil
	}
	cursor := c.cursor.Ts()
	// Fetch even when the fence cannot release anything: the answer still
	// tells how far the store has no DDL (ddlKnown, M33).
	limit := r.cfg.DDLPollLimit
	events, next, err := r.deps.SchemaStore.FetchTableTriggerDDLEvents(cursor, limit)
	if err != nil {
		return false, c.fetchFailed(cursor, err)
	}
	c.failures = 0
	// A store may return more than limit events only to keep events with
	// equal FinishedTs together (the cursor could not resume between them).
	if len(events) > limit {
		for _, ev := range events[limit:] {
			if ev.FinishedTs != events[limit-1].FinishedTs {
				return false, &FatalError{Trigger: TriggerDDLOrder, Ts: cursor,
					Err: fmt.Errorf("fetch from %d returned %d events, more than the limit %d", cursor, len(events), limit)}
			}
		}
	}
	// The cursor rule works on distinct FinishedTs: events sharing one are
	// a group, emitted all together or not at all (M32).
	c.finished = c.finished[:0]
	c.groupEnd = c.groupEnd[:0]
	for i := range events {
		if n := len(c.finished); n > 0 && events[i].FinishedTs == c.finished[n-1] {
			c.groupEnd[n-1] = i + 1
			continue
		}
		c.finished = append(c.finished, events[i].FinishedTs)
		c.groupEnd = append(c.groupEnd, i+1)
	}
	// Plan first, commit the cursor after emitting: a table-set change in
	// OnDDL ends the emission at its FinishedTs group (M54).
	plan, err := schemafence.PlanCursor(c.cursor.Ts(), c.finished, next, fence, true)
	if err != nil {
		return false, &FatalError{Trigger: TriggerDDLOrder, Ts: cursor, Err: fmt.Errorf("fetch from %d: %w", cursor, err)}
	}
	c.changed = false
	groups := 0
	for g := 0; g < plan.Emit; g++ {
		from := 0
		if g > 0 {
			from = c.groupEnd[g-1]
		}
		for i := from; i < c.groupEnd[g]; i++ {
			if r.owner.stopped() {
				return false, nil
			}
			ev := &events[i]
			c.lastEmitted = ev.FinishedTs
			c.inDDL = true
			err := r.cb.OnDDL(r.runCtx, r.known.ddlFor(ev)) // M12, M31
			c.inDDL = false
			if err != nil {
				return false, callbackErr(ev.TableID, ev.FinishedTs, "OnDDL", err)
			}
			r.stats.ddls.Add(1)
		}
		groups = g + 1
		if c.changed {
			break // M54: the fence must first include the new set
		}
	}
	truncated := groups < len(c.finished) && c.changed
	if truncated {
		// Commit the cursor to the last emitted group as if the fetch had
		// ended there.
		_, err = c.cursor.Apply(c.finished[:groups], c.finished[groups-1], fence, true)
	} else {
		_, err = c.cursor.Apply(c.finished, next, fence, true)
	}
	if err != nil {
		return false, &FatalError{Trigger: TriggerDDLOrder, Ts: cursor, Err: fmt.Errorf("fetch from %d: %w", cursor, err)}
	}
	emit := 0
	if groups > 0 {
		emit = c.groupEnd[groups-1]
	}
	// M33: how far every DDL is known delivered. The first event held back
	// bounds it from above; a partial batch means the store has nothing
	// else up to next.
	// The store returns every event in (cursor, next]: a batch is never cut
	// inside a FinishedTs group, and a partial batch ends at its resolved ts.
	known := next
	whole := emit == len(events)
	c.storeBound = whole
	if !whole {
		known = events[emit].FinishedTs - 1
	}
	if known > c.ddlKnown {
		c.ddlKnown = known
		if o := r.opts.Stages; o != nil {
			o.DDLKnown(known)
		}
	}
	// A batch that ended at its last event may have been cut: fetch again.
	more = truncated || whole && len(events) > 0 && next == events[len(events)-1].FinishedTs
	return more, nil
}

func (c *control) fetchFailed(cursor uint64, err error) error {
	r := c.r
	switch {
	case r.opts.IsGCBoundary(err):
		return &FatalError{Trigger: TriggerDDLFetchGC, Ts: cursor, Err: fmt.Errorf("FetchTableTriggerDDLEvents(%d): %w", cursor, err)}
	case r.opts.IsTransient(err):
		c.failures++
		r.stats.fetchFailures.Add(1)
		if c.failures >= r.opts.MaxFetchRetries {
			return &FatalError{Trigger: TriggerDDLFetchRepeated, Ts: cursor,
				Err: fmt.Errorf("%d consecutive transient failures, last: %w", c.failures, err)}
		}
		return nil
	default:
		return &FatalError{Trigger: TriggerDDLFetch, Ts: cursor, Err: fmt.Errorf("FetchTableTriggerDDLEvents(%d): %w", cursor, err)}
	}
}

// checkpoint emits the latest snapshot when it changed and the coalescing
// interval allows (M36-M39). It returns how long until a pending change is
// due (0 when nothing is pending).
func (c *control) checkpoint(now time.Time) (time.Duration, error) {
	r := c.r
	r.mu.Lock()
	_, ok := r.fence.Value()
	c.capped = false
	if ok {
		for i, p := range r.pathOrder {
			ts, _ := r.fence.Table(p.id)
			c.cur[i] = min(ts, c.ddlKnown) // M36
			c.capped = c.capped || c.storeBound && ts > c.ddlKnown
		}
	}
	r.mu.Unlock()
	if !ok || len(c.cur) == 0 {
		return 0, nil // M53: no table, nothing to report
	}
	glob := c.cur[0]
	changed := !c.emitted
	for i, v := range c.cur {
		glob = min(glob, v)
		if v != c.last[i] {
			changed = true
		}
	}
	if !changed {
		return 0, nil
	}
	if c.emitted {
		if due := c.lastAt.Add(r.opts.CheckpointInterval); now.Before(due) { // M38
			return due.Sub(now), nil
		}
		if invariants.Enabled {
			c.checkMonotonic(glob)
		}
	}
	snap := make(map[int64]uint64, len(c.cur)) // M37: a fresh copy each time
	for i, p := range r.pathOrder {
		snap[p.id] = c.cur[i]
	}
	if r.owner.stopped() {
		return 0, nil
	}
	if err := r.cb.OnCheckpoint(r.runCtx, Checkpoint{GlobalResolvedTs: glob, TableResolvedTs: snap}); err != nil {
		return 0, callbackErr(0, glob, "OnCheckpoint", err)
	}
	copy(c.last, c.cur)
	c.lastGlob = glob
	c.emitted = true
	c.lastAt = now
	r.stats.checkpoints.Add(1)
	r.stats.lastGlobalTs.Store(glob)
	return 0, nil
}

// storeBehindWait shortens the loop's sleep while a checkpoint is held
// back by ddlKnown alone (M34a): the tables' resolved ts already passed
// what the schema store reported, and nothing wakes the loop when the
// store catches up (its resolved ts comes through its own feed), so it
// re-polls after PollBackoffMin, doubling up to PollBackoffMax, instead of
// sleeping DDLPollInterval.
func (c *control) storeBehindWait(wait time.Duration) time.Duration {
	o := &c.r.opts
	if !c.capped {
		c.behind = 0
		return wait
	}
	if c.behind == 0 {
		c.behind = o.PollBackoffMin
	} else {
		c.behind = min(2*c.behind, o.PollBackoffMax)
	}
	return min(wait, c.behind)
}

// checkMonotonic asserts M39 under the invariants build tag. A checkpoint
// is the minimum of values that cannot fall, each refused where it enters
// (M39 lists them), so a regression here is a bug in this package, not bad
// input: it panics instead of being a fatal error no input can reach.
func (c *control) checkMonotonic(glob uint64) {
	for i, v := range c.cur {
		if v < c.last[i] {
			panic(fmt.Sprintf("invariant (M39) broken: table %d checkpoint would regress from %d to %d", c.r.pathOrder[i].id, c.last[i], v))
		}
	}
	if glob < c.lastGlob {
		panic(fmt.Sprintf("invariant (M39) broken: global checkpoint would regress from %d to %d", c.lastGlob, glob))
	}
}
