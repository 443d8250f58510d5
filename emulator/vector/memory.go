package vector

import "unsafe"

// Bytes is the index's memory by the accounting of rule VEC-G4, from the
// capacities of what it holds: the slab (vectors, keys, slot map and
// bookkeeping) and the graph (its vectors, link blocks and node keys). A
// rebuild's second graph is transient and not counted.
func (x *Index) Bytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	const str = int64(unsafe.Sizeof("")) // a key's header in a slice
	// A map entry: key header, int value and control byte, at a load
	// between the 7/8 the table grows at and half that after doubling.
	const mapEntry = (str + 8 + 1) * 3 / 2
	var keys int64
	for _, pk := range x.pks {
		keys += int64(len(pk))
	}
	n := int64(len(x.pks))
	b := keys + str*int64(cap(x.pks)) + 4*int64(cap(x.vecs)) + mapEntry*n +
		4*int64(cap(x.node)+cap(x.pend)+cap(x.pending))
	if g := x.g; g != nil {
		g.mu.RLock()
		h := g.h
		nd := int64(unsafe.Sizeof(nodeDist{}))
		b += 4*int64(cap(h.vecs)) + nd*int64(cap(h.l0)) + 2*int64(cap(h.l0n)) +
			int64(unsafe.Sizeof([][]nodeDist{}))*int64(cap(h.up)) + str*int64(cap(g.nodePK))
		for _, up := range h.up {
			for _, l := range up {
				b += int64(unsafe.Sizeof([]nodeDist{})) + nd*int64(cap(l))
			}
		}
		g.mu.RUnlock()
	}
	return b
}
