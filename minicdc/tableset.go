package minicdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/sfemu/schemafence"
)

// TableChange changes the followed table set while the runtime runs
// (specs/minicdc.md M50-M54): Add is followed from StartTs (exclusive, as
// StartConfig.StartTs), Remove is unsubscribed. Removals apply before
// additions.
type TableChange struct {
	Add []int64
	// StartTs is where the added tables start. In OnDDL it is the DDL's
	// FinishedTs (the table's creation); from ChangeTables, 0 means the
	// current TSO.
	StartTs uint64
	Remove  []int64
	// Prepare, when set, runs on the control goroutine once the change is
	// validated and its start ts fixed, before any path changes: the host
	// readies its side for rows from startTs (a collection for an added
	// table). An error it returns aborts the change unapplied.
	Prepare func(startTs uint64) error
}

// ErrTableChangeOutsideDDL is returned by ChangeTablesInDDL called when no
// OnDDL call is running.
var ErrTableChangeOutsideDDL = errors.New("minicdc: ChangeTablesInDDL called outside OnDDL (use ChangeTables)")

type changeReq struct {
	ch   TableChange
	done chan error
}

// ChangeTablesInDDL applies ch from inside an OnDDL callback, on the
// control goroutine, before the next DDL is considered (M54): the poller
// emits nothing after the current FinishedTs group until the fence has
// been recomputed over the new set. ch.StartTs must not be below the
// floor (M51): the FinishedTs of the DDL being delivered is the usual
// value. An error leaves the set unchanged.
func (r *Runtime) ChangeTablesInDDL(ch TableChange) error {
	c := &r.ctl
	if !c.inDDL {
		return ErrTableChangeOutsideDDL
	}
	if err := c.applyChange(ch); err != nil {
		return err
	}
	c.changed = true
	return nil
}

// ChangeTables applies ch from any goroutine but the control goroutine
// (an OnDDL callback uses ChangeTablesInDDL): the control loop applies it
// between two polls and the call returns its result (M54). ch.StartTs 0
// is the current TSO, which is never below the floor. An error leaves the
// set unchanged; a cancelled ctx returns its error, and the change may
// still be applied.
func (r *Runtime) ChangeTables(ctx context.Context, ch TableChange) error {
	req := changeReq{ch: ch, done: make(chan error, 1)}
	select {
	case r.changes <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.owner.done:
		return r.stoppedErr()
	}
	r.signalProgress()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.owner.done:
		return r.stoppedErr()
	}
}

func (r *Runtime) stoppedErr() error {
	if err := r.owner.get(); err != nil {
		return fmt.Errorf("minicdc: runtime stopped: %w", err)
	}
	return errors.New("minicdc: runtime stopped")
}

// Tables returns the followed physical ids in the order they were added.
// Control goroutine only (tests use it between steps).
func (r *Runtime) tables() []int64 {
	out := make([]int64, len(r.pathOrder))
	for i, p := range r.pathOrder {
		out[i] = p.id
	}
	return out
}

// applyQueued applies the changes other goroutines asked for (control
// goroutine, before a poll).
func (c *control) applyQueued() {
	for {
		select {
		case req := <-c.r.changes:
			ch := req.ch
			if ch.StartTs == 0 && len(ch.Add) > 0 {
				now, err := c.r.deps.Clock.CurrentTs(c.r.runCtx)
				if err != nil {
					req.done <- fmt.Errorf("minicdc: adding tables %v: reading TSO: %w", ch.Add, err)
					continue
				}
				ch.StartTs = now
			}
			req.done <- c.applyChange(ch)
		default:
			return
		}
	}
}

// floor is the lowest start ts a table may join at (M51): the last DDL
// handed to OnDDL and the last global checkpoint are past everything
// below it.
func (c *control) floor() uint64 { return max(c.lastEmitted, c.lastGlob) }

