package logpuller

import (
	"hash/maphash"
	"unsafe"
)

// deliveredSet remembers the rows delivered above the span's emitted resolved
// ts, keyed by (commit_ts, start_ts, key). After a region is re-subscribed,
// TiKV re-sends every change above the region's checkpoint, including rows
// the consumer already has; those are suppressed here, so the consumer sees
// each change exactly once. Entries at or below the resolved ts are pruned:
// nothing at or below it can arrive again (that would be the fatal case).
//
// The set must stay cheap while it grows without bound: one region's
// catch-up scan delivers its whole backlog before the first resolved ts (no
// resolved ts comes before INITIALIZED), so nothing is pruned until it ends.
// Rows and key bytes therefore live in fixed-size chunks that are never
// copied when the set grows, and the index is an open-addressing table of
// row numbers (linear probing, at most half full) that rehashes from the
// hash stored in each row. prune rebuilds into fresh chunks, keeping a few
// of the old ones for reuse.
type deliveredSet struct {
	seed maphash.Seed
	// slots: 0 = empty, else the row's hash with its low 32 bits replaced
	// by 1 + the row number, so most probes never touch a row. The length
	// is a power of two (or 0).
	slots []uint64
	n     int // rows held
	rows  [][]deliveredRow
	arena [][]byte
	// chunks kept for reuse by the next rows (bounded, see prune).
	spareRows  [][]deliveredRow
	spareArena [][]byte
	// the chunk lists of the last prune, reused by the next one.
	outerRows  [][]deliveredRow
	outerArena [][]byte
	// bytes is what the set holds on the heap: the index, every row and
	// arena chunk (spares included) at its capacity. The span charges it
	// to the memory quota (LP17).
	bytes int
}

// deliveredRowSize is a deliveredRow's bytes in a chunk.
const deliveredRowSize = int(unsafe.Sizeof(deliveredRow{}))

type deliveredRow struct {
	commitTs, startTs uint64
	hash              uint64
	chunk, off, len   uint32 // key bytes: arena[chunk][off : off+len]
}

const (
	// Chunks are small so a set of a few rows costs a few KiB of the
	// memory quota it is charged to (LP17).
	rowChunkBits    = 8
	rowChunkLen     = 1 << rowChunkBits // rows per chunk (10 KiB)
	arenaChunkLen   = 4 << 10           // key bytes per chunk
	minSlots        = 8
	firstChunkLen   = 8 // the first row chunk starts this small and grows
	firstArenaLen   = 64
	maxSpareRows    = 16   // row chunks kept across prunes (160 KiB)
	maxSpareArena   = 32   // arena chunks kept across prunes (128 KiB)
	slotsShrinkRows = 8    // shrink the index when it has 8x the slots it needs
	slotsKeep       = 4096 // ... and more than this many
	slotRowMask     = 1<<32 - 1
)

func newDeliveredSet() *deliveredSet {
	return &deliveredSet{seed: maphash.MakeSeed()}
}

func (d *deliveredSet) hashOf(commitTs, startTs uint64, key []byte) uint64 {
	h := maphash.Bytes(d.seed, key)
	h ^= commitTs * 0x9E3779B97F4A7C15
	h ^= (startTs + 0x632BE59BD9B4E019) * 0xC2B2AE3D27D4EB4F
	// Final avalanche, so the low bits used for the slot are well mixed.
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	return h
}

func (d *deliveredSet) row(i int32) *deliveredRow {
	return &d.rows[i>>rowChunkBits][i&(rowChunkLen-1)]
}

func (d *deliveredSet) keyOf(r *deliveredRow) []byte {
	return d.arena[r.chunk][r.off : r.off+r.len]
}

// add records a row and reports whether it was new.
func (d *deliveredSet) add(commitTs, startTs uint64, key []byte) bool {
	h := d.hashOf(commitTs, startTs, key)
	if 2*(d.n+1) > len(d.slots) {
		d.resize(2 * (d.n + 1))
	}
	mask := uint64(len(d.slots) - 1)
	tag := h &^ slotRowMask
	i := h & mask
	for {
		s := d.slots[i]
		if s == 0 {
			break
		}
		if s&^slotRowMask == tag {
			r := d.row(int32(s&slotRowMask) - 1)
			if r.hash == h && r.commitTs == commitTs && r.startTs == startTs && string(d.keyOf(r)) == string(key) {
				return false
			}
		}
		i = (i + 1) & mask
	}
	chunk, off := d.storeKey(key)
	d.appendRow(deliveredRow{commitTs: commitTs, startTs: startTs, hash: h, chunk: chunk, off: off, len: uint32(len(key))})
	d.slots[i] = tag | uint64(d.n)
	return true
}

// appendRow adds r as row number d.n and counts it.
func (d *deliveredSet) appendRow(r deliveredRow) {
	c := d.n >> rowChunkBits
	if c == len(d.rows) {
		var buf []deliveredRow
		switch k := len(d.spareRows); {
		case k > 0:
			buf, d.spareRows = d.spareRows[k-1], d.spareRows[:k-1]
		case c == 0:
			// A set of a few rows stays a few hundred bytes: the first
			// chunk grows by append up to rowChunkLen.
			buf = make([]deliveredRow, 0, firstChunkLen)
			d.bytes += firstChunkLen * deliveredRowSize
		default:
			buf = make([]deliveredRow, 0, rowChunkLen)
			d.bytes += rowChunkLen * deliveredRowSize
		}
		d.rows = append(d.rows, buf)
	}
	old := cap(d.rows[c])
	d.rows[c] = append(d.rows[c], r)
	d.bytes += (cap(d.rows[c]) - old) * deliveredRowSize
	d.n++
}

