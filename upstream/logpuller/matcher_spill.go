package logpuller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/kvproto/pkg/cdcpb"
)

// The matcher's side of the memory quota (specs/logpuller.md LP13-LP16):
// the span core decides when a region's prewrites go to disk and resolves
// COMMITs and ROLLBACKs over memory and runs; the PrewriteStore does the
// I/O.

// admit charges delta more held bytes against the span cap (LP11) and the
// shared memory quota; a negative delta is given back.
func (p *SpanPuller) admit(delta int) bool {
	if delta <= 0 {
		p.release(-delta)
		return true
	}
	if p.heldBytes+delta > p.quota {
		return false
	}
	if !p.mm.Memory.TryAcquire(int64(delta)) {
		return false
	}
	p.heldBytes += delta
	return true
}

// release gives back n held bytes.
func (p *SpanPuller) release(n int) {
	p.heldBytes -= n
	p.mm.Memory.Release(int64(n))
}

// holdPrewrite keeps a PREWRITE until its COMMIT: in memory when it fits
// (LP11, LP13), else, with a store, after spilling the region's prewrites
// held in memory, or in the region's tail run (LP14); without a store
// the region is failed (LP11).
func (p *SpanPuller) holdPrewrite(st *regionState, r *cdcpb.Event_Row) (*RegionRetry, error) {
	delta, ignore := st.m.prewriteDelta(r)
	if ignore {
		return nil, nil
	}
	if p.admit(delta) {
		st.m.putPrewrite(r, delta)
		return nil, nil
	}
	if p.mm.Store == nil {
		return p.FailRegion(st.regionID, RetryMatcherQuota, nil), nil
	}
	if st.m.held.n > 0 {
		if err := p.spillMemory(st); err != nil {
			return nil, p.spillFatal(st, err)
		}
		if delta, _ = st.m.prewriteDelta(r); p.admit(delta) {
			st.m.putPrewrite(r, delta)
			return nil, nil
		}
	}
	if err := p.appendTail(st, r); err != nil {
		return nil, p.spillFatal(st, err)
	}
	return nil, nil
}

// spillFatal turns a spill failure into the fatal error that stops the
// feed (LP15, LP16); it is sticky.
func (p *SpanPuller) spillFatal(st *regionState, err error) error {
	if fe, ok := err.(*FatalError); ok {
		p.spillErr = fe
		return fe
	}
	reason := "matcher spill: " + err.Error()
	if re, ok := err.(*runError); ok && !strings.Contains(re.Error(), re.run) {
		reason = fmt.Sprintf("matcher spill: %s: %v", re.run, re.err)
	}
	p.spillErr = &FatalError{RegionID: st.regionID, Reason: reason}
	return p.spillErr
}

// chargeDisk charges n spilled bytes against the spill quota, or returns
// the overflow error naming both quotas (LP15).
func (p *SpanPuller) chargeDisk(regionID uint64, n int64) error {
	if err := p.acquireDisk(regionID, n); err != nil {
		return err
	}
	p.spilledBytes += n
	return nil
}

// acquireDisk charges n bytes to the spill quota or returns LP15's error.
func (p *SpanPuller) acquireDisk(regionID uint64, n int64) error {
	if p.mm.Disk.TryAcquire(n) {
		return nil
	}
	return &FatalError{RegionID: regionID, Reason: (&MatcherOverflowError{
		RegionID: regionID, Need: n,
		MemName: memName(p), MemUsed: p.mm.Memory.Used(), MemLimit: p.memLimit(),
		DiskUsed: p.mm.Disk.Used(), DiskLimit: p.mm.Disk.Limit(), Hint: p.mm.Hint,
	}).Error()}
}

func memName(p *SpanPuller) string {
	if n := p.mm.Memory.Name(); n != "" {
		return n
	}
	return "matcher quota"
}

