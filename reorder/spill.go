package reorder

import (
	"errors"
	"slices"
)

// spillMemory writes every unsealed row held in memory, sorted, as one run
// and releases their memory (RS2). All or nothing: when the spill quota
// runs out part way, the run is discarded, the rows stay in memory and
// the answer is a *FullError (BoundSpill) for a row of size bytes.
func (b *Buffer[T]) spillMemory(size int64) error {
	if b.dirty {
		// Sorted for good: should the spill fail below, the rows stay in
		// memory as a clean tail whose last row is its largest.
		b.sortTail()
		b.dirty = false
		b.lastTs = b.at(b.n - 1).CommitTs
	}
	w, err := b.store.Create(b.cfg.Partition)
	if err != nil {
		return b.fail("spill", err)
	}
	var bytes int64
	abort := func() {
		b.cfg.Disk.Release(bytes)
		_ = w.Abort()
	}
	for i := b.sealedN; i < b.n; i++ {
		n, err := w.Stage(*b.at(i))
		if err != nil {
			abort()
			return b.fail("spill", err)
		}
		if !b.cfg.Disk.TryAcquire(n) {
			abort()
			return b.fullError(BoundSpill, size, false)
		}
		bytes += n
		if err := w.Commit(); err != nil {
			abort()
			return b.fail("spill", err)
		}
	}
	r, err := w.Finish()
	if err != nil {
		abort()
		return b.fail("spill", err)
	}
	rows := b.n - b.sealedN
	b.runs = append(b.runs, &run[T]{r: r, rows: rows, bytes: bytes,
		firstTs: b.at(b.sealedN).CommitTs, lastTs: b.at(b.n - 1).CommitTs})
	b.spilledRows += rows
	b.spilledBytes += bytes
	b.spills++
	b.truncate(b.sealedN)
	b.unsealedBytes = 0
	return b.maybeMergeRuns()
}

// truncate drops the live rows in memory from index k on (they were
// spilled) and releases their memory.
func (b *Buffer[T]) truncate(k int) {
	var freed int64
	for b.n > k {
		last := len(b.chunks) - 1
		c := b.chunks[last]
		start := 0
		if last == 0 {
			start = b.first
		}
		drop := min(len(c)-start, b.n-k)
		for i := len(c) - drop; i < len(c); i++ {
			freed += c[i].Size + ItemOverhead[T]()
			if b.release != nil {
				b.release(&c[i].Value)
			}
		}
		clear(c[len(c)-drop:])
		b.chunks[last] = c[:len(c)-drop]
		b.n -= drop
		if len(b.chunks[last]) == start && last > 0 {
			b.recycle(b.chunks[last])
			b.chunks[last] = nil
			b.chunks = b.chunks[:last]
		}
	}
	if b.n == 0 && len(b.chunks) == 1 {
		b.chunks[0] = b.chunks[0][:0]
		b.first = 0
	}
	b.releaseHeld(freed)
}

// appendTail writes one row straight to disk (RS2): memory is full even
// after spilling what this buffer held. Rows keep going to the same open
// run while they arrive in order; an out-of-order row starts a new run.
func (b *Buffer[T]) appendTail(it Item[T]) error {
	if b.tail != nil && it.CommitTs < b.tail.lastTs {
		if err := b.finishTail(); err != nil {
			return err
		}
	}
	if b.tail == nil {
		w, err := b.store.Create(b.cfg.Partition)
		if err != nil {
			return b.fail("spill", err)
		}
		b.tail = &tailRun[T]{w: w, firstTs: it.CommitTs}
		b.spills++
	}
	t := b.tail
	n, err := t.w.Stage(it)
	if err != nil {
		return b.fail("spill", err)
	}
	if !b.cfg.Disk.TryAcquire(n) {
		if t.rows == 0 {
			// Nothing was written: no empty file is left behind.
			b.tail = nil
			b.spills--
			if err := t.w.Abort(); err != nil {
				return b.fail("remove", err)
			}
		}
		return b.fullError(BoundSpill, it.Size, false)
	}
	if err := t.w.Commit(); err != nil {
		b.cfg.Disk.Release(n)
		return b.fail("spill", err)
	}
	t.rows++
	t.bytes += n
	t.lastTs = it.CommitTs
	b.spilledRows++
	b.spilledBytes += n
	return nil
}

