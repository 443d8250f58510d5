package reorder

import (
	"fmt"
	"slices"
	"sort"
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
// Layout: the rows live in fixed-size chunks (chunkCap items each), in
// arrival order except where a seal sorted them; logically they form one
// sequence whose first sealed rows are sorted and ready to drain, followed
// by the unsealed rows, all with commit_ts above the seal, sorted unless
// dirty (an arrival went below its predecessor). Rows arrive mostly in
// order per table path, so the unsealed tail is usually already sorted and
// a seal is a scan; otherwise one pdqsort of the tail, which is fast on
// nearly sorted input. Chunks never move or grow: a large backlog costs no
// re-allocation and copy, and drained chunks are recycled (up to
// maxFreeChunks per buffer) instead of leaving one large array behind.
type Buffer[T any] struct {
	cfg      Config
	chunkCap int // a power of two: 1 << shift
	shift    uint
	chunks   [][]Item[T] // every chunk but the last is full (len == chunkCap)
	first    int         // offset of the first live row in chunks[0]
	n        int         // live rows
	sealedN  int         // the first sealedN live rows are sealed
	dirty    bool
	lastTs   uint64 // commit_ts of the last arrival
	next     uint64 // next arrival ordinal
	free     [][]Item[T]

	unsealedBytes int64
	cpSeal        uint64 // last checkpoint seal
	ddlSeal       uint64 // last DDL seal
	sealed        uint64 // max(cpSeal, ddlSeal)
	hasSeal       bool
}

const (
	// defaultChunkShift: 512 rows per chunk, ~50 KiB for a normalize row.
	defaultChunkShift = 9
	defaultChunkItems = 1 << defaultChunkShift
	// maxFreeChunks bounds the recycled chunks one buffer keeps.
	maxFreeChunks = 8
)

// New returns an empty buffer; cfg must validate.
func New[T any](cfg Config) (*Buffer[T], error) {
	return newBuffer[T](cfg, defaultChunkShift)
}

// newBuffer builds a buffer with chunks of 1<<shift rows.
func newBuffer[T any](cfg Config, shift uint) (*Buffer[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Buffer[T]{cfg: cfg, chunkCap: 1 << shift, shift: shift}, nil
}

// Config returns the buffer's bounds.
func (b *Buffer[T]) Config() Config { return b.cfg }

// at returns the live row at logical index i.
func (b *Buffer[T]) at(i int) *Item[T] {
	g := b.first + i
	return &b.chunks[g>>b.shift][g&(b.chunkCap-1)]
}

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
	if b.n > b.sealedN && commitTs < b.lastTs {
		b.dirty = true
	}
	b.lastTs = commitTs
	last := len(b.chunks) - 1
	if last < 0 || len(b.chunks[last]) == b.chunkCap {
		b.chunks = append(b.chunks, b.newChunk())
		last++
	}
	b.chunks[last] = append(b.chunks[last], Item[T]{CommitTs: commitTs, Ordinal: b.next, Size: size, Value: v})
	b.n++
	b.next++
	b.unsealedBytes += size
	return nil
}

func (b *Buffer[T]) newChunk() []Item[T] {
	if k := len(b.free); k > 0 {
		c := b.free[k-1]
		b.free[k-1] = nil
		b.free = b.free[:k-1]
		return c
	}
	return make([]Item[T], 0, b.chunkCap)
}

// dropFirstChunk recycles chunks[0], whose rows were all drained.
func (b *Buffer[T]) dropFirstChunk() {
	c := b.chunks[0]
	clear(c[:cap(c)]) // drop references held by drained payloads
	if len(b.free) < maxFreeChunks {
		b.free = append(b.free, c[:0])
	}
	// Shift rather than reslice, so the slice of chunks keeps its
	// capacity (a few hundred pointers for the largest backlogs).
	k := copy(b.chunks, b.chunks[1:])
	b.chunks[k] = nil
	b.chunks = b.chunks[:k]
	b.first = 0
}

// Fits reports whether a row of size bytes could be added now.
func (b *Buffer[T]) Fits(size int64) bool { return b.wouldOverflow(size) == nil }

func (b *Buffer[T]) wouldOverflow(size int64) error {
	rows := b.n - b.sealedN
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
	if b.dirty {
		b.sortTail()
		b.dirty = false
		b.lastTs = b.at(b.n - 1).CommitTs // the tail's largest, now last
	}
	i := b.sealedN
	for i < b.n {
		it := b.at(i)
		if it.CommitTs > ts {
			break
		}
		b.unsealedBytes -= it.Size
		i++
	}
	b.sealedN = i
}

// sortTail sorts the unsealed rows by (commit_ts, ordinal) in place: as
// one slice when they lie in one chunk, else through a view over the
// chunks (no copy of the backlog, no scratch the size of it).
func (b *Buffer[T]) sortTail() {
	lo, hi := b.first+b.sealedN, b.first+b.n // global positions
	if lo>>b.shift == (hi-1)>>b.shift {
		c := b.chunks[lo>>b.shift]
		mask := b.chunkCap - 1
		slices.SortFunc(c[lo&mask:(hi-1)&mask+1], less[T])
		return
	}
	sort.Sort(tailView[T]{b: b, lo: lo, n: hi - lo})
}

// tailView is sort.Interface over the rows at global positions lo..lo+n.
type tailView[T any] struct {
	b  *Buffer[T]
	lo int
	n  int
}

func (v tailView[T]) Len() int { return v.n }

func (v tailView[T]) item(i int) *Item[T] {
	g := v.lo + i
	return &v.b.chunks[g>>v.b.shift][g&(v.b.chunkCap-1)]
}

func (v tailView[T]) Less(i, j int) bool { return less(*v.item(i), *v.item(j)) < 0 }

func (v tailView[T]) Swap(i, j int) {
	a, c := v.item(i), v.item(j)
	*a, *c = *c, *a
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
	take := b.sealedN
	if n >= 0 && n < take {
		take = n
	}
	dst = slices.Grow(dst, take)
	for take > 0 {
		c := b.chunks[0]
		end := min(len(c), b.first+take)
		dst = append(dst, c[b.first:end]...)
		clear(c[b.first:end]) // drop references held by drained payloads
		moved := end - b.first
		take -= moved
		b.n -= moved
		b.sealedN -= moved
		b.first = end
		if b.first == b.chunkCap {
			b.dropFirstChunk()
		}
	}
	if b.n == 0 && len(b.chunks) == 1 {
		// Empty: reuse the last chunk from its start.
		b.chunks[0] = b.chunks[0][:0]
		b.first = 0
	}
	return dst
}

// Sealed returns the number of sealed rows waiting to be drained.
func (b *Buffer[T]) Sealed() int { return b.sealedN }

// Unsealed returns the unsealed row count and bytes.
func (b *Buffer[T]) Unsealed() (rows int, bytes int64) {
	return b.n - b.sealedN, b.unsealedBytes
}

// Len returns all buffered rows, sealed or not.
func (b *Buffer[T]) Len() int { return b.n }

// MinUnsealedTs returns the smallest commit_ts among unsealed rows.
func (b *Buffer[T]) MinUnsealedTs() (uint64, bool) {
	if b.n == b.sealedN {
		return 0, false
	}
	m := b.at(b.sealedN).CommitTs
	if b.dirty {
		for i := b.sealedN + 1; i < b.n; i++ {
			m = min(m, b.at(i).CommitTs)
		}
	}
	return m, true
}
