package reorder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Timer is the only notion of time the Waiter has: the caller passes its
// clock in, so tests drive the backpressure window deterministically.
type Timer interface {
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// OverflowError is terminal: the buffer stayed full for the whole
// backpressure window (or the row can never fit). The runtime must stop;
// nothing was emitted early and nothing was dropped.
type OverflowError struct {
	Partition     string
	Bound         Bound
	Limit         int64
	UnsealedRows  int
	UnsealedBytes int64
	RowBytes      int64
	Waited        time.Duration
	// For BoundMemory and BoundSpill: the shared quotas (limit, bytes
	// used by every partition), this partition's spilled bytes and what to
	// raise (Config.Hint).
	MemoryQuota, Held   int64
	SpillQuota, Spilled int64
	PartitionSpilled    int64
	Hint                string
}

func (e *OverflowError) Error() string {
	if e.Bound == BoundMemory || e.Bound == BoundSpill {
		return fmt.Sprintf("reorder: partition %q overflow: %s exhausted (memory quota=%d held=%d, spill quota=%s spilled=%d, partition spilled=%d, incoming row bytes=%d) with no seal within %s%s",
			e.Partition, e.Bound, e.MemoryQuota, e.Held, quotaText(e.SpillQuota), e.Spilled, e.PartitionSpilled, e.RowBytes, e.Waited, hintText(e.Hint))
	}
	return fmt.Sprintf("reorder: partition %q overflow: %s=%d exceeded (unsealed rows=%d bytes=%d, incoming row bytes=%d) with no seal within %s",
		e.Partition, e.Bound, e.Limit, e.UnsealedRows, e.UnsealedBytes, e.RowBytes, e.Waited)
}

func overflowFrom(f *FullError, waited time.Duration) *OverflowError {
	return &OverflowError{Partition: f.Partition, Bound: f.Bound, Limit: f.Limit,
		UnsealedRows: f.UnsealedRows, UnsealedBytes: f.UnsealedBytes, RowBytes: f.RowBytes, Waited: waited,
		MemoryQuota: f.MemoryQuota, Held: f.Held, SpillQuota: f.SpillQuota, Spilled: f.Spilled,
		PartitionSpilled: f.PartitionSpilled, Hint: f.Hint}
}

// Waiter is the thin blocking wrapper for the callback side: a mutex around
// a Buffer, a channel the seal path closes to wake blocked adders, and a
// bounded wait. Add blocks at most Window for a seal to make room, then
// returns an *OverflowError. Waiter is safe for concurrent use.
type Waiter[T any] struct {
	mu      sync.Mutex
	buf     *Buffer[T]
	sealCh  chan struct{} // closed (and replaced) by a seal while adders wait
	waiting int           // adders blocked on sealCh
	timer   Timer
	window  time.Duration
}

// NewWaiter wraps a new Buffer with cfg and opts. window is the longest
// Add waits for a seal (0: fail at once).
func NewWaiter[T any](cfg Config, timer Timer, window time.Duration, opts ...Option[T]) (*Waiter[T], error) {
	b, err := New[T](cfg, opts...)
	if err != nil {
		return nil, err
	}
	if timer == nil {
		return nil, errors.New("reorder: NewWaiter needs a Timer")
	}
	if window < 0 {
		return nil, fmt.Errorf("reorder: partition %q: negative backpressure window %s", cfg.Partition, window)
	}
	return &Waiter[T]{buf: b, sealCh: make(chan struct{}), timer: timer, window: window}, nil
}

// Add buffers a row, waiting up to the window for a seal when the buffer
// is full. It returns an *OverflowError when the window expires (or at once
// when the row can never fit), ctx.Err() when ctx ends first, and a
// *LateRowError for an already sealed commit_ts.
func (w *Waiter[T]) Add(ctx context.Context, commitTs uint64, size int64, v T) error {
	var expired <-chan time.Time
	for {
		w.mu.Lock()
		err := w.buf.Add(commitTs, size, v)
		if err == nil {
			w.mu.Unlock()
			return nil
		}
		var full *FullError
		if !errors.As(err, &full) {
			w.mu.Unlock()
			return err
		}
		if full.Never || w.window == 0 {
			w.mu.Unlock()
			return overflowFrom(full, 0)
		}
		ch := w.sealCh
		w.waiting++
		w.mu.Unlock()
		if expired == nil {
			expired = w.timer.After(w.window)
		}
		var woke, timedOut bool
		select {
		case <-ch:
			woke = true
		case <-expired:
			timedOut = true
		case <-ctx.Done():
		}
		w.mu.Lock()
		w.waiting--
		if woke {
			w.mu.Unlock()
			continue // a seal happened: retry
		}
		if !timedOut {
			w.mu.Unlock()
			return ctx.Err()
		}
		// Last attempt: a seal may have raced with the timer.
		err = w.buf.Add(commitTs, size, v)
		w.mu.Unlock()
		if errors.As(err, &full) {
			return overflowFrom(full, w.window)
		}
		return err
	}
}

// Do runs f with the buffer under the lock (seal, drain, inspect) and then
// wakes every blocked Add so it re-checks for room. f must not block.
func (w *Waiter[T]) Do(f func(b *Buffer[T]) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := f(w.buf)
	if w.waiting > 0 {
		close(w.sealCh)
		w.sealCh = make(chan struct{})
	}
	return err
}

// SealCheckpoint is Do(SealCheckpoint) followed by Drain into dst.
func (w *Waiter[T]) SealCheckpoint(resolvedTs uint64, dst []Item[T]) ([]Item[T], error) {
	err := w.Do(func(b *Buffer[T]) error {
		if err := b.SealCheckpoint(resolvedTs); err != nil {
			return err
		}
		var err error
		dst, err = b.Take(dst, -1)
		return err
	})
	return dst, err
}

// SealDDL is Do(SealDDL) followed by Drain into dst.
func (w *Waiter[T]) SealDDL(ts uint64, dst []Item[T]) ([]Item[T], error) {
	err := w.Do(func(b *Buffer[T]) error {
		if err := b.SealDDL(ts); err != nil {
			return err
		}
		var err error
		dst, err = b.Take(dst, -1)
		return err
	})
	return dst, err
}

// Seal is Do(SealCheckpoint or SealDDL) without a drain: the owner then
// drains in bounded pieces with Take (a spilled transaction does not fit
// in memory at once).
func (w *Waiter[T]) Seal(ts uint64, ddl bool) error {
	return w.Do(func(b *Buffer[T]) error {
		if ddl {
			return b.SealDDL(ts)
		}
		return b.SealCheckpoint(ts)
	})
}

// Take is Do(Take): up to n sealed rows into dst.
func (w *Waiter[T]) Take(dst []Item[T], n int) ([]Item[T], error) {
	err := w.Do(func(b *Buffer[T]) error {
		var err error
		dst, err = b.Take(dst, n)
		return err
	})
	return dst, err
}

// TakeUpTo is Do(TakeUpTo): up to n sealed rows and maxBytes into dst.
func (w *Waiter[T]) TakeUpTo(dst []Item[T], n int, maxBytes int64) ([]Item[T], error) {
	err := w.Do(func(b *Buffer[T]) error {
		var err error
		dst, err = b.TakeUpTo(dst, n, maxBytes)
		return err
	})
	return dst, err
}

// Acknowledge is Do(Acknowledge): drained runs are removed.
func (w *Waiter[T]) Acknowledge() error {
	return w.Do(func(b *Buffer[T]) error { return b.Acknowledge() })
}

// Discard is Do(Discard): everything held is dropped and its quota
// returned (the owner stops).
func (w *Waiter[T]) Discard() error {
	return w.Do(func(b *Buffer[T]) error { return b.Discard() })
}

// RealTimer is the wall-clock Timer for production wiring.
type RealTimer struct{}

// After implements Timer with time.After.
func (RealTimer) After(d time.Duration) <-chan time.Time { return time.After(d) }
