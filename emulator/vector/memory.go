package vector

import "unsafe"

const (
	strHeader    = int64(unsafe.Sizeof(""))
	sliceHeader  = int64(unsafe.Sizeof([]nodeDist{}))
	nodeDistSize = int64(unsafe.Sizeof(nodeDist{}))
	pageBytes    = int64(unsafe.Sizeof(page{}))
)

// Bytes is the index's memory by the accounting of rule VEC-G4: the slab
// (pages of keys, bookkeeping and, unless spilled, vectors; the key
// table; the tail), the graph (its vectors, link blocks and node keys)
// and a graph rebuild's second graph while it is built. It is what the
// index charges to its quota (VEC-Q1), kept O(1) by counters.
func (x *Index) Bytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.bytesLocked()
}

func (x *Index) bytesLocked() int64 {
	per := pageBytes
	if x.disk == nil {
		per += 4 * int64(pageSlots*x.dim)
	}
	return per*int64(len(x.pages)) + x.keyBytes + 8*int64(len(x.keys.ents)) +
		4*int64(cap(x.pending)) + x.graphBytes + x.rebuildBytes
}

// bytes is the graph's memory. Only its builder changes h, so the builder
// reads it without h's lock.
func (g *graph) bytes() int64 {
	h := g.h
	return 4*int64(cap(h.vecs)) + nodeDistSize*int64(cap(h.l0)) + 2*int64(cap(h.l0n)) +
		sliceHeader*int64(cap(h.up)) + h.upBytes + strHeader*int64(cap(g.nodePK))
}
