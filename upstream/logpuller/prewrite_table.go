package logpuller

import (
	"unsafe"

	"github.com/pingcap/kvproto/pkg/cdcpb"
)

// prewriteTable holds one region's PREWRITEs waiting for their COMMIT
// (LP1, LP13). It replaces a Go map, which at a million held prewrites
// cost a second hash per prewrite (look up the charge, then insert), map
// growth that copied every slot and left the old ones as garbage, slots
// of 72 bytes at 7/16 to 7/8 load, and a table that never shrank once
// the commit had taken every entry (kept uncharged until the region
// ended).
//
// Entries live in dense chunks that are never copied as the table grows
// (the first one grows by doubling, so a region holding a few prewrites
// costs a few hundred bytes); the index is an open-addressing table
// (linear probing, at most half full) of slot words: the low 32 bits of
// the key's hash (which also give the slot's home, so the index rehashes
// and shifts without reading entries) over 1 + the entry number. A
// removed entry is replaced by the last one, and its slot freed by
// shifting the probe run back, so there are no tombstones. bytes is the
// table's heap at the allocator's sizes: index, chunks (a spare one
// included) and every entry's one copy of key, value and old value. A
// table that becomes empty frees everything.
type prewriteTable struct {
	slots  []uint64 // len a power of two, or 0
	n      int
	chunks [][]heldEntry
	spare  []heldEntry // one emptied chunk kept, so a table at a chunk boundary does not allocate on every prewrite
	bytes  int
}

// heldEntry is one held prewrite: 32 bytes.
type heldEntry struct {
	startTs    uint64
	data       *byte  // key, value, old value: one allocation (nil when all are empty)
	tag        uint32 // the low 32 bits of keyHash
	nk, nv, no uint32 // lengths; absentLen: no value (or old value)
}

const (
	heldEntrySize = int(unsafe.Sizeof(heldEntry{}))
	heldChunkBits = 8
	heldChunkLen  = 1 << heldChunkBits // entries per chunk (8 KiB)
	heldMinSlots  = 4
	// The index shrinks to a quarter-full size when it is more than 8x
	// larger than it needs and bigger than this.
	heldShrinkSlots = 1024
	absentLen       = 1<<32 - 1
	slotEntryMask   = 1<<32 - 1
)

// emptyPresent is the value of a present but empty value or old value.
var emptyPresent = []byte{}

func (t *prewriteTable) entry(i int) *heldEntry {
	return &t.chunks[i>>heldChunkBits][i&(heldChunkLen-1)]
}

func (e *heldEntry) key() string { return unsafe.String(e.data, e.nk) }

// payload is the length of the entry's allocation.
func (e *heldEntry) payload() int {
	n := int(e.nk)
	if e.nv != absentLen {
		n += int(e.nv)
	}
	if e.no != absentLen {
		n += int(e.no)
	}
	return n
}

// prewrite returns the entry's value and old value (views of its copy).
func (e *heldEntry) prewrite() cachedPrewrite {
	var p cachedPrewrite
	off := uintptr(e.nk)
	if e.nv != absentLen {
		p.value = e.bytesAt(off, e.nv)
		off += uintptr(e.nv)
	}
	if e.no != absentLen {
		p.oldValue = e.bytesAt(off, e.no)
	}
	return p
}

func (e *heldEntry) bytesAt(off uintptr, n uint32) []byte {
	if n == 0 {
		return emptyPresent[:0:0]
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(e.data), off)), n)
	return b[:n:n]
}

// find looks up (startTs, key) with h = keyHash of it: the entry's
// number, or -1, and its slot or the empty slot where it would go.
func (t *prewriteTable) find(h uint64, startTs uint64, key string) (slot int, i int) {
	if len(t.slots) == 0 {
		return -1, -1
	}
	mask := uint64(len(t.slots) - 1)
	tag := uint64(uint32(h))
	for s := tag & mask; ; s = (s + 1) & mask {
		w := t.slots[s]
		if w == 0 {
			return int(s), -1
		}
		if w>>32 == tag {
			e := t.entry(int(w&slotEntryMask) - 1)
			if e.startTs == startTs && e.key() == key {
				return int(s), int(w&slotEntryMask) - 1
			}
		}
	}
}

// growth is what one more entry adds to bytes besides its payload: a
// bigger first chunk or a new chunk, and a bigger index.
func (t *prewriteTable) growth() int {
	g := 0
	switch c := t.n >> heldChunkBits; {
	case c == 0 && (len(t.chunks) == 0 || t.n == cap(t.chunks[0])):
		old := 0
		if len(t.chunks) > 0 {
			old = cap(t.chunks[0])
		}
		g += allocSize(max(1, 2*old)*heldEntrySize) - allocSize(old*heldEntrySize)
	case c > 0 && t.n&(heldChunkLen-1) == 0 && t.spare == nil:
		g += allocSize(heldChunkLen * heldEntrySize)
	}
	if 2*(t.n+1) > len(t.slots) {
		size := max(heldMinSlots, 2*len(t.slots))
		g += allocSize(8*size) - allocSize(8*len(t.slots))
	}
	return g
}

