package reorder

import (
	"errors"
	"fmt"
)

// RunStore keeps sorted runs of spilled rows outside memory. The buffer
// stays a pure core: it decides what to spill and when, and merges runs
// back in order; where the bytes go (files under <data-dir>/spill, or
// memory in tests) is the store's business (package spill).
type RunStore[T any] interface {
	// Create starts a new run of partition's rows. Rows are appended in
	// strictly increasing (commit_ts, ordinal) order.
	Create(partition string) (RunWriter[T], error)
}

// RunWriter appends the rows of one run.
type RunWriter[T any] interface {
	// Stage encodes it as the next row without writing it and returns
	// the bytes it will take on disk, so the buffer can charge the spill
	// quota before anything is written. A staged row that is not
	// committed is dropped by the next Stage, Finish or Abort.
	Stage(it Item[T]) (int64, error)
	// Commit writes the staged row.
	Commit() error
	// Finish makes the run readable; no Append follows.
	Finish() (Run[T], error)
	// Abort discards the run and whatever was written of it.
	Abort() error
}

// Run is a finished run.
type Run[T any] interface {
	// Name identifies the run in errors (a file path).
	Name() string
	// Open reads the run from its start.
	Open() (RunReader[T], error)
	// Remove deletes the run; its rows must have been acknowledged.
	Remove() error
}

// RunReader reads a run's rows back in the order they were appended.
type RunReader[T any] interface {
	// Next returns the next row; ok is false at the end of the run. A
	// damaged run is an error naming the run and the offset.
	Next() (it Item[T], ok bool, err error)
	Close() error
}

// ErrSpillQuotaExceeded is returned by the buffer (inside a *FullError's
// Bound) when the disk quota leaves no room for a spill.
var ErrSpillQuotaExceeded = errors.New("reorder: spill quota exhausted")

// SpillError is a failure of the run store (disk full, a damaged run, an
// I/O error): fatal for the buffer, which refuses every later call with
// it. Rows already drained were handed out; nothing unsealed was emitted.
type SpillError struct {
	Partition string
	Op        string // "spill", "read", "finish", "remove"
	Err       error
}

func (e *SpillError) Error() string {
	return fmt.Sprintf("reorder: partition %q: %s: %v", e.Partition, e.Op, e.Err)
}

func (e *SpillError) Unwrap() error { return e.Err }

// Option configures a buffer beyond its Config.
type Option[T any] func(*Buffer[T])

// WithRuns lets the buffer spill to store instead of refusing rows when a
// bound or the memory quota is reached (specs/minicdc.md RS rules). Only
// a full disk quota (Config.Disk) then refuses a row.
func WithRuns[T any](store RunStore[T]) Option[T] {
	return func(b *Buffer[T]) { b.store = store }
}

// WithRelease sets what the buffer calls on a value it drops from memory
// without handing it out: after its row was written to a run, and on
// Discard. The caller's value may hold pooled memory to give back.
func WithRelease[T any](release func(v *T)) Option[T] {
	return func(b *Buffer[T]) { b.release = release }
}

// run is one finished run and the buffer's read position in it.
type run[T any] struct {
	r       Run[T]
	rows    int   // rows not yet drained
	bytes   int64 // disk bytes charged against Config.Disk
	firstTs uint64
	lastTs  uint64
	rd      RunReader[T] // nil until a drain reaches the run
	head    Item[T]
	hasHead bool
}

// tailRun is the run a buffer with nothing left in memory to spill
// writes rows to directly, as long as they arrive in order.
type tailRun[T any] struct {
	w       RunWriter[T]
	rows    int
	bytes   int64
	firstTs uint64
	lastTs  uint64
}
