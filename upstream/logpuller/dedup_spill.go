package logpuller

import (
	"encoding/binary"
	"slices"
	"unsafe"
)

// The delivered set's side of the memory quota (specs/logpuller.md LP17):
// its heap bytes are charged to the shared memory quota; past it, with a
// store, its rows go to a run (sorted by (start_ts, key), the commit ts in
// the record's value) and the set starts empty. A delivered row is looked
// up in memory and in the runs; a run whose newest row is at or below the
// emitted resolved ts is removed (nothing at or below it can arrive again).

// deliveredRun is a run of delivered rows and the newest commit ts in it.
type deliveredRun struct {
	run       *spilledRun
	maxCommit uint64
}

// A run record of a delivered row is (start_ts, key + commit_ts as 8
// bytes big-endian): the run's order and lookups are those of prewrite
// runs, and the three parts of the row's identity are all compared.
func deliveredRecordKey(dst, key []byte, commitTs uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst[:0], key...), commitTs)
}

// seenDelivered reports whether a run holds the row (commit_ts, start_ts,
// key).
func (p *SpanPuller) seenDelivered(commitTs, startTs uint64, key []byte) (bool, error) {
	if len(p.deliveredRuns) == 0 {
		return false, nil
	}
	p.deliveredKey = deliveredRecordKey(p.deliveredKey, key, commitTs)
	k := matchKey{startTs: startTs, key: bytesView(p.deliveredKey)}
	h := keyHash(k)
	for _, dr := range p.deliveredRuns {
		if commitTs > dr.maxCommit {
			continue
		}
		_, rec, err := dr.run.find(k, h)
		if err != nil {
			return false, &runError{run: dr.run.r.Name(), err: err}
		}
		if rec != nil {
			return true, nil
		}
	}
	return false, nil
}

// deliveredMergeRatio: the newest run is merged into the one before while
// that one is at most this many times larger, so a span keeps O(log n)
// runs and each row is rewritten O(log n) times.
const deliveredMergeRatio = 2

// chargeDelivered brings the set's charge to its heap bytes: growth is
// charged to the memory quota, or, when it does not fit and a store is
// there, the set goes to a run first; without a store it is forced (the
// bytes are held already; the set cannot refuse a delivered row).
func (p *SpanPuller) chargeDelivered() error {
	delta := int64(p.delivered.bytes) - p.deliveredCharged
	switch {
	case delta < 0:
		p.mm.Memory.Release(-delta)
	case delta == 0 || p.mm.Memory.TryAcquire(delta):
	case p.mm.Store == nil:
		p.mm.Memory.Force(delta)
	default:
		if err := p.spillDelivered(); err != nil {
			return err
		}
		// What is left (an empty set) is a few bytes at most.
		p.mm.Memory.Force(int64(p.delivered.bytes) - p.deliveredCharged)
	}
	p.deliveredCharged = int64(p.delivered.bytes)
	return nil
}

// spillDelivered writes the set's rows as one run and empties it; its
// charge is given back. All or nothing: a run that cannot be written
// leaves the set as it was.
func (p *SpanPuller) spillDelivered() error {
	d := p.delivered
	type row struct {
		commitTs uint64
		k        matchKey // the record's key (deliveredRecordKey)
	}
	rows := make([]row, 0, d.size())
	var cost int64
	var maxCommit uint64
	d.each(func(commitTs, startTs uint64, key []byte) {
		rk := deliveredRecordKey(make([]byte, 0, len(key)+8), key, commitTs)
		rows = append(rows, row{commitTs: commitTs, k: matchKey{startTs: startTs, key: bytesView(rk)}})
		cost += int64(len(rk)) + spillRecordOverhead
		maxCommit = max(maxCommit, commitTs)
	})
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b row) int { return compareKey(a.k, b.k) })
	b, fail, err := p.newDeliveredRun(cost, len(rows))
	if err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		rec := PrewriteRecord{StartTs: r.k.startTs, Key: unsafe.Slice(unsafe.StringData(r.k.key), len(r.k.key))}
		if err := b.append(&rec, r.k); err != nil {
			return fail(err)
		}
	}
	run, err := b.finish()
	if err != nil {
		return fail(err)
	}
	run.cost = cost
	p.chargeIndex(run)
	p.deliveredRuns = append(p.deliveredRuns, deliveredRun{run: run, maxCommit: maxCommit})
	p.stats.DeliveredRuns++
	d.reset()
	p.mm.Memory.Release(p.deliveredCharged)
	p.deliveredCharged = 0
	for n := len(p.deliveredRuns); n >= 2 && p.deliveredRuns[n-2].run.count <= deliveredMergeRatio*p.deliveredRuns[n-1].run.count; n-- {
		if err := p.mergeLastDelivered(); err != nil {
			return err
		}
	}
	return nil
}

// newDeliveredRun charges cost to the spill quota and opens a delivered run
// for count records; fail aborts the run and gives the charge back.
func (p *SpanPuller) newDeliveredRun(cost int64, count int) (*runBuilder, func(error) error, error) {
	if err := p.chargeDeliveredDisk(cost); err != nil {
		return nil, nil, err
	}
	w, err := p.mm.Store.CreateDelivered()
	if err != nil {
		p.releaseDeliveredDisk(cost)
		return nil, nil, err
	}
	fail := func(err error) error {
		_ = w.Abort()
		p.releaseDeliveredDisk(cost)
		return err
	}
	return newRunBuilder(w, count), fail, nil
}

