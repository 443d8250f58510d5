package reorder

import (
	"fmt"
	"slices"
)

// Config bounds one partition's buffer. Both bounds apply to unsealed rows
// only: sealed rows are already final and are expected to be drained by the
// owner right after the seal that released them.
type Config struct {
	// Partition names the source partition in errors.
	Partition string
	// MaxUnsealedRows is the most unsealed rows the buffer holds. > 0.
	MaxUnsealedRows int
	// MaxUnsealedBytes is the most unsealed payload bytes (as reported by
	// the caller's size for each row) the buffer holds. > 0.
	MaxUnsealedBytes int64
}

// Validate reports a non-positive bound.
func (c Config) Validate() error {
	if c.MaxUnsealedRows <= 0 {
		return fmt.Errorf("reorder: partition %q: MaxUnsealedRows = %d, must be > 0", c.Partition, c.MaxUnsealedRows)
	}
	if c.MaxUnsealedBytes <= 0 {
		return fmt.Errorf("reorder: partition %q: MaxUnsealedBytes = %d, must be > 0", c.Partition, c.MaxUnsealedBytes)
	}
	return nil
}

// Bound names which limit was hit.
type Bound string

const (
	BoundRows  Bound = "max_unsealed_rows"
	BoundBytes Bound = "max_unsealed_bytes"
)

// FullError is the pure core's "full" answer: the row was not added because
// it would exceed a bound and only a seal can make room. It is not terminal
// by itself; the caller waits for a seal (see Waiter) or gives up with an
// *OverflowError.
type FullError struct {
	Partition     string
	Bound         Bound
	Limit         int64
	UnsealedRows  int
	UnsealedBytes int64
	RowBytes      int64
	// Never is set when the row alone exceeds MaxUnsealedBytes: no seal can
	// ever make room for it.
	Never bool
}

func (e *FullError) Error() string {
	s := fmt.Sprintf("reorder: partition %q full: %s=%d, unsealed rows=%d bytes=%d, row bytes=%d",
		e.Partition, e.Bound, e.Limit, e.UnsealedRows, e.UnsealedBytes, e.RowBytes)
	if e.Never {
		s += " (row larger than the bound)"
	}
	return s
}

// LateRowError reports a row whose commit_ts is at or below a seal already
// applied: the sealed prefix may have been drained and sequenced, so the row
// can no longer be placed in canonical order. It is an upstream ordering
// anomaly and fatal.
type LateRowError struct {
	Partition string
	CommitTs  uint64
	SealedTs  uint64
}

func (e *LateRowError) Error() string {
	return fmt.Sprintf("reorder: partition %q: row at commit_ts=%d arrived after seal at %d (resolved/DDL ts already covers it)",
		e.Partition, e.CommitTs, e.SealedTs)
}

// SealRegressionError reports a checkpoint or DDL seal below the previous
// seal of the same kind.
type SealRegressionError struct {
	Partition string
	Kind      string // "checkpoint" or "ddl"
	Old, New  uint64
}

func (e *SealRegressionError) Error() string {
	return fmt.Sprintf("reorder: partition %q: %s seal regressed: old=%d new=%d", e.Partition, e.Kind, e.Old, e.New)
}

// Item is one buffered row.
type Item[T any] struct {
	CommitTs uint64
	// Ordinal is the row's arrival ordinal in its partition (from 0). It is
	// the stable tie-break between rows with the same commit_ts.
	Ordinal uint64
	Size    int64
	Value   T
}

func less[T any](a, b Item[T]) int {
	switch {
	case a.CommitTs < b.CommitTs:
		return -1
	case a.CommitTs > b.CommitTs:
		return 1
	case a.Ordinal < b.Ordinal:
		return -1
	case a.Ordinal > b.Ordinal:
		return 1
	}
	return 0
}

// Buffer is one partition's seal-driven reorder buffer, keyed by
// (commit_ts, arrival ordinal). It is pure: no goroutines, no clock, not
// safe for concurrent use (Waiter adds a lock and the bounded wait).
//
// Layout: items[head:sealedEnd] are sealed and sorted; items[sealedEnd:]
// are unsealed, all with commit_ts above the seal, sorted unless dirty
// (an arrival went below its predecessor). Rows arrive mostly in order per
// table path, so the unsealed tail is usually already sorted and a seal is a
// scan; otherwise one pdqsort of the tail, which is fast on nearly sorted
// input.
type Buffer[T any] struct {
	cfg       Config
	items     []Item[T]
	head      int
	sealedEnd int
	dirty     bool
	next      uint64 // next arrival ordinal

	unsealedBytes int64
	cpSeal        uint64 // last checkpoint seal
	ddlSeal       uint64 // last DDL seal
	sealed        uint64 // max(cpSeal, ddlSeal)
	hasSeal       bool
}

