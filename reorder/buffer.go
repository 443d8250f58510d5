package reorder

import (
	"fmt"
	"slices"
	"sort"
	"unsafe"

	"github.com/searchfabric/sfemu/memquota"
)

// Config bounds one partition's buffer. Both bounds apply to unsealed rows
// held in memory only: sealed rows are already final and are expected to
// be drained by the owner right after the seal that released them, and
// spilled rows hold no memory.
type Config struct {
	// Partition names the source partition in errors.
	Partition string
	// MaxUnsealedRows is the most unsealed rows the buffer holds in
	// memory. > 0, or 0 for no per-partition bound when Memory is set.
	MaxUnsealedRows int
	// MaxUnsealedBytes is the most unsealed payload bytes (as reported by
	// the caller's size for each row) the buffer holds in memory. > 0, or
	// 0 for no per-partition bound when Memory is set.
	MaxUnsealedBytes int64
	// Memory is the memory quota shared with the other partitions (and
	// the log puller): every row held in memory is charged its size plus
	// the buffer's own per-row bytes (ItemOverhead), sealed or not, until
	// it is drained or spilled. nil: no shared quota.
	Memory *memquota.Quota
	// Disk is the spill quota (bytes of runs not yet removed), shared
	// like Memory. nil: unlimited.
	Disk *memquota.Quota
	// Hint is appended to overflow errors: what the operator raises (the
	// flags of the host), e.g. "raise --spill-quota".
	Hint string
}

// Validate reports a non-positive bound.
func (c Config) Validate() error {
	if c.MaxUnsealedRows < 0 || (c.MaxUnsealedRows == 0 && c.Memory == nil) {
		return fmt.Errorf("reorder: partition %q: MaxUnsealedRows = %d, must be > 0", c.Partition, c.MaxUnsealedRows)
	}
	if c.MaxUnsealedBytes < 0 || (c.MaxUnsealedBytes == 0 && c.Memory == nil) {
		return fmt.Errorf("reorder: partition %q: MaxUnsealedBytes = %d, must be > 0", c.Partition, c.MaxUnsealedBytes)
	}
	return nil
}

// Bound names which limit was hit.
type Bound string

const (
	BoundRows  Bound = "max_unsealed_rows"
	BoundBytes Bound = "max_unsealed_bytes"
	// BoundMemory: the shared memory quota is full and the buffer cannot
	// spill (no run store).
	BoundMemory Bound = "memory_quota"
	// BoundSpill: memory is full and the spill quota leaves no room.
	BoundSpill Bound = "spill_quota"
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
	// The shared quotas at the time (limit, bytes used by every partition)
	// and this partition's spilled bytes.
	MemoryQuota, Held   int64
	SpillQuota, Spilled int64
	PartitionSpilled    int64
	Hint                string
}

func (e *FullError) Error() string {
	if e.Bound == BoundMemory || e.Bound == BoundSpill {
		return fmt.Sprintf("reorder: partition %q full: %s, memory quota=%d held=%d, spill quota=%s spilled=%d (partition spilled=%d), row bytes=%d%s",
			e.Partition, e.Bound, e.MemoryQuota, e.Held, quotaText(e.SpillQuota), e.Spilled, e.PartitionSpilled, e.RowBytes, hintText(e.Hint))
	}
	s := fmt.Sprintf("reorder: partition %q full: %s=%d, unsealed rows=%d bytes=%d, row bytes=%d",
		e.Partition, e.Bound, e.Limit, e.UnsealedRows, e.UnsealedBytes, e.RowBytes)
	if e.Never {
		s += " (row larger than the bound)"
	}
	return s
}

func quotaText(q int64) string {
	if q == memquota.Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(q)
}