// applyChange removes, then adds. Everything that can fail without side
// effects (validation, store readiness, probe, decoder, span) runs before
// the fence and the paths change; a failed subscribe is undone.
func (c *control) applyChange(ch TableChange) error {
	r := c.r
	for _, id := range ch.Remove {
		if r.paths[id] == nil {
			return fmt.Errorf("minicdc: removing table %d: not followed (following %v)", id, r.tables())
		}
	}
	seen := map[int64]bool{}
	for _, id := range ch.Add {
		if id <= 0 {
			return fmt.Errorf("minicdc: adding table %d: table ids must be > 0", id)
		}
		if seen[id] || (r.paths[id] != nil && !contains(ch.Remove, id)) {
			return fmt.Errorf("minicdc: adding table %d: already followed", id)
		}
		seen[id] = true
	}
	if len(ch.Add) > 0 && ch.StartTs < c.floor() {
		return &schemafence.AddBelowFloorError{TableID: ch.Add[0], Ts: ch.StartTs, Floor: c.floor()}
	}
	var prepared []*tablePath
	for _, id := range ch.Add {
		p, err := r.preparePath(id, ch.StartTs, TriggerSchemaReadiness)
		if err != nil {
			return fmt.Errorf("minicdc: adding table %d at %d: %w", id, ch.StartTs, err)
		}
		prepared = append(prepared, p)
	}
	if ch.Prepare != nil {
		if err := ch.Prepare(ch.StartTs); err != nil {
			return err
		}
	}
	for _, id := range ch.Remove {
		c.removePath(r.paths[id])
	}
	for i, p := range prepared {
		r.mu.Lock()
		err := r.fence.Add(p.id, p.startTs, c.floor())
		r.mu.Unlock()
		if err == nil {
			err = r.subscribePath(p)
			if err != nil {
				r.mu.Lock()
				_ = r.fence.Remove(p.id)
				r.mu.Unlock()
			}
		}
		if err != nil {
			for _, q := range prepared[:i] {
				c.removePath(q)
			}
			return fmt.Errorf("minicdc: adding table %d at %d: %w", p.id, p.startTs, err)
		}
		c.cur = append(c.cur, 0)
		c.last = append(c.last, 0)
	}
	return nil
}

// removePath unsubscribes p (M52): its reports stop counting at once,
// rows still in flight are dropped, its subscription ends.
func (c *control) removePath(p *tablePath) {
	r := c.r
	r.mu.Lock()
	p.gone.Store(true)
	_ = r.fence.Remove(p.id) // p is in the set: paths and fence change together
	r.mu.Unlock()
	p.cancel()
	delete(r.paths, p.id)
	for i, q := range r.pathOrder {
		if q == p {
			r.pathOrder = append(r.pathOrder[:i], r.pathOrder[i+1:]...)
			if i < len(c.cur) {
				c.cur = append(c.cur[:i], c.cur[i+1:]...)
				c.last = append(c.last[:i], c.last[i+1:]...)
			}
			break
		}
	}
}

func contains(ids []int64, id int64) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// preparePath runs the per-table startup steps up to the subscription
// (M15 step 6, M16, M17) for a table starting at startTs, without
// touching the followed set.
func (r *Runtime) preparePath(id int64, startTs uint64, readiness Trigger) (*tablePath, error) {
	timeout := r.opts.StartupReadinessTimeout
	if readiness == TriggerSchemaReadiness {
		timeout = r.opts.SchemaReadinessTimeout
	}
	if _, err := r.waitStoreReady(id, startTs, timeout, readiness); err != nil {
		return nil, err
	}
	if err := r.deps.SchemaStore.RegisterTable(id, startTs); err != nil {
		return nil, &FatalError{Trigger: TriggerRegisterTable, TableID: id, Ts: startTs, Err: err}
	}
	ti, err := r.deps.SchemaStore.GetTableInfo(id, startTs)
	if err == nil && ti == nil {
		err = errors.New("store returned no TableInfo and no error")
	}
	if err != nil {
		return nil, &FatalError{Trigger: TriggerStartupProbe, TableID: id, Ts: startTs, Err: err}
	}
	if r.known == nil {
		r.known = knownTables{}
	}
	if r.known[ti.ID] == nil {
		r.known[ti.ID] = NewTableInfo(ti)
	}
	dec, err := r.deps.NewDecoder(id)
	if err != nil || dec == nil {
		if err == nil {
			err = errors.New("NewDecoder returned nil")
		}
		return nil, &FatalError{Trigger: TriggerDependency, TableID: id, Err: err}
	}
	span, err := r.deps.TableSpan(r.cfg.KeyspaceID, r.cfg.NextGen, id)
	if err != nil {
		return nil, &FatalError{Trigger: TriggerSubscribe, TableID: id, Ts: startTs, Err: fmt.Errorf("building span: %w", err)}
	}
	p := newTablePath(r, id, dec, startTs)
	p.span = span
	return p, nil
}

// subscribePath makes p a followed path and subscribes its span from its
// start ts on a context of its own, so a removal ends just this
// subscription.
func (r *Runtime) subscribePath(p *tablePath) error {
	ctx, cancel := context.WithCancel(r.runCtx)
	p.cancel = cancel
	r.paths[p.id] = p
	r.pathOrder = append(r.pathOrder, p)
	r.nextSubID++
	if err := r.deps.Source.Subscribe(ctx, r.nextSubID, p.span, p.startTs, p); err != nil {
		cancel()
		delete(r.paths, p.id)
		r.pathOrder = r.pathOrder[:len(r.pathOrder)-1]
		return &FatalError{Trigger: TriggerSubscribe, TableID: p.id, Ts: p.startTs, Err: err}
	}
	return nil
}