// mergeLastDelivered replaces the two newest runs by one holding both
// (they are disjoint: a row goes to a run only when no run holds it).
func (p *SpanPuller) mergeLastDelivered() error {
	n := len(p.deliveredRuns)
	a, b := p.deliveredRuns[n-2], p.deliveredRuns[n-1]
	cost := a.run.cost + b.run.cost
	bld, fail, err := p.newDeliveredRun(cost, a.run.count+b.run.count)
	if err != nil {
		return err
	}
	ia, ib := newRunIter(a.run), newRunIter(b.run)
	for {
		ra, err := ia.peek()
		if err != nil {
			return fail(err)
		}
		rb, err := ib.peek()
		if err != nil {
			return fail(err)
		}
		if ra == nil && rb == nil {
			break
		}
		it := ia
		if ra == nil || (rb != nil && compareRecord(rb, matchKey{startTs: ra.StartTs, key: bytesView(ra.Key)}) < 0) {
			it = ib
		}
		rec := it.next()
		if err := bld.append(rec, matchKey{startTs: rec.StartTs, key: bytesView(rec.Key)}); err != nil {
			return fail(err)
		}
	}
	run, err := bld.finish()
	if err != nil {
		return fail(err)
	}
	run.cost = cost
	p.chargeIndex(run)
	p.deliveredRuns = append(p.deliveredRuns[:n-2], deliveredRun{run: run, maxCommit: max(a.maxCommit, b.maxCommit)})
	p.stats.DeliveredRuns++
	p.removeDeliveredRun(a)
	p.removeDeliveredRun(b)
	if p.spillErr != nil {
		return p.spillErr
	}
	return nil
}

// runIter reads a run's records in order, a block at a time.
type runIter struct {
	run   *spilledRun
	block int
	recs  []PrewriteRecord
	i     int
}

func newRunIter(r *spilledRun) *runIter { return &runIter{run: r, block: -1} }

// peek returns the next record (nil at the end) without consuming it.
func (it *runIter) peek() (*PrewriteRecord, error) {
	for it.i == len(it.recs) {
		if it.block+1 >= len(it.run.blocks) {
			return nil, nil
		}
		it.block++
		b := it.run.blocks[it.block]
		end := it.run.count
		if it.block+1 < len(it.run.blocks) {
			end = it.run.blocks[it.block+1].index
		}
		recs, err := it.run.r.ReadBlock(b.offset, end-b.index)
		if err != nil {
			return nil, &runError{run: it.run.r.Name(), err: err}
		}
		it.recs, it.i = recs, 0
	}
	return &it.recs[it.i], nil
}

func (it *runIter) next() *PrewriteRecord {
	r := &it.recs[it.i]
	it.i++
	return r
}

// chargeDeliveredDisk charges n bytes of delivered-row runs to the spill
// quota (LP15's error when it is full).
func (p *SpanPuller) chargeDeliveredDisk(n int64) error {
	if err := p.acquireDisk(0, n); err != nil {
		return err
	}
	p.deliveredSpilled += n
	return nil
}

func (p *SpanPuller) releaseDeliveredDisk(n int64) {
	p.deliveredSpilled -= n
	p.mm.Disk.Release(n)
}

// DeliveredBytes is the delivered set's bytes charged to the memory quota
// and its runs' bytes charged to the spill quota (LP17).
func (p *SpanPuller) DeliveredBytes() (held, spilled int64) {
	return p.deliveredCharged, p.deliveredSpilled
}

// pruneDeliveredRuns removes the runs whose rows are all at or below ts.
func (p *SpanPuller) pruneDeliveredRuns(ts uint64) {
	p.deliveredRuns = slices.DeleteFunc(p.deliveredRuns, func(dr deliveredRun) bool {
		if dr.maxCommit > ts {
			return false
		}
		p.removeDeliveredRun(dr)
		return true
	})
}

func (p *SpanPuller) removeDeliveredRun(dr deliveredRun) {
	p.releaseDeliveredDisk(dr.run.cost)
	p.releaseIndex(dr.run)
	if err := dr.run.r.Remove(); err != nil && p.spillErr == nil {
		p.spillErr = asFatal(err, "delivered-set spill")
	}
}

// asFatal is err as the sticky fatal error of a spill outside a region's
// event (LP16).
func asFatal(err error, what string) *FatalError {
	if fe, ok := err.(*FatalError); ok {
		return fe
	}
	return &FatalError{Reason: what + ": " + err.Error()}
}

// releaseDelivered gives back the set's charge and removes its runs (the
// span ended).
func (p *SpanPuller) releaseDelivered() {
	p.mm.Memory.Release(p.deliveredCharged)
	p.deliveredCharged = 0
	for _, dr := range p.deliveredRuns {
		p.removeDeliveredRun(dr)
	}
	p.deliveredRuns = nil
}