// finishTail makes the open tail run readable.
func (b *Buffer[T]) finishTail() error {
	t := b.tail
	b.tail = nil
	r, err := t.w.Finish()
	if err != nil {
		return b.fail("finish", err)
	}
	b.runs = append(b.runs, &run[T]{r: r, rows: t.rows, bytes: t.bytes, firstTs: t.firstTs, lastTs: t.lastTs})
	return b.maybeMergeRuns()
}

// HasSealed reports whether a drain would return at least one row.
func (b *Buffer[T]) HasSealed() bool {
	if b.sealedN > 0 {
		return true
	}
	if !b.hasSeal {
		return false
	}
	for _, r := range b.runs {
		if r.hasHead {
			if r.head.CommitTs <= b.sealed {
				return true
			}
		} else if r.firstTs <= b.sealed {
			return true
		}
	}
	return false
}

// Take moves up to n sealed rows (n < 0: all) to dst in (commit_ts,
// ordinal) order: a merge of the sealed rows held in memory and the rows
// of every run at or below the seal. A run-store failure (a damaged run)
// is returned, kept (Err) and refuses every later call; the rows already
// appended to dst were taken.
func (b *Buffer[T]) Take(dst []Item[T], n int) ([]Item[T], error) {
	return b.TakeUpTo(dst, n, -1)
}

// TakeUpTo is Take that also stops before the row that would take the
// sizes taken past maxBytes (maxBytes < 0: no byte bound); it takes at
// least one row when one is sealed. A spilled transaction is drained in
// pieces this size (RS3).
func (b *Buffer[T]) TakeUpTo(dst []Item[T], n int, maxBytes int64) ([]Item[T], error) {
	if b.err != nil {
		return dst, b.err
	}
	if n < 0 {
		n = int(^uint(0) >> 1)
	}
	start := len(dst)
	defer func() { b.checkOut(dst[start:]) }()
	taken := 0
	var used int64 // sizes taken
	if len(b.runs) == 0 {
		k, _ := b.memRows(n, maxBytes, taken, used, false, 0, 0)
		dst = b.drainMemory(dst, k)
		b.check()
		return dst, nil
	}
	for taken < n {
		// The smallest eligible run head, and the next smallest key of
		// any other source: rows are taken from the best run while they
		// stay below it (a whole run at a time for one big transaction).
		best := -1
		var second *Item[T]
		for i, r := range b.runs {
			if !r.hasHead {
				if r.firstTs > b.sealed || !b.hasSeal {
					continue
				}
				if err := b.loadHead(r); err != nil {
					return dst, err
				}
				if !r.hasHead {
					continue
				}
			}
			if r.head.CommitTs > b.sealed {
				continue
			}
			if best < 0 || less(r.head, b.runs[best].head) < 0 {
				if best >= 0 {
					second = &b.runs[best].head
				}
				best = i
			} else if second == nil || less(r.head, *second) < 0 {
				second = &r.head
			}
		}
		var mem *Item[T]
		if b.sealedN > 0 {
			mem = b.at(0)
		}
		if best < 0 {
			if mem != nil {
				k, _ := b.memRows(n, maxBytes, taken, used, false, 0, 0)
				dst = b.drainMemory(dst, k)
			}
			break
		}
		r := b.runs[best]
		if mem != nil && less(*mem, r.head) < 0 {
			// Memory rows below the run's head.
			k, u := b.memRows(n, maxBytes, taken, used, true, r.head.CommitTs, r.head.Ordinal)
			used = u
			if k == 0 {
				break // the byte bound
			}
			dst = b.drainMemory(dst, k)
			taken += k
			continue
		}
		var bound *Item[T]
		if second != nil {
			bound = second
		}
		if mem != nil && (bound == nil || less(*mem, *bound) < 0) {
			bound = mem
		}
		// Copy the bound's key: loadHead below reuses run heads.
		var bk Item[struct{}]
		hasBound := bound != nil
		if hasBound {
			bk = Item[struct{}]{CommitTs: bound.CommitTs, Ordinal: bound.Ordinal}
		}
		progress := false
		for taken < n && r.hasHead && r.head.CommitTs <= b.sealed &&
			(maxBytes < 0 || taken == 0 || used+r.head.Size <= maxBytes) &&
			(!hasBound || keyLess(r.head.CommitTs, r.head.Ordinal, bk.CommitTs, bk.Ordinal)) {
			dst = append(dst, r.head)
			used += r.head.Size
			taken++
			progress = true
			var zero Item[T]
			r.head = zero
			r.hasHead = false
			r.rows--
			b.spilledRows--
			if err := b.loadHead(r); err != nil {
				return dst, err
			}
		}
		if !r.hasHead && r.rd == nil {
			b.retire(best)
		}
		if !progress {
			break // the byte bound
		}
	}
	b.check()
	return dst, nil
}