// New returns an empty buffer; cfg must validate.
func New[T any](cfg Config) (*Buffer[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Buffer[T]{cfg: cfg}, nil
}

// Config returns the buffer's bounds.
func (b *Buffer[T]) Config() Config { return b.cfg }

// Add buffers one row with its payload size in bytes. It returns a
// *FullError (row not added) when the row would exceed a bound, and a
// *LateRowError when commitTs is already sealed. A nil error means the row
// is buffered and owns an arrival ordinal.
func (b *Buffer[T]) Add(commitTs uint64, size int64, v T) error {
	if b.hasSeal && commitTs <= b.sealed {
		return &LateRowError{Partition: b.cfg.Partition, CommitTs: commitTs, SealedTs: b.sealed}
	}
	if size < 0 {
		size = 0
	}
	if err := b.wouldOverflow(size); err != nil {
		return err
	}
	// (Drain resets the slice when it empties the buffer.)
	if b.head > 0 && len(b.items) == cap(b.items) && b.head >= len(b.items)/2 {
		// Reclaim the drained prefix instead of growing.
		n := copy(b.items, b.items[b.head:])
		clear(b.items[n:])
		b.items = b.items[:n]
		b.sealedEnd -= b.head
		b.head = 0
	}
	if n := len(b.items); n > b.sealedEnd && commitTs < b.items[n-1].CommitTs {
		b.dirty = true
	}
	b.items = append(b.items, Item[T]{CommitTs: commitTs, Ordinal: b.next, Size: size, Value: v})
	b.next++
	b.unsealedBytes += size
	return nil
}

// Fits reports whether a row of size bytes could be added now.
func (b *Buffer[T]) Fits(size int64) bool { return b.wouldOverflow(size) == nil }

func (b *Buffer[T]) wouldOverflow(size int64) error {
	rows := len(b.items) - b.sealedEnd
	if size > b.cfg.MaxUnsealedBytes {
		return &FullError{Partition: b.cfg.Partition, Bound: BoundBytes, Limit: b.cfg.MaxUnsealedBytes,
			UnsealedRows: rows, UnsealedBytes: b.unsealedBytes, RowBytes: size, Never: true}
	}
	if rows+1 > b.cfg.MaxUnsealedRows {
		return &FullError{Partition: b.cfg.Partition, Bound: BoundRows, Limit: int64(b.cfg.MaxUnsealedRows),
			UnsealedRows: rows, UnsealedBytes: b.unsealedBytes, RowBytes: size}
	}
	if b.unsealedBytes+size > b.cfg.MaxUnsealedBytes {
		return &FullError{Partition: b.cfg.Partition, Bound: BoundBytes, Limit: b.cfg.MaxUnsealedBytes,
			UnsealedRows: rows, UnsealedBytes: b.unsealedBytes, RowBytes: size}
	}
	return nil
}

// SealCheckpoint seals every row with commit_ts <= resolvedTs (the
// partition's resolved ts from a checkpoint). A value below the previous
// checkpoint seal is a *SealRegressionError; a value at or below the
// current effective seal (e.g. behind a DDL seal) changes nothing.
func (b *Buffer[T]) SealCheckpoint(resolvedTs uint64) error {
	if resolvedTs < b.cpSeal {
		return &SealRegressionError{Partition: b.cfg.Partition, Kind: "checkpoint", Old: b.cpSeal, New: resolvedTs}
	}
	b.cpSeal = resolvedTs
	b.seal(resolvedTs)
	return nil
}

// SealDDL seals every row with commit_ts <= ts before a DDL at ts is
// applied (the same-ts rule guarantees no DML at or below ts follows). A
// value below the previous DDL seal is a *SealRegressionError.
func (b *Buffer[T]) SealDDL(ts uint64) error {
	if ts < b.ddlSeal {
		return &SealRegressionError{Partition: b.cfg.Partition, Kind: "ddl", Old: b.ddlSeal, New: ts}
	}
	b.ddlSeal = ts
	b.seal(ts)
	return nil
}

func (b *Buffer[T]) seal(ts uint64) {
	if b.hasSeal && ts <= b.sealed {
		return // every row at or below ts is already sealed
	}
	b.sealed, b.hasSeal = ts, true
	tail := b.items[b.sealedEnd:]
	if b.dirty {
		slices.SortFunc(tail, less[T])
		b.dirty = false
	}
	i := 0
	for i < len(tail) && tail[i].CommitTs <= ts {
		b.unsealedBytes -= tail[i].Size
		i++
	}
	b.sealedEnd += i
}

// SealedTs returns the effective seal: max of the checkpoint and DDL seals.
func (b *Buffer[T]) SealedTs() uint64 { return b.sealed }

// Drain appends every sealed row to dst in (commit_ts, ordinal) order and
// removes them from the buffer. Unsealed rows are never returned.
func (b *Buffer[T]) Drain(dst []Item[T]) []Item[T] {
	return b.DrainN(dst, -1)
}

// DrainN is Drain limited to at most n rows (n < 0: no limit).
func (b *Buffer[T]) DrainN(dst []Item[T], n int) []Item[T] {
	end := b.sealedEnd
	if n >= 0 && b.head+n < end {
		end = b.head + n
	}
	dst = append(dst, b.items[b.head:end]...)
	clear(b.items[b.head:end]) // drop references held by drained payloads
	b.head = end
	if b.head == len(b.items) {
		b.items = b.items[:0]
		b.head, b.sealedEnd = 0, 0
	}
	return dst
}

// Sealed returns the number of sealed rows waiting to be drained.
func (b *Buffer[T]) Sealed() int { return b.sealedEnd - b.head }

// Unsealed returns the unsealed row count and bytes.
func (b *Buffer[T]) Unsealed() (rows int, bytes int64) {
	return len(b.items) - b.sealedEnd, b.unsealedBytes
}

// Len returns all buffered rows, sealed or not.
func (b *Buffer[T]) Len() int { return len(b.items) - b.head }

// MinUnsealedTs returns the smallest commit_ts among unsealed rows.
func (b *Buffer[T]) MinUnsealedTs() (uint64, bool) {
	tail := b.items[b.sealedEnd:]
	if len(tail) == 0 {
		return 0, false
	}
	m := tail[0].CommitTs
	if b.dirty {
		for _, it := range tail[1:] {
			m = min(m, it.CommitTs)
		}
	}
	return m, true
}