// storeKey copies key into the arena and returns where it is.
func (d *deliveredSet) storeKey(key []byte) (uint32, uint32) {
	last := len(d.arena) - 1
	if last == 0 && cap(d.arena[0]) < arenaChunkLen && len(d.arena[0])+len(key) <= arenaChunkLen {
		// The small first chunk grows by append (keys are found by
		// offset, so moving it is fine).
		off, old := len(d.arena[0]), cap(d.arena[0])
		d.arena[0] = append(d.arena[0], key...)
		d.bytes += cap(d.arena[0]) - old
		return 0, uint32(off)
	}
	if last < 0 || cap(d.arena[last])-len(d.arena[last]) < len(key) {
		var buf []byte
		switch {
		case len(key) > arenaChunkLen:
			buf = make([]byte, 0, len(key)) // a key of its own
			d.bytes += cap(buf)
		case len(d.spareArena) > 0:
			k := len(d.spareArena)
			buf, d.spareArena = d.spareArena[k-1], d.spareArena[:k-1]
		case last < 0 && len(key) <= firstArenaLen:
			buf = make([]byte, 0, firstArenaLen)
			d.bytes += firstArenaLen
		default:
			buf = make([]byte, 0, arenaChunkLen)
			d.bytes += arenaChunkLen
		}
		d.arena = append(d.arena, buf)
		last++
	}
	off := len(d.arena[last])
	d.arena[last] = append(d.arena[last], key...)
	return uint32(last), uint32(off)
}

// resize makes the index at least want slots (a power of two, never
// smaller than it is) and re-inserts every row from its stored hash.
func (d *deliveredSet) resize(want int) {
	size := max(minSlots, len(d.slots))
	for size < want {
		size <<= 1
	}
	if size == len(d.slots) {
		clear(d.slots)
	} else {
		d.bytes += 8 * (size - len(d.slots))
		d.slots = make([]uint64, size)
	}
	mask := uint64(size - 1)
	for c, chunk := range d.rows {
		for j := range chunk {
			h := chunk[j].hash
			i := h & mask
			for d.slots[i] != 0 {
				i = (i + 1) & mask
			}
			d.slots[i] = h&^slotRowMask | uint64(c<<rowChunkBits+j+1)
		}
	}
}

// prune forgets rows with commit_ts <= ts.
func (d *deliveredSet) prune(ts uint64) {
	if d.n == 0 {
		return
	}
	keep := 0
	for _, chunk := range d.rows {
		for j := range chunk {
			if chunk[j].commitTs > ts {
				keep++
			}
		}
	}
	if keep == d.n {
		return
	}
	if keep == 0 {
		// Nothing left: free it all (spares too), so an idle span holds
		// and is charged nothing (LP17).
		d.reset()
		return
	}
	oldRows, oldArena := d.rows, d.arena
	d.rows, d.arena, d.n = d.outerRows[:0], d.outerArena[:0], 0
	if keep > 0 {
		for _, chunk := range oldRows {
			for j := range chunk {
				r := chunk[j]
				if r.commitTs <= ts {
					continue
				}
				key := oldArena[r.chunk][r.off : r.off+r.len]
				r.chunk, r.off = d.storeKey(key)
				d.appendRow(r)
			}
		}
	}
	for i, c := range oldRows {
		if len(d.spareRows) < maxSpareRows && cap(c) == rowChunkLen {
			d.spareRows = append(d.spareRows, c[:0])
		} else {
			d.bytes -= cap(c) * deliveredRowSize
		}
		oldRows[i] = nil
	}
	for i, c := range oldArena {
		if len(d.spareArena) < maxSpareArena && cap(c) == arenaChunkLen {
			d.spareArena = append(d.spareArena, c[:0])
		} else {
			d.bytes -= cap(c)
		}
		oldArena[i] = nil
	}
	d.outerRows, d.outerArena = oldRows[:0], oldArena[:0]
	want := 2 * max(keep, 1)
	if len(d.slots) > slotsKeep && len(d.slots) > slotsShrinkRows*want {
		d.bytes -= 8 * len(d.slots)
		d.slots = nil // release an index sized for a burst
	}
	d.resize(want)
}

func (d *deliveredSet) size() int { return d.n }

// each calls f with every row held (key bytes valid during the call).
func (d *deliveredSet) each(f func(commitTs, startTs uint64, key []byte)) {
	for _, chunk := range d.rows {
		for j := range chunk {
			r := &chunk[j]
			f(r.commitTs, r.startTs, d.keyOf(r))
		}
	}
}

// reset forgets every row and frees every chunk, spares included, and the
// index: the rows went to a run (LP17).
func (d *deliveredSet) reset() {
	seed := d.seed
	*d = deliveredSet{seed: seed}
}