func hintText(h string) string {
	if h == "" {
		return ""
	}
	return "; " + h
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
// safe for concurrent use (Waiter adds a lock and the bounded wait). The
// only I/O it causes goes through the injected RunStore.
//
// Layout: the rows held in memory live in fixed-size chunks (chunkCap
// items each), in arrival order except where a seal sorted them; logically
// they form one sequence whose first sealed rows are sorted and ready to
// drain, followed by the unsealed rows, all with commit_ts above the seal,
// sorted unless dirty (an arrival went below its predecessor). Rows arrive
// mostly in order per table path, so the unsealed tail is usually already
// sorted and a seal is a scan; otherwise one pdqsort of the tail, which is
// fast on nearly sorted input. Chunks never move or grow: a large backlog
// costs no re-allocation and copy, and drained chunks are recycled (up to
// maxFreeChunks per buffer) instead of leaving one large array behind.
//
// Spill (with a RunStore): when a row does not fit (a bound or the shared
// memory quota), the unsealed rows held in memory are sorted and written
// as one run, and their memory is released; a row that still does not
// fit goes straight to an open tail run while rows keep arriving in order.
// Runs are sorted, so a drain is a merge of the memory's sealed prefix and
// every run's rows at or below the seal, in (commit_ts, ordinal) order.
type Buffer[T any] struct {
	cfg      Config
	chunkCap int // a power of two: 1 << shift
	shift    uint
	chunks   [][]Item[T] // every chunk but the last is full (len == chunkCap)
	first    int         // offset of the first live row in chunks[0]
	n        int         // live rows in memory
	sealedN  int         // the first sealedN live rows are sealed
	dirty    bool
	lastTs   uint64 // commit_ts of the last arrival held in memory
	next     uint64 // next arrival ordinal
	free     [][]Item[T]

	unsealedBytes int64
	held          int64  // bytes charged to cfg.Memory for the rows in memory
	cpSeal        uint64 // last checkpoint seal
	ddlSeal       uint64 // last DDL seal
	sealed        uint64 // max(cpSeal, ddlSeal)
	hasSeal       bool

	store   RunStore[T]
	release func(v *T) // WithRelease
	runs    []*run[T]  // finished runs with undrained rows, oldest first
	tail    *tailRun[T]
	retired []*run[T] // drained runs, removed by Acknowledge
	// spilledRows/Bytes: rows on disk not yet drained; bytes of every run
	// (live, tail, retired) charged to cfg.Disk.
	spilledRows  int
	spilledBytes int64
	spills       uint64 // runs written since New
	merges       uint64 // merges of small runs since New (RS9)
	mergeRuns    int    // WithRunMerge (0: the defaults)
	smallRunRows int
	err          error // sticky run-store failure

	// lastOut is the key of the last drained row (invariant: output
	// strictly increasing).
	lastOut    Item[struct{}]
	hasLastOut bool
	ops        uint64 // operations checked (invariants builds)
}

const (
	// defaultChunkShift: 512 rows per chunk, ~50 KiB for a normalize row.
	defaultChunkShift = 9
	defaultChunkItems = 1 << defaultChunkShift
	// maxFreeChunks bounds the recycled chunks one buffer keeps.
	maxFreeChunks = 8
)

// ItemOverhead is what holding one row costs the buffer beyond the row's
// own size: its Item in a chunk (commit ts, ordinal, size and the value
// struct itself). The caller's size counts only what the value points to.
func ItemOverhead[T any]() int64 { return int64(unsafe.Sizeof(Item[T]{})) }

// New returns an empty buffer; cfg must validate.
func New[T any](cfg Config, opts ...Option[T]) (*Buffer[T], error) {
	return newBuffer[T](cfg, defaultChunkShift, opts...)
}

// newBuffer builds a buffer with chunks of 1<<shift rows.
func newBuffer[T any](cfg Config, shift uint, opts ...Option[T]) (*Buffer[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Buffer[T]{cfg: cfg, chunkCap: 1 << shift, shift: shift}
	for _, o := range opts {
		o(b)
	}
	return b, nil
}

// Config returns the buffer's bounds.
func (b *Buffer[T]) Config() Config { return b.cfg }

// Err returns the run-store failure that stopped the buffer, or nil.
func (b *Buffer[T]) Err() error { return b.err }

func (b *Buffer[T]) fail(op string, err error) error {
	if b.err == nil {
		b.err = &SpillError{Partition: b.cfg.Partition, Op: op, Err: err}
	}
	return b.err
}

// at returns the live row at logical index i.
func (b *Buffer[T]) at(i int) *Item[T] {
	g := b.first + i
	return &b.chunks[g>>b.shift][g&(b.chunkCap-1)]
}

// Add buffers one row with its payload size in bytes. It returns a
// *FullError (row not added) when the row would exceed a bound or the
// memory quota and cannot be spilled (no run store, or the spill quota is
// full), a *LateRowError when commitTs is already sealed, and a
// *SpillError when the run store failed. A nil error means the row is
// buffered (in memory or on disk) and owns an arrival ordinal.
func (b *Buffer[T]) Add(commitTs uint64, size int64, v T) error {
	if b.err != nil {
		return b.err
	}
	if b.hasSeal && commitTs <= b.sealed {
		return &LateRowError{Partition: b.cfg.Partition, CommitTs: commitTs, SealedTs: b.sealed}
	}
	if size < 0 {
		size = 0
	}
	err := b.reserve(size)
	if err == nil {
		b.push(commitTs, size, v)
		b.check()
		return nil
	}
	if b.store == nil {
		return err
	}
	// Spill (RS2): first the unsealed rows held in memory, as one sorted
	// run; then, if the row still does not fit, the row itself.
	if b.n > b.sealedN {
		if serr := b.spillMemory(size); serr != nil {
			return serr
		}
		if b.reserve(size) == nil {
			b.push(commitTs, size, v)
			b.check()
			return nil
		}
	}
	err = b.appendTail(Item[T]{CommitTs: commitTs, Ordinal: b.next, Size: size, Value: v})
	if err == nil {
		b.next++
		if b.release != nil {
			held := v        // a copy, so v itself does not escape
			b.release(&held) // the run holds the row now
		}
	}
	b.check()
	return err
}

// push appends a row whose memory was reserved.
func (b *Buffer[T]) push(commitTs uint64, size int64, v T) {
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

// recycle keeps an emptied chunk for reuse (up to maxFreeChunks).
func (b *Buffer[T]) recycle(c []Item[T]) {
	clear(c[:cap(c)]) // drop references held by drained payloads
	if len(b.free) < maxFreeChunks {
		b.free = append(b.free, c[:0])
	}
}

// dropFirstChunk recycles chunks[0], whose rows were all drained.
func (b *Buffer[T]) dropFirstChunk() {
	b.recycle(b.chunks[0])
	// Shift rather than reslice, so the slice of chunks keeps its
	// capacity (a few hundred pointers for the largest backlogs).
	k := copy(b.chunks, b.chunks[1:])
	b.chunks[k] = nil
	b.chunks = b.chunks[:k]
	b.first = 0
}

// Fits reports whether a row of size bytes could be held in memory now
// (without spilling). It charges nothing.
func (b *Buffer[T]) Fits(size int64) bool {
	if err := b.wouldOverflow(size); err != nil {
		return false
	}
	q := b.cfg.Memory
	return q == nil || q.Used()+size+ItemOverhead[T]() <= q.Limit()
}

// reserve checks the bounds and charges the memory quota for a row of
// size bytes; nil means the row may be pushed into memory.
func (b *Buffer[T]) reserve(size int64) error {
	if err := b.wouldOverflow(size); err != nil {
		return err
	}
	q := b.cfg.Memory
	if q == nil {
		return nil
	}
	cost := size + ItemOverhead[T]()
	if !q.TryAcquire(cost) {
		return b.fullError(BoundMemory, size, cost > q.Limit())
	}
	b.held += cost
	return nil
}

func (b *Buffer[T]) fullError(bound Bound, size int64, never bool) *FullError {
	e := &FullError{Partition: b.cfg.Partition, Bound: bound, UnsealedRows: b.n - b.sealedN, UnsealedBytes: b.unsealedBytes,
		RowBytes: size, Never: never, MemoryQuota: b.cfg.Memory.Limit(), Held: b.cfg.Memory.Used(),
		SpillQuota: b.cfg.Disk.Limit(), Spilled: b.cfg.Disk.Used(), PartitionSpilled: b.spilledBytes, Hint: b.cfg.Hint}
	switch bound {
	case BoundMemory:
		e.Limit = e.MemoryQuota
	case BoundSpill:
		e.Limit = e.SpillQuota
	}
	return e
}

func (b *Buffer[T]) wouldOverflow(size int64) error {
	rows := b.n - b.sealedN
	if b.cfg.MaxUnsealedBytes > 0 && size > b.cfg.MaxUnsealedBytes {
		return &FullError{Partition: b.cfg.Partition, Bound: BoundBytes, Limit: b.cfg.MaxUnsealedBytes,
			UnsealedRows: rows, UnsealedBytes: b.unsealedBytes, RowBytes: size, Never: true}
	}
	if b.cfg.MaxUnsealedRows > 0 && rows+1 > b.cfg.MaxUnsealedRows {
		return &FullError{Partition: b.cfg.Partition, Bound: BoundRows, Limit: int64(b.cfg.MaxUnsealedRows),
			UnsealedRows: rows, UnsealedBytes: b.unsealedBytes, RowBytes: size}
	}
	if b.cfg.MaxUnsealedBytes > 0 && b.unsealedBytes+size > b.cfg.MaxUnsealedBytes {
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
	if b.err != nil {
		return b.err
	}
	if resolvedTs < b.cpSeal {
		return &SealRegressionError{Partition: b.cfg.Partition, Kind: "checkpoint", Old: b.cpSeal, New: resolvedTs}
	}
	b.cpSeal = resolvedTs
	return b.seal(resolvedTs)
}

// SealDDL seals every row with commit_ts <= ts before a DDL at ts is
// applied (the same-ts rule guarantees no DML at or below ts follows). A
// value below the previous DDL seal is a *SealRegressionError.
func (b *Buffer[T]) SealDDL(ts uint64) error {
	if b.err != nil {
		return b.err
	}
	if ts < b.ddlSeal {
		return &SealRegressionError{Partition: b.cfg.Partition, Kind: "ddl", Old: b.ddlSeal, New: ts}
	}
	b.ddlSeal = ts
	return b.seal(ts)
}

func (b *Buffer[T]) seal(ts uint64) error {
	if b.hasSeal && ts <= b.sealed {
		return nil // every row at or below ts is already sealed
	}
	b.sealed, b.hasSeal = ts, true
	// The open tail run may hold rows at or below ts: make it readable.
	if b.tail != nil && b.tail.firstTs <= ts {
		if err := b.finishTail(); err != nil {
			return err
		}
	}
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
	b.check()
	return nil
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
// removes them from the buffer. Unsealed rows are never returned. With
// spilled rows, a run-store failure stops the drain; it is kept and
// returned by Err (use Take to get it directly).
func (b *Buffer[T]) Drain(dst []Item[T]) []Item[T] {
	return b.DrainN(dst, -1)
}

// DrainN is Drain limited to at most n rows (n < 0: no limit).
func (b *Buffer[T]) DrainN(dst []Item[T], n int) []Item[T] {
	dst, _ = b.Take(dst, n)
	return dst
}

// drainMemory moves up to take sealed rows held in memory to dst and
// releases their memory charge.
func (b *Buffer[T]) drainMemory(dst []Item[T], take int) []Item[T] {
	take = min(take, b.sealedN)
	dst = slices.Grow(dst, take)
	var freed int64
	for take > 0 {
		c := b.chunks[0]
		end := min(len(c), b.first+take)
		for i := b.first; i < end; i++ {
			freed += c[i].Size
		}
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
		freed += int64(moved) * ItemOverhead[T]()
	}
	b.releaseHeld(freed)
	if b.n == 0 && len(b.chunks) == 1 {
		// Empty: reuse the last chunk from its start.
		b.chunks[0] = b.chunks[0][:0]
		b.first = 0
	}
	return dst
}

// releaseHeld returns memory charged for rows that left memory.
func (b *Buffer[T]) releaseHeld(n int64) {
	if b.cfg.Memory == nil || n == 0 {
		return
	}
	b.held -= n
	b.cfg.Memory.Release(n)
}

// Sealed returns the number of sealed rows held in memory waiting to be
// drained. Spilled rows are not counted (a run is not read until it is
// drained); HasSealed covers both.
func (b *Buffer[T]) Sealed() int { return b.sealedN }

// Unsealed returns the unsealed row count and bytes held in memory.
func (b *Buffer[T]) Unsealed() (rows int, bytes int64) {
	return b.n - b.sealedN, b.unsealedBytes
}

// Len returns all buffered rows, sealed or not, in memory or spilled.
func (b *Buffer[T]) Len() int { return b.n + b.spilledRows }

// Held returns the bytes this buffer has charged to the memory quota.
func (b *Buffer[T]) Held() int64 { return b.held }

// SpillStats is what a buffer keeps on disk.
type SpillStats struct {
	// Rows spilled and not yet drained.
	Rows int
	// Bytes of runs not yet removed (charged to Config.Disk).
	Bytes int64
	// Files: runs not yet removed (live, open tail, drained awaiting
	// Acknowledge).
	Files int
	// Runs written since the buffer was made (merged runs included).
	Runs uint64
	// Merges of small runs into one since the buffer was made (RS9).
	Merges uint64
}

// Spilled returns the buffer's spill state.
func (b *Buffer[T]) Spilled() SpillStats {
	files := len(b.runs) + len(b.retired)
	if b.tail != nil {
		files++
	}
	return SpillStats{Rows: b.spilledRows, Bytes: b.spilledBytes, Files: files, Runs: b.spills, Merges: b.merges}
}

// MinUnsealedTs returns the smallest commit_ts among unsealed rows. With
// spilled rows it is a lower bound: a run is not read before its drain,
// so a run holding sealed rows counts as seal+1.
func (b *Buffer[T]) MinUnsealedTs() (uint64, bool) {
	found := false
	var m uint64
	note := func(ts uint64) {
		if !found || ts < m {
			m, found = ts, true
		}
	}
	if b.n > b.sealedN {
		note(b.at(b.sealedN).CommitTs)
		if b.dirty {
			for i := b.sealedN + 1; i < b.n; i++ {
				note(b.at(i).CommitTs)
			}
		}
	}
	for _, r := range b.runs {
		if r.lastTs > b.sealed || !b.hasSeal {
			note(max(r.firstTs, b.sealed+1))
		}
	}
	if b.tail != nil {
		note(b.tail.firstTs)
	}
	return m, found
}
