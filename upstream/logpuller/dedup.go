package logpuller

import "hash/maphash"

// deliveredSet remembers the rows delivered above the span's emitted resolved
// ts, keyed by (commit_ts, start_ts, key). After a region is re-subscribed,
// TiKV re-sends every change above the region's checkpoint, including rows
// the consumer already has; those are suppressed here, so the consumer sees
// each change exactly once. Entries at or below the resolved ts are pruned:
// nothing at or below it can arrive again (that would be the fatal case).
//
// Keys live in one arena and rows in one slice, chained by hash, so the
// steady state allocates only when a buffer grows; prune rebuilds into a
// second set of buffers that are swapped and reused.
type deliveredSet struct {
	seed  maphash.Seed
	index map[uint64]int32 // hash -> 1 + index of the newest row with it
	rows  []deliveredRow
	arena []byte
	// spare buffers reused by prune.
	spareRows  []deliveredRow
	spareArena []byte
}

type deliveredRow struct {
	commitTs, startTs uint64
	hash              uint64
	off, len          int
	next              int32 // 1 + index of the previous row with the same hash, 0 = none
}

func newDeliveredSet() *deliveredSet {
	return &deliveredSet{seed: maphash.MakeSeed(), index: make(map[uint64]int32)}
}

func (d *deliveredSet) hashOf(commitTs, startTs uint64, key []byte) uint64 {
	h := maphash.Bytes(d.seed, key)
	h ^= commitTs * 0x9E3779B97F4A7C15
	h ^= (startTs + 0x632BE59BD9B4E019) * 0xC2B2AE3D27D4EB4F
	return h
}

// add records a row and reports whether it was new.
func (d *deliveredSet) add(commitTs, startTs uint64, key []byte) bool {
	h := d.hashOf(commitTs, startTs, key)
	head := d.index[h]
	for i := head; i != 0; i = d.rows[i-1].next {
		r := &d.rows[i-1]
		if r.commitTs == commitTs && r.startTs == startTs && string(d.arena[r.off:r.off+r.len]) == string(key) {
			return false
		}
	}
	d.rows = append(d.rows, deliveredRow{commitTs: commitTs, startTs: startTs, hash: h, off: len(d.arena), len: len(key), next: head})
	d.arena = append(d.arena, key...)
	d.index[h] = int32(len(d.rows))
	return true
}

// prune forgets rows with commit_ts <= ts.
func (d *deliveredSet) prune(ts uint64) {
	if len(d.rows) == 0 {
		return
	}
	keep := 0
	for i := range d.rows {
		if d.rows[i].commitTs > ts {
			keep++
		}
	}
	if keep == len(d.rows) {
		return
	}
	clear(d.index)
	rows, arena := d.spareRows[:0], d.spareArena[:0]
	for _, r := range d.rows {
		if r.commitTs <= ts {
			continue
		}
		off := len(arena)
		arena = append(arena, d.arena[r.off:r.off+r.len]...)
		r.off = off
		r.next = d.index[r.hash]
		rows = append(rows, r)
		d.index[r.hash] = int32(len(rows))
	}
	d.spareRows, d.spareArena = d.rows[:0], d.arena[:0]
	d.rows, d.arena = rows, arena
}

func (d *deliveredSet) size() int { return len(d.rows) }
