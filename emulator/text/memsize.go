package text

import "unsafe"

// Memory accounting of Mem (TXT-M6). Bytes counts what Mem itself
// allocates: posting arrays by capacity (what append really reserved), the
// term dictionaries and the key map by entry, the document table by chunk,
// and every key and term string. Map entries are a constant per entry:
// Go's maps keep slots of key+value plus a control byte at a load factor
// between 7/16 and 7/8, so the mean cost is about twice the slot; the
// constants below were checked against runtime heap growth
// (TestMemBytesTracksHeap, ratio in specs/emulator-text-vector.md).
const (
	stringHeader = int64(unsafe.Sizeof(""))
	sliceHeader  = int64(unsafe.Sizeof([]posting(nil)))
	postingBytes = int64(unsafe.Sizeof(posting{}))
	// mapEntryBytes is the mean cost of one map[string]uint32 entry.
	mapEntryBytes = 2 * (stringHeader + 4 + 1)
)

// chunkBytes is one docChunk with nf fields.
func chunkBytes(nf int) int64 {
	return int64(unsafe.Sizeof(docChunk{})) + int64(chunkSize*nf)*4
}

// Bytes returns the accounted memory of the index (TXT-M6).
func (m *Mem) Bytes() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.bytes
}

// recount recomputes m.bytes from the structures (after reset and
// compaction, which rebuild them). The key map keeps its high-water mark:
// a Go map never shrinks.
func (m *Mem) recount() {
	b := int64(len(m.docs.chunks)) * (chunkBytes(m.docs.nf) + 8)
	for _, c := range m.docs.chunks {
		for _, pk := range c.pk {
			b += int64(len(pk))
		}
	}
	m.keysPeak = max(m.keysPeak, len(m.byPK))
	b += int64(m.keysPeak) * mapEntryBytes
	for f, dict := range m.dicts {
		b += m.lists[f].headerBytes()
		for t, tid := range dict {
			b += int64(len(t)) + mapEntryBytes + int64(cap(m.lists[f].get(tid)))*postingBytes
		}
	}
	m.bytes = b
}