// insert adds r (not held: find returned -1 with slot) under hash h and
// returns the bytes it added (growth() + its payload's allocation).
func (t *prewriteTable) insert(h uint64, slot int, r *cdcpb.Event_Row) int {
	before := t.bytes
	if 2*(t.n+1) > len(t.slots) {
		t.resize(max(heldMinSlots, 2*len(t.slots)))
		slot, _ = t.find(h, r.StartTs, bytesView(r.Key))
	}
	c := t.n >> heldChunkBits
	switch {
	case c == 0 && len(t.chunks) == 0:
		t.chunks = append(t.chunks, make([]heldEntry, 0, 1))
		t.bytes += allocSize(heldEntrySize)
	case c == 0 && t.n == cap(t.chunks[0]):
		old := cap(t.chunks[0])
		grown := make([]heldEntry, t.n, 2*old)
		copy(grown, t.chunks[0])
		t.chunks[0] = grown
		t.bytes += allocSize(2*old*heldEntrySize) - allocSize(old*heldEntrySize)
	case c == len(t.chunks):
		if t.spare != nil {
			t.chunks, t.spare = append(t.chunks, t.spare), nil
		} else {
			t.chunks = append(t.chunks, make([]heldEntry, 0, heldChunkLen))
			t.bytes += allocSize(heldChunkLen * heldEntrySize)
		}
	}
	e := heldEntry{startTs: r.StartTs, tag: uint32(h)}
	t.bytes += e.fill(r)
	t.chunks[c] = append(t.chunks[c], e)
	t.slots[slot] = uint64(uint32(h))<<32 | uint64(t.n+1)
	t.n++
	return t.bytes - before
}

// fill copies r's key, value and old value into one allocation and
// returns its size.
func (e *heldEntry) fill(r *cdcpb.Event_Row) int {
	nk, nv, no := len(r.Key), len(r.Value), len(r.OldValue)
	buf := make([]byte, 0, nk+nv+no)
	buf = append(append(append(buf, r.Key...), r.Value...), r.OldValue...)
	e.data = unsafe.SliceData(buf)
	if cap(buf) == 0 {
		e.data = nil
	}
	e.nk, e.nv, e.no = uint32(nk), absentLen, absentLen
	if r.Value != nil {
		e.nv = uint32(nv)
	}
	if r.OldValue != nil {
		e.no = uint32(no)
	}
	return allocSize(cap(buf))
}

// replace puts r's payload in entry i (same start ts and key) and returns
// the change in bytes.
func (t *prewriteTable) replace(i int, r *cdcpb.Event_Row) int {
	e := t.entry(i)
	old := allocSize(e.payload())
	d := e.fill(r) - old
	t.bytes += d
	return d
}

// remove drops entry i, held at slot, and returns the bytes freed.
func (t *prewriteTable) remove(slot, i int) int {
	before := t.bytes
	t.bytes -= allocSize(t.entry(i).payload())
	last := t.n - 1
	if i != last {
		moved := *t.entry(last)
		*t.entry(i) = moved
		t.slots[t.slotOf(moved.tag, last)] = uint64(moved.tag)<<32 | uint64(i+1)
	}
	c := last >> heldChunkBits
	t.chunks[c][last&(heldChunkLen-1)] = heldEntry{}
	t.chunks[c] = t.chunks[c][:last&(heldChunkLen-1)]
	t.n--
	t.unslot(slot)
	switch {
	case t.n == 0:
		*t = prewriteTable{}
		return before
	case c > 0 && len(t.chunks[c]) == 0:
		if t.spare == nil {
			t.spare = t.chunks[c]
		} else {
			t.bytes -= allocSize(heldChunkLen * heldEntrySize)
		}
		t.chunks[c] = nil
		t.chunks = t.chunks[:c]
	}
	if len(t.slots) > heldShrinkSlots && 8*t.n < len(t.slots) {
		size := heldMinSlots
		for size < 4*t.n {
			size <<= 1
		}
		t.resize(size)
	}
	return before - t.bytes
}

// slotOf is the slot holding entry i, whose tag is tag.
func (t *prewriteTable) slotOf(tag uint32, i int) int {
	mask := uint64(len(t.slots) - 1)
	want := uint64(tag)<<32 | uint64(i+1)
	s := uint64(tag) & mask
	for t.slots[s] != want {
		s = (s + 1) & mask
	}
	return int(s)
}

// unslot empties slot s, moving later slots of its probe run back so
// every entry stays reachable from its home.
func (t *prewriteTable) unslot(s int) {
	mask := len(t.slots) - 1
	for j := (s + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := int(t.slots[j]>>32) & mask
		// Slot j may move to s unless its home lies cyclically in (s, j].
		if (j > s && (home <= s || home > j)) || (j < s && home <= s && home > j) {
			t.slots[s] = t.slots[j]
			s = j
		}
	}
	t.slots[s] = 0
}

// resize makes the index size slots and re-inserts every slot word.
func (t *prewriteTable) resize(size int) {
	old := t.slots
	t.bytes += allocSize(8*size) - allocSize(8*len(old))
	t.slots = make([]uint64, size)
	mask := uint64(size - 1)
	for _, w := range old {
		if w == 0 {
			continue
		}
		s := (w >> 32) & mask
		for t.slots[s] != 0 {
			s = (s + 1) & mask
		}
		t.slots[s] = w
	}
}

// each calls f with every entry (its key a view valid while the table
// holds it).
func (t *prewriteTable) each(f func(e *heldEntry)) {
	for _, c := range t.chunks {
		for j := range c {
			f(&c[j])
		}
	}
}