func (p *SpanPuller) memLimit() int64 {
	return min(p.mm.Memory.Limit(), int64(p.quota))
}

func (p *SpanPuller) releaseDisk(n int64) {
	p.spilledBytes -= n
	p.mm.Disk.Release(n)
}

// spillMemory writes the region's prewrites held in memory as one run,
// sorted by (start_ts, key), and frees their memory; all or nothing: a
// run that cannot be written leaves them in memory (LP14). An open tail
// run is finished first, so runs stay ordered by age.
func (p *SpanPuller) spillMemory(st *regionState) error {
	m := st.m
	if err := p.finishTail(st); err != nil {
		return err
	}
	// The entries sorted by (start_ts, key); their keys are views of the
	// table's copies, which live until it is dropped below.
	held := make([]*heldEntry, 0, m.held.n)
	var cost int64
	m.held.each(func(e *heldEntry) {
		held = append(held, e)
		cost += int64(e.payload()) + spillRecordOverhead
	})
	slices.SortFunc(held, func(a, b *heldEntry) int {
		return compareKey(matchKey{startTs: a.startTs, key: a.key()}, matchKey{startTs: b.startTs, key: b.key()})
	})
	if err := p.chargeDisk(st.regionID, cost); err != nil {
		return err
	}
	w, err := p.mm.Store.Create(st.regionID)
	if err != nil {
		p.releaseDisk(cost)
		return err
	}
	b := newRunBuilder(w, len(held))
	var rec PrewriteRecord
	for _, e := range held {
		k, pw := matchKey{startTs: e.startTs, key: e.key()}, e.prewrite()
		rec = PrewriteRecord{StartTs: k.startTs, Key: []byte(k.key), Value: pw.value, OldValue: pw.oldValue}
		if err := b.append(&rec, k); err != nil {
			_ = w.Abort()
			p.releaseDisk(cost)
			return err
		}
	}
	run, err := b.finish()
	if err != nil {
		_ = w.Abort()
		p.releaseDisk(cost)
		return err
	}
	m.runs = append(m.runs, run)
	p.chargeIndex(run)
	p.stats.SpillRuns++
	p.stats.SpilledPrewrites += uint64(len(held))
	p.release(m.bytes)
	m.bytes = 0
	// Everything the table held goes: the charge given back is its heap.
	m.held = prewriteTable{}
	return nil
}

// appendTail writes a prewrite that fits nowhere in memory to the
// region's open tail run; a key below the run's last starts a new one. A
// copy of the key held in memory is older and is dropped (LP14).
func (p *SpanPuller) appendTail(st *regionState, r *cdcpb.Event_Row) error {
	m := st.m
	k := matchKey{startTs: r.StartTs, key: string(r.Key)}
	rec := PrewriteRecord{StartTs: r.StartTs, Key: r.Key, Value: r.Value, OldValue: r.OldValue}
	if m.tail != nil && (m.tail.full() || compareKey(k, m.tail.lastKey()) <= 0) {
		if err := p.finishTail(st); err != nil {
			return err
		}
	}
	if err := p.chargeDisk(st.regionID, rec.SpillCost()); err != nil {
		return err
	}
	if m.tail == nil {
		w, err := p.mm.Store.Create(st.regionID)
		if err != nil {
			p.releaseDisk(rec.SpillCost())
			return err
		}
		m.tail = newRunBuilder(w, tailRecords)
		p.chargeIndex(&m.tail.run) // its bloom filter is made now
	}
	if err := m.tail.append(&rec, k); err != nil {
		// The record may be half written: the run is dropped and its
		// charge with it; the feed stops (LP16).
		p.releaseDisk(m.tail.run.cost + rec.SpillCost())
		p.releaseIndex(&m.tail.run)
		_ = m.tail.w.Abort()
		m.tail = nil
		return err
	}
	if m.at.slot, m.at.in = m.held.find(keyHash(k), k.startTs, k.key); m.at.in >= 0 {
		p.release(m.unhold())
	}
	p.stats.SpilledPrewrites++
	return nil
}

