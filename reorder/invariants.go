package reorder

import (
	"fmt"

	"github.com/searchfabric/sfemu/internal/invariants"
)

// check verifies the buffer's invariants after every operation in builds
// with the invariants tag (make test's race pass). A violation is a bug in
// this package, not bad input: it panics with the state that broke.
func (b *Buffer[T]) check() {
	if !invariants.Enabled {
		return
	}
	b.ops++
	if b.n > 256 && b.ops%1024 != 0 {
		b.checkEdges()
		return
	}
	if b.sealedN < 0 || b.sealedN > b.n {
		b.violated("sealedN=%d outside 0..n=%d", b.sealedN, b.n)
	}
	total := 0
	for i, c := range b.chunks {
		if i < len(b.chunks)-1 && len(c) != b.chunkCap {
			b.violated("chunk %d of %d has %d rows, want %d", i, len(b.chunks), len(c), b.chunkCap)
		}
		total += len(c)
	}
	if total-b.first != b.n {
		b.violated("chunks hold %d rows past offset %d, n=%d", total, b.first, b.n)
	}
	var unsealed, held int64
	for i := 0; i < b.n; i++ {
		it := b.at(i)
		held += it.Size + ItemOverhead[T]()
		if i < b.sealedN {
			if it.CommitTs > b.sealed {
				b.violated("sealed row %d at commit_ts=%d above the seal %d", i, it.CommitTs, b.sealed)
			}
			if i > 0 && less(*b.at(i - 1), *it) >= 0 {
				b.violated("sealed rows %d,%d out of (commit_ts, ordinal) order", i-1, i)
			}
			continue
		}
		unsealed += it.Size
		if b.hasSeal && it.CommitTs <= b.sealed {
			b.violated("unsealed row %d at commit_ts=%d at or below the seal %d", i, it.CommitTs, b.sealed)
		}
		if !b.dirty && i > b.sealedN && less(*b.at(i - 1), *it) >= 0 {
			b.violated("clean unsealed rows %d,%d out of order: (%d,%d) (%d,%d) sealedN=%d n=%d first=%d", i-1, i, b.at(i-1).CommitTs, b.at(i-1).Ordinal, it.CommitTs, it.Ordinal, b.sealedN, b.n, b.first)
		}
	}
	if unsealed != b.unsealedBytes {
		b.violated("unsealed bytes %d, rows sum to %d", b.unsealedBytes, unsealed)
	}
	if b.cfg.Memory != nil && held != b.held {
		b.violated("held %d bytes, rows in memory cost %d", b.held, held)
	}
	rows, bytes := 0, int64(0)
	for _, r := range b.runs {
		if r.rows <= 0 {
			b.violated("live run %s has %d rows", r.r.Name(), r.rows)
		}
		rows += r.rows
		bytes += r.bytes
		if r.hasHead && b.hasLastOut && keyLess(r.head.CommitTs, r.head.Ordinal, b.lastOut.CommitTs, b.lastOut.Ordinal) {
			b.violated("run %s head (%d,%d) below the last drained row", r.r.Name(), r.head.CommitTs, r.head.Ordinal)
		}
	}
	for _, r := range b.retired {
		bytes += r.bytes
	}
	if b.tail != nil {
		rows += b.tail.rows
		bytes += b.tail.bytes
		if b.hasSeal && b.tail.firstTs <= b.sealed {
			b.violated("open tail run starts at %d, at or below the seal %d", b.tail.firstTs, b.sealed)
		}
	}
	if rows != b.spilledRows || bytes != b.spilledBytes {
		b.violated("spilled rows/bytes %d/%d, runs sum to %d/%d", b.spilledRows, b.spilledBytes, rows, bytes)
	}
}

// checkEdges is the cheap check between full scans of a large buffer:
// the seal boundary and the last arrival.
func (b *Buffer[T]) checkEdges() {
	if b.sealedN < 0 || b.sealedN > b.n {
		b.violated("sealedN=%d outside 0..n=%d", b.sealedN, b.n)
	}
	if b.sealedN > 0 && b.at(b.sealedN-1).CommitTs > b.sealed {
		b.violated("last sealed row at commit_ts=%d above the seal %d", b.at(b.sealedN-1).CommitTs, b.sealed)
	}
	if b.sealedN < b.n && b.hasSeal && b.at(b.sealedN).CommitTs <= b.sealed {
		b.violated("first unsealed row at commit_ts=%d at or below the seal %d", b.at(b.sealedN).CommitTs, b.sealed)
	}
	if b.n-b.sealedN >= 2 && !b.dirty && less(*b.at(b.n - 2), *b.at(b.n - 1)) >= 0 {
		b.violated("clean unsealed tail ends out of order")
	}
	if b.unsealedBytes < 0 || b.held < 0 || b.spilledRows < 0 || b.spilledBytes < 0 {
		b.violated("negative count: unsealed bytes %d held %d spilled rows %d bytes %d", b.unsealedBytes, b.held, b.spilledRows, b.spilledBytes)
	}
}

// checkOut verifies that drained rows leave in strictly increasing
// (commit_ts, ordinal) order across drains, all at or below the seal.
func (b *Buffer[T]) checkOut(out []Item[T]) {
	if !invariants.Enabled {
		return
	}
	for _, it := range out {
		if it.CommitTs > b.sealed || !b.hasSeal {
			b.violated("drained row (%d,%d) above the seal %d", it.CommitTs, it.Ordinal, b.sealed)
		}
		if b.hasLastOut && !keyLess(b.lastOut.CommitTs, b.lastOut.Ordinal, it.CommitTs, it.Ordinal) {
			b.violated("drained row (%d,%d) not after (%d,%d)", it.CommitTs, it.Ordinal, b.lastOut.CommitTs, b.lastOut.Ordinal)
		}
		b.lastOut = Item[struct{}]{CommitTs: it.CommitTs, Ordinal: it.Ordinal}
		b.hasLastOut = true
	}
}

func (b *Buffer[T]) violated(format string, args ...any) {
	panic(fmt.Sprintf("reorder: invariant violated in partition %q: %s", b.cfg.Partition, fmt.Sprintf(format, args...)))
}
