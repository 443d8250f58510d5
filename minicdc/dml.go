package minicdc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// tablePath is one table's subscription consumer: the synchronous DML
// pipeline of specs/minicdc.md §6. The source calls it from one goroutine
// at a time, so its fields need no lock; only the shared fence does.
type tablePath struct {
	rt  *Runtime
	id  int64
	dec RowDecoder
	out DecodedRow

	// startTs is where the path's subscription starts (exclusive): the
	// runtime's start ts, or the ts a table joined at (M50).
	startTs uint64
	span    kvevent.Span
	cancel  context.CancelFunc
	// gone is set (under Runtime.mu) when the path was removed (M52):
	// later deliveries are dropped.
	gone atomic.Bool

	// resolved is the path's resolved ts: every row <= it has been handed
	// to OnRowChanged and the call returned (M26). It starts at the start
	// ts: rows at or below it are dropped (M20).
	resolved uint64
	reported bool
	// schemaReady caches the highest ts the store is known to have schema
	// history for this table (M22).
	schemaReady uint64
	// lastModel and lastInfo cache the conversion of the schema the path
	// decoded with last: the store hands out one shared model per schema
	// version, so a row converts nothing and allocates nothing.
	lastModel *model.TableInfo
	lastInfo  *TableInfo
}

var _ kvevent.Consumer = (*tablePath)(nil)

func newTablePath(r *Runtime, id int64, dec RowDecoder, startTs uint64) *tablePath {
	return &tablePath{rt: r, id: id, dec: dec, startTs: startTs, resolved: startTs, schemaReady: startTs}
}

// ConsumeKV decodes and delivers a batch synchronously (M19). It has no
// error return: a failure is recorded with the error owner, which stops the
// runtime, and the rest of the batch is not delivered.
func (p *tablePath) ConsumeKV(entries []kvevent.RawKVEntry) {
	r := p.rt
	for i := range entries {
		if r.owner.stopped() || p.gone.Load() {
			return
		}
		if err := p.consumeOne(&entries[i]); err != nil {
			r.owner.fail(err)
			return
		}
	}
}

func (p *tablePath) consumeOne(e *kvevent.RawKVEntry) error {
	r := p.rt
	if e.CRTs <= p.startTs { // M20: the start boundary is exclusive
		r.stats.droppedStart.Add(1)
		return nil
	}
	if e.CRTs <= p.resolved { // M21
		return &FatalError{Trigger: TriggerOrderingAnomaly, TableID: p.id, Ts: e.CRTs,
			Err: fmt.Errorf("row commit_ts %d is at or behind the table's resolved ts %d (key %x)", e.CRTs, p.resolved, e.Key)}
	}
	schemaTs := e.CRTs - 1 // M22: a DML committed at a DDL's ts was written with the old schema
	if schemaTs > p.schemaReady {
		ready, err := r.waitStoreReady(p.id, schemaTs, r.opts.SchemaReadinessTimeout, TriggerSchemaReadiness)
		if err != nil {
			if r.runCtx.Err() != nil && !isFatal(err) {
				return nil // shutting down: the owner already has the reason
			}
			return err
		}
		// The store's resolved ts, not just this row's: the rest of the
		// round's rows below it skip the store (it never goes back).
		p.schemaReady = ready
	}
	ti, err := r.deps.SchemaStore.GetTableInfo(p.id, schemaTs)
	if err == nil && ti == nil {
		err = errors.New("store returned no TableInfo and no error")
	}
	if err != nil {
		return &FatalError{Trigger: TriggerSchemaLookup, TableID: p.id, Ts: e.CRTs,
			Err: fmt.Errorf("GetTableInfo(%d, %d): %w", p.id, schemaTs, err)}
	}
	if e.OpType == kvevent.OpTypePut && len(e.Value) == 0 && len(e.OldValue) == 0 {
		// M23: insert and delete in one transaction leave neither image.
		r.stats.skippedEmpty.Add(1)
		return nil
	}
	p.out = DecodedRow{}
	if err := p.dec.Decode(e, ti, &p.out); err != nil {
		trig := TriggerDecode
		if isMissingOldValue(err) {
			trig = TriggerOldValue
		}
		return &FatalError{Trigger: trig, TableID: p.id, Ts: e.CRTs,
			Err: fmt.Errorf("decoding key %x: %w", e.Key, err)}
	}
	rc := &p.out
	if rc.RowType == mounter.RowTypeUnknown { // M23: the decoder found no row
		r.stats.skippedEmpty.Add(1)
		return nil
	}
	if rc.TableID != 0 && rc.TableID != p.id { // M23: TiKV sent a key outside the span
		return &FatalError{Trigger: TriggerDecode, TableID: p.id, Ts: e.CRTs,
			Err: fmt.Errorf("key %x belongs to table %d, not to the subscribed table %d", e.Key, rc.TableID, p.id)}
	}
	if rc.RowType == mounter.RowTypeUpdate && !r.opts.AllowMissingOldValue && len(e.OldValue) == 0 { // M24
		return &FatalError{Trigger: TriggerOldValue, TableID: p.id, Ts: e.CRTs,
			Err: fmt.Errorf("update of key %x has no old value", e.Key)}
	}
	if r.owner.stopped() { // M41: no callback after the fatal error
		return nil
	}
	if ti != p.lastModel {
		p.lastModel, p.lastInfo = ti, NewTableInfo(ti)
	}
	err = r.cb.OnRowChanged(r.runCtx, RowChanged{
		TableID:   p.id,
		StartTs:   e.StartTs,
		CommitTs:  e.CRTs,
		RowType:   RowType(rc.RowType),
		PreRow:    Row{r: rc.PreRow},
		Row:       Row{r: rc.Row},
		RowKey:    rc.RowKey,
		TableInfo: p.lastInfo,
	})
	if err != nil {
		return callbackErr(p.id, e.CRTs, "OnRowChanged", err)
	}
	r.stats.rows.Add(1)
	return nil
}