// finishTail makes the open tail run readable.
func (p *SpanPuller) finishTail(st *regionState) error {
	m := st.m
	if m.tail == nil {
		return nil
	}
	t := m.tail
	m.tail = nil
	run, err := t.finish()
	if err != nil {
		p.releaseDisk(t.run.cost)
		p.releaseIndex(&t.run)
		_ = t.w.Abort()
		return err
	}
	m.runs = append(m.runs, run)
	p.chargeIndex(run) // the charge of its filter moved with it
	p.stats.SpillRuns++
	return nil
}

// tailMayHold reports whether the open tail run may hold k (then it must
// be finished before a lookup).
func (m *matcher) tailMayHold(k matchKey) bool {
	t := m.tail
	if t == nil || t.run.count == 0 {
		return false
	}
	return compareKey(k, t.run.blocks[0].first) >= 0 && compareKey(k, t.run.last) <= 0
}

// take resolves k (lookup; k.key may be a view of the event's bytes:
// nothing keeps it) and, when it matched, removes every copy:
// memory and runs; runs left without a live record are removed. allowEmpty
// false leaves an entry without a value in place (LP2).
func (p *SpanPuller) take(st *regionState, k matchKey, allowEmpty bool) (cachedPrewrite, bool, error) {
	m := st.m
	if m.tailMayHold(k) {
		if err := p.finishTail(st); err != nil {
			return cachedPrewrite{}, false, p.spillFatal(st, err)
		}
	}
	e, found, err := m.lookup(k)
	if err != nil {
		return e, false, p.spillFatal(st, err)
	}
	if !found || (!allowEmpty && len(e.value) == 0) {
		return e, false, nil
	}
	if m.at.in >= 0 {
		p.release(m.unhold())
	}
	if len(m.hits) > 0 {
		p.stats.MatchedFromDisk++
	}
	for _, h := range m.hits {
		if h.run.take(h.n) {
			if err := p.removeRun(st, h.run); err != nil {
				return e, false, p.spillFatal(st, err)
			}
		}
	}
	m.hits = m.hits[:0]
	return e, true, nil
}

// removeRun deletes a run all of whose records were taken (LP14).
func (p *SpanPuller) removeRun(st *regionState, run *spilledRun) error {
	m := st.m
	m.runs = slices.DeleteFunc(m.runs, func(r *spilledRun) bool { return r == run })
	p.releaseDisk(run.cost)
	p.releaseIndex(run)
	return run.r.Remove()
}

// dropMatcher frees everything a region's matcher holds: its memory and
// its runs (the region ended: its prewrites are sent again when it is
// re-subscribed).
func (p *SpanPuller) dropMatcher(st *regionState) {
	m := st.m
	p.release(m.bytes)
	m.bytes = 0
	if m.tail != nil {
		p.releaseDisk(m.tail.run.cost)
		p.releaseIndex(&m.tail.run)
		if err := m.tail.w.Abort(); err != nil && p.spillErr == nil {
			p.spillErr = &FatalError{RegionID: st.regionID, Reason: "matcher spill: " + err.Error()}
		}
		m.tail = nil
	}
	for _, r := range m.runs {
		p.releaseDisk(r.cost)
		p.releaseIndex(r)
		if err := r.r.Remove(); err != nil && p.spillErr == nil {
			p.spillErr = &FatalError{RegionID: st.regionID, Reason: "matcher spill: " + err.Error()}
		}
	}
	m.runs = nil
}

// Release drops every region's matcher (memory charged and spilled runs):
// the subscription ended or its transport is shutting down. The core is
// not used afterwards.
func (p *SpanPuller) Release() {
	for id, st := range p.regions {
		p.dropMatcher(st)
		delete(p.regions, id)
	}
	p.releaseDelivered()
}
