package text

import "unsafe"

// Mem's per-term storage. Most terms of database rows are rare (ids,
// codes, numbers: one new term per row), so a term's first posting and
// its dictionary key were two small allocations per row that the
// collector then had to trace for the index's lifetime. Both are carved
// out of shared chunks instead: a new posting list is a one-slot,
// capacity-limited window of a posting chunk (its first append past it
// moves the list to a slice of its own), and a new term's bytes are
// copied into a byte chunk the dictionary key points into. A chunk stays
// alive while any list or term it holds does; compaction rebuilds every
// list and leaves the old chunks to the collector.
const (
	postingChunk = 1024
	termChunk    = 4096
	// listChunkBytes is one listTable chunk and its pointer.
	listChunkBytes = chunkSize*sliceHeader + 8
)

type arena struct {
	postings []posting
	terms    []byte
}

// newList returns a one-posting list holding p.
func (a *arena) newList(p posting) []posting {
	if len(a.postings) == cap(a.postings) {
		a.postings = make([]posting, 0, postingChunk)
	}
	n := len(a.postings)
	a.postings = append(a.postings, p)
	return a.postings[n : n+1 : n+1]
}

// term returns a copy of t that does not pin t's backing array (a
// fast-path term is a substring of the document's text).
func (a *arena) term(t string) string {
	if len(t) > termChunk/8 {
		return string([]byte(t)) // rare long term: its own allocation
	}
	if cap(a.terms)-len(a.terms) < len(t) {
		a.terms = make([]byte, 0, termChunk)
	}
	n := len(a.terms)
	a.terms = append(a.terms, t...)
	b := a.terms[n:len(a.terms):len(a.terms)]
	return unsafe.String(unsafe.SliceData(b), len(b)) // never written again
}

// listTable is one field's posting lists by term id, in fixed-size chunks
// like docTable: growing it never copies (or clears) the headers already
// there, which a single slice of 100k+ lists did on every doubling.
type listTable struct {
	n      int
	chunks []*[chunkSize][]posting
}

func (t *listTable) add(pl []posting) uint32 {
	id := uint32(t.n)
	if t.n%chunkSize == 0 {
		t.chunks = append(t.chunks, new([chunkSize][]posting))
	}
	t.chunks[id>>chunkBits][id&(chunkSize-1)] = pl
	t.n++
	return id
}

func (t *listTable) get(id uint32) []posting { return t.chunks[id>>chunkBits][id&(chunkSize-1)] }

func (t *listTable) set(id uint32, pl []posting) { t.chunks[id>>chunkBits][id&(chunkSize-1)] = pl }

// headerBytes is the accounted size of the table's list headers.
func (t *listTable) headerBytes() int64 {
	return int64(len(t.chunks)) * listChunkBytes
}
