package emulator

import "github.com/searchfabric/sfemu/emulator/vector"

// closeVectors stops the graph builders of old's vector indexes (VEC-G3),
// unless a generation in keep shares them (an index reused across an
// ADDITIVE change): a retired index gets no more writes, and building its
// graph would only take CPU from the generation that replaced it. wait
// blocks until the builders have stopped (Close), which takes at most one
// vector insert per builder; retiring does not wait.
func closeVectors(old *collection, keep []*collection, wait bool) {
	if old == nil || old.vecW == nil || keptWorker(old.vecW, keep) {
		return
	}
	for _, vf := range old.vecFields {
		if wait {
			vf.idx.Close()
		} else {
			go vf.idx.Close()
		}
	}
}

// vectorOptions are the vector package's options for a new generation's
// indexes. Its graphs are built at once (Eager) when the emulator is
// eager, or when a vector index of a generation it replaces has been
// searched: the new generation's graph then builds during the rebuild, so
// searches after the swap find it (VEC-G3).
func (e *Emulator) vectorOptions(prev *collection) vector.Options {
	o := vector.Options{HNSWThreshold: e.opts.VectorHNSWThreshold, Eager: e.opts.VectorGraphEager}
	for g := prev; g != nil && !o.Eager; g = g.prevGen {
		for _, vf := range g.vecFields {
			o.Eager = o.Eager || vf.idx.Armed()
		}
	}
	return o
}
