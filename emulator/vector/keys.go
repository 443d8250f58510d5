package vector

import "hash/maphash"

// keyTable maps a primary key to its slot. It replaces a map[string]int:
// the apply path paid most of its time hashing twice (lookup, then
// assign) and rehashing every key on growth, and the map's key pointers
// were scanned by every GC. Here an entry is one uint64 (the key's hash,
// low 32 bits, and slot+1; 0 is empty), in an open-addressed table with
// linear probing: one hash per upsert, growth moves integers without
// rehashing a key, the table holds no pointers, and a key costs 11-23
// bytes instead of about 37. The key itself is read from its slot.
type keyTable struct {
	seed maphash.Seed
	ents []uint64
	n    int
}

func newKeyTable() keyTable { return keyTable{seed: maphash.MakeSeed()} }

func (t *keyTable) hash(pk string) uint32 { return uint32(maphash.String(t.seed, pk)) }

// find returns the table position of pk (slot >= 0) or, when absent, the
// empty position where it would go (slot -1). pkAt reads a slot's key.
func (t *keyTable) find(h uint32, pk string, x *Index) (pos, slot int) {
	if len(t.ents) == 0 {
		return -1, -1
	}
	mask := len(t.ents) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		e := t.ents[i]
		if e == 0 {
			return i, -1
		}
		if uint32(e>>32) == h {
			if s := int(uint32(e)) - 1; x.pk(s) == pk {
				return i, s
			}
		}
	}
}

// insert adds h -> slot at pos (an empty position find returned, or -1),
// growing the table past a load of 5/8.
func (t *keyTable) insert(pos int, h uint32, slot int) {
	if pos < 0 || (t.n+1)*8 > len(t.ents)*5 {
		t.grow()
		mask := len(t.ents) - 1
		pos = int(h) & mask
		for t.ents[pos] != 0 {
			pos = (pos + 1) & mask
		}
	}
	t.ents[pos] = uint64(h)<<32 | uint64(slot+1)
	t.n++
}

// set points the entry at pos to slot.
func (t *keyTable) set(pos, slot int) {
	t.ents[pos] = t.ents[pos]&^0xffffffff | uint64(slot+1)
}

func (t *keyTable) grow() {
	old := t.ents
	t.ents = make([]uint64, max(64, 2*len(old)))
	mask := len(t.ents) - 1
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := int(uint32(e>>32)) & mask
		for t.ents[i] != 0 {
			i = (i + 1) & mask
		}
		t.ents[i] = e
	}
}

// remove empties pos, shifting later entries of the probe run back so no
// tombstone is needed (deletion for linear probing).
func (t *keyTable) remove(pos int) {
	mask := len(t.ents) - 1
	i, j := pos, pos
	for {
		j = (j + 1) & mask
		e := t.ents[j]
		if e == 0 {
			break
		}
		home := int(uint32(e>>32)) & mask
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		t.ents[i] = e
		i = j
	}
	t.ents[i] = 0
	t.n--
}
