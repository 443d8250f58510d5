package vector

// The exact slab keeps slot i in page i>>pageShift at offset
// i&pageMask. Fixed pages instead of one slice per field: appending a
// vector never copies the ones stored before it (growing flat slices cost
// about half of an upsert, much of it write barriers on the key slice),
// and a page's vectors are one contiguous block, which is what a spill
// writes and an exact scan over the spill file reads (VEC-Q1).
const (
	pageShift = 10
	pageSlots = 1 << pageShift
	pageMask  = pageSlots - 1
)

// page holds pageSlots slots: key, graph node (-1: none), position in the
// pending tail (-1: indexed) and, while the slab is in memory, the
// vectors (stored form, pageSlots x dim); nil once spilled.
type page struct {
	pks  [pageSlots]string
	node [pageSlots]int32
	pend [pageSlots]int32
	vecs []float32
}

func (x *Index) newPage() *page {
	p := &page{}
	if x.disk == nil {
		p.vecs = make([]float32, pageSlots*x.dim)
	}
	return p
}

// at returns slot i's page and offset in it.
func (x *Index) at(i int) (*page, int) { return x.pages[i>>pageShift], i & pageMask }

// pk returns slot i's key.
func (x *Index) pk(i int) string { return x.pages[i>>pageShift].pks[i&pageMask] }

// vec returns slot i's stored vector (in-memory slab only).
func (x *Index) vec(i int) []float32 {
	o := (i & pageMask) * x.dim
	return x.pages[i>>pageShift].vecs[o : o+x.dim : o+x.dim]
}

// trimPages frees the pages beyond the one holding the next slot, keeping
// one empty page as slack so a delete/insert cycle at a page boundary does
// not allocate each time.
func (x *Index) trimPages() {
	keep := x.n>>pageShift + 2
	for len(x.pages) > keep {
		x.pages[len(x.pages)-1] = nil
		x.pages = x.pages[:len(x.pages)-1]
	}
}

// scanVectors calls fn for every slot with its stored vector, in slot
// order: from the pages, or read back page by page from the spill file.
// v is only valid during the call. Caller holds mu (read).
func (x *Index) scanVectors(fn func(i int, v []float32)) error {
	var buf []float32
	for pi, p := range x.pages {
		first := pi << pageShift
		cnt := min(pageSlots, x.n-first)
		if cnt <= 0 {
			break
		}
		vecs := p.vecs
		if x.disk != nil {
			if buf == nil {
				buf = make([]float32, pageSlots*x.dim)
			}
			vecs = buf[:cnt*x.dim]
			if err := x.disk.readRun(first, vecs); err != nil {
				return err
			}
		}
		for o := 0; o < cnt; o++ {
			fn(first+o, vecs[o*x.dim:(o+1)*x.dim:(o+1)*x.dim])
		}
	}
	return nil
}
