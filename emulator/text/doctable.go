package text

// docTable holds Mem's documents by internal id in fixed-size chunks, so
// that growing it never copies what is already there (a single slice of
// 100k+ entries spent most of Mem's ingest time in append's copies and
// their garbage).
type docTable struct {
	nf     int // fields per document
	n      int // ids assigned
	chunks []*docChunk
}

const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	// compactMin is the number of retired ids below which Mem never
	// compacts (small indexes are cheap to keep as they are).
	compactMin = 4096
)

type docChunk struct {
	pk   [chunkSize]string
	live [chunkSize]bool
	lens []uint32 // tokens per field after stop words: chunkSize x nf
}

// add assigns the next id to pk, live, with zero field lengths.
func (t *docTable) add(pk string) uint32 {
	id := uint32(t.n)
	if t.n%chunkSize == 0 {
		t.chunks = append(t.chunks, &docChunk{lens: make([]uint32, chunkSize*t.nf)})
	}
	c, off := t.at(id)
	c.pk[off], c.live[off] = pk, true
	t.n++
	return id
}

func (t *docTable) at(id uint32) (*docChunk, int) {
	return t.chunks[id>>chunkBits], int(id & (chunkSize - 1))
}

func (t *docTable) live(id uint32) bool {
	c, off := t.at(id)
	return c.live[off]
}

// lensOf is the field lengths of the document at off.
func (c *docChunk) lensOf(off, nf int) []uint32 { return c.lens[off*nf : (off+1)*nf] }