// AdvanceResolvedTs records the path's progress (M26) and feeds the fence.
func (p *tablePath) AdvanceResolvedTs(ts uint64) {
	r := p.rt
	if r.owner.stopped() {
		return
	}
	if ts < p.startTs {
		r.owner.fail(&FatalError{Trigger: TriggerOrderingAnomaly, TableID: p.id, Ts: ts,
			Err: fmt.Errorf("resolved ts %d is below the start ts %d", ts, p.startTs)})
		return
	}
	if p.reported {
		if ts == p.resolved {
			return
		}
		if ts < p.resolved {
			r.owner.fail(&FatalError{Trigger: TriggerOrderingAnomaly, TableID: p.id, Ts: ts,
				Err: fmt.Errorf("resolved ts regressed from %d to %d", p.resolved, ts)})
			return
		}
	}
	r.mu.Lock()
	if p.gone.Load() { // M52: removed; the fence no longer knows it
		r.mu.Unlock()
		return
	}
	err := r.fence.Advance(p.id, ts)
	r.mu.Unlock()
	if err != nil {
		r.owner.fail(&FatalError{Trigger: TriggerOrderingAnomaly, TableID: p.id, Ts: ts, Err: err})
		return
	}
	p.resolved = ts
	p.reported = true
	r.signalProgress()
	if o := r.opts.Stages; o != nil {
		o.PathResolved(p.id, ts)
	}
}

func callbackErr(table int64, ts uint64, which string, err error) *FatalError {
	trig := TriggerCallback
	if errors.Is(err, ErrReorderOverflow) {
		trig = TriggerReorderOverflow
	}
	return &FatalError{Trigger: trig, TableID: table, Ts: ts, Err: fmt.Errorf("%s: %w", which, err)}
}

func isFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}

// isMissingOldValue recognises a decoder's "update without old value"
// error: mounter.ErrMissingOldValue, or a MissingOldValue() bool method.
func isMissingOldValue(err error) bool {
	if errors.Is(err, mounter.ErrMissingOldValue) {
		return true
	}
	var m interface{ MissingOldValue() bool }
	return errors.As(err, &m) && m.MissingOldValue()
}
