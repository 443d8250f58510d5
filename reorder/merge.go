package reorder

import "fmt"

// Many small runs make every drain step scan every run head and keep a
// reader (and its buffer) open per run: a partition whose rows arrive out
// of commit_ts order while memory is full starts a tail run at every
// decrease (RS2). Small runs are therefore merged (RS9).
const (
	// DefaultMergeRuns small unopened runs are merged into one.
	DefaultMergeRuns = 16
	// DefaultSmallRunRows: a run with fewer rows is small. A merge of
	// DefaultMergeRuns small runs can be larger; it is then not merged
	// again, so a row is rewritten a bounded number of times.
	DefaultSmallRunRows = 4096
)

// WithRunMerge sets when small runs are merged (RS9): once runs (>= 2)
// unopened runs of fewer than smallRows rows each are waiting.
func WithRunMerge[T any](runs, smallRows int) Option[T] {
	return func(b *Buffer[T]) { b.mergeRuns, b.smallRunRows = max(runs, 2), smallRows }
}

// small reports whether r may be merged: nothing of it was read yet.
func (b *Buffer[T]) small(r *run[T]) bool {
	return r.rd == nil && !r.hasHead && r.rows < b.smallRunRows
}

// maybeMergeRuns merges the small runs into one when there are enough of
// them (RS9). The merged run is written in (commit_ts, ordinal) order
// from the runs' own orders, so drains return what they would have. The
// new run is charged to the spill quota as it is written; if the quota
// cannot take it the merge is dropped (the small runs stay: nothing is
// lost, drains are only slower). A store failure is fatal (RS6).
func (b *Buffer[T]) maybeMergeRuns() error {
	mergeRuns, smallRows := b.mergeRuns, b.smallRunRows
	if mergeRuns == 0 {
		mergeRuns, smallRows = DefaultMergeRuns, DefaultSmallRunRows
		b.mergeRuns, b.smallRunRows = mergeRuns, smallRows
	}
	var picked []int
	for i, r := range b.runs {
		if b.small(r) {
			picked = append(picked, i)
		}
	}
	if len(picked) < mergeRuns {
		return nil
	}
	w, err := b.store.Create(b.cfg.Partition)
	if err != nil {
		return b.fail("merge", err)
	}
	var bytes int64
	abort := func(err error) error {
		b.cfg.Disk.Release(bytes)
		if aerr := w.Abort(); err == nil && aerr != nil {
			err = aerr
		}
		if err != nil {
			return b.fail("merge", err)
		}
		return nil
	}
	// Open every picked run; rd/head are set on the runs themselves and
	// cleared again below, whatever happens.
	in := make([]*run[T], len(picked))
	for k, i := range picked {
		in[k] = b.runs[i]
	}
	defer func() {
		for _, r := range in {
			if r.rd != nil {
				_ = r.rd.Close()
				r.rd = nil
			}
			var zero Item[T]
			r.head, r.hasHead = zero, false
		}
	}()
	left := make([]int, len(in)) // rows still to read of each run
	for k, r := range in {
		left[k] = r.rows
		if err := b.mergeNext(r, &left[k]); err != nil {
			return abort(err)
		}
	}
	merged := &run[T]{}
	for {
		best := -1
		for k, r := range in {
			if r.hasHead && (best < 0 || less(r.head, in[best].head) < 0) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		it := in[best].head
		n, err := w.Stage(it)
		if err != nil {
			return abort(err)
		}
		if !b.cfg.Disk.TryAcquire(n) {
			return abort(nil)
		}
		bytes += n
		if err := w.Commit(); err != nil {
			return abort(err)
		}
		if merged.rows == 0 {
			merged.firstTs = it.CommitTs
		}
		merged.rows++
		merged.lastTs = it.CommitTs
		if err := b.mergeNext(in[best], &left[best]); err != nil {
			return abort(err)
		}
	}
	r, err := w.Finish()
	if err != nil {
		return abort(err)
	}
	merged.r, merged.bytes = r, bytes
	// The merged run replaces the small ones, removed at once: every row
	// of theirs is in the merged run.
	keep := b.runs[:0]
	pi := 0
	var rmErr error
	for i, r := range b.runs {
		if pi < len(picked) && picked[pi] == i {
			pi++
			if err := r.r.Remove(); err != nil && rmErr == nil {
				rmErr = err
			}
			b.cfg.Disk.Release(r.bytes)
			b.spilledBytes -= r.bytes
			continue
		}
		keep = append(keep, r)
	}
	clear(b.runs[len(keep):])
	b.runs = append(keep, merged)
	b.spilledBytes += bytes
	b.spills++
	b.merges++
	if rmErr != nil {
		return b.fail("remove", rmErr)
	}
	return nil
}

// mergeNext reads r's next row into r.head, or clears it at r's end
// (left counts the rows still to read).
func (b *Buffer[T]) mergeNext(r *run[T], left *int) error {
	var zero Item[T]
	r.head, r.hasHead = zero, false
	if *left == 0 {
		return nil
	}
	if r.rd == nil {
		rd, err := r.r.Open()
		if err != nil {
			return err
		}
		r.rd = rd
	}
	it, ok, err := r.rd.Next()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("run %s ended before its rows were read", r.r.Name())
	}
	r.head, r.hasHead = it, true
	*left--
	return nil
}