// memRows counts the sealed rows in memory, from the first, that may be
// taken after taken rows of used bytes: at most n in all, within maxBytes
// (at least one row overall), and below (bts, bord) when bounded. It
// returns the count and the bytes used with them.
func (b *Buffer[T]) memRows(n int, maxBytes int64, taken int, used int64, bounded bool, bts, bord uint64) (int, int64) {
	k := 0
	for k < b.sealedN && taken+k < n {
		it := b.at(k)
		if bounded && !keyLess(it.CommitTs, it.Ordinal, bts, bord) {
			break
		}
		if maxBytes >= 0 && taken+k > 0 && used+it.Size > maxBytes {
			break
		}
		used += it.Size
		k++
	}
	return k, used
}

func keyLess(ats, aord, bts, bord uint64) bool {
	return ats < bts || (ats == bts && aord < bord)
}

// loadHead reads r's next row into r.head (opening the run on first use).
// At the end of the run the reader is closed and r.rd set to nil.
func (b *Buffer[T]) loadHead(r *run[T]) error {
	if r.rows == 0 {
		if r.rd != nil {
			err := r.rd.Close()
			r.rd = nil
			if err != nil {
				return b.fail("read", err)
			}
		}
		return nil
	}
	if r.rd == nil {
		rd, err := r.r.Open()
		if err != nil {
			return b.fail("read", err)
		}
		r.rd = rd
	}
	it, ok, err := r.rd.Next()
	if err != nil {
		return b.fail("read", err)
	}
	if !ok {
		return b.fail("read", errors.New("run "+r.r.Name()+" ended before its rows were read"))
	}
	r.head, r.hasHead = it, true
	return nil
}

// retire moves the drained run i to the runs removed by Acknowledge.
func (b *Buffer[T]) retire(i int) {
	b.retired = append(b.retired, b.runs[i])
	b.runs = slices.Delete(b.runs, i, i+1)
}

// Acknowledge removes the runs whose rows were all drained (RS4): the
// owner calls it once the drained rows were acknowledged downstream, and
// their disk quota is released.
func (b *Buffer[T]) Acknowledge() error {
	var errs []error
	for _, r := range b.retired {
		if err := r.r.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		b.cfg.Disk.Release(r.bytes)
		b.spilledBytes -= r.bytes
	}
	b.retired = b.retired[:0]
	if err := errors.Join(errs...); err != nil {
		return b.fail("remove", err)
	}
	return nil
}

// Discard drops everything the buffer holds, in memory and on disk, and
// returns its memory and disk charges: the owner stops (a restart
// redelivers every unacknowledged row from upstream).
func (b *Buffer[T]) Discard() error {
	var errs []error
	if b.tail != nil {
		errs = append(errs, b.tail.w.Abort())
		b.cfg.Disk.Release(b.tail.bytes)
		b.spilledBytes -= b.tail.bytes
		b.tail = nil
	}
	for _, r := range b.runs {
		if r.rd != nil {
			errs = append(errs, r.rd.Close())
		}
		b.retired = append(b.retired, r)
	}
	b.runs = nil
	b.spilledRows = 0
	errs = append(errs, b.Acknowledge())
	b.truncate(0)
	b.sealedN, b.unsealedBytes, b.dirty = 0, 0, false
	return errors.Join(errs...)
}
