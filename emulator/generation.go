package emulator

import apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"

// Generations (specs/emulator-contract.md E55..E58). A schema change builds
// the new generation's text and vector indexes beside the serving ones;
// searches keep being answered by the previous generation until the new
// one is complete and has caught up with the safe_ts already reported, and
// then the new one takes over in one step under the emulator's lock. At
// most two generations of a name exist at once: a change that arrives while
// a rebuild is still running discards the unfinished generation, and the
// generation that was serving keeps serving.

// serving returns the generation that answers searches for c (E55).
func (c *collection) serving() *collection {
	if c.prevGen != nil {
		return c.prevGen
	}
	return c
}

// safeLocked is the collection's reported safe_ts (E52, E56): the serving
// generation's, never below a value reported before. 0 only while the
// collection has never had a safe_ts. Called with mu held (read or write).
func (e *Emulator) safeLocked(c *collection) uint64 {
	return max(e.held[c.name()], c.serving().safeTs())
}

// settleLocked records the reported safe_ts and hands searches over to c
// once its safe_ts is defined and not below the held value (E55, E56).
// Called with mu held for writing, whenever c's watermarks may have moved.
func (e *Emulator) settleLocked(c *collection) {
	name := c.name()
	h := max(e.held[name], c.serving().safeTs())
	if c.prevGen != nil {
		if s, ok := c.wm.Safe(); ok && s >= h {
			retireGen(c.prevGen, c)
			c.prevGen = nil
			h = s
		}
	}
	e.held[name] = h
}

// adoptLocked decides which generation serves searches while next, built
// from prev by a schema change, builds its indexes (E55). Called with mu
// held for writing, before next replaces prev in e.colls.
func (e *Emulator) adoptLocked(prev, next *collection) {
	if prev == nil || !prev.active() {
		return
	}
	serving := prev.serving()
	if serving != prev {
		// prev was itself still being built: drop it, its predecessor
		// keeps serving.
		retireGen(prev, next, serving)
	}
	if _, ok := serving.wm.Safe(); ok {
		next.prevGen = serving
		return
	}
	// A generation that never had a safe_ts has promised nothing; the new
	// one serves at once.
	retireGen(serving, next)
}

// retireGen stops a generation's async workers and closes its text index,
// except what a generation in keep still uses (an index re-used across an
// ADDITIVE change). The index closes once its worker has stopped.
func retireGen(old *collection, keep ...*collection) {
	if old == nil {
		return
	}
	for _, w := range []*asyncIndex{old.textW, old.vecW} {
		if w != nil && !keptWorker(w, keep) {
			w.stop()
		}
	}
	closeVectors(old, keep, false)
	if old.textIdx != nil && !keptWorker(old.textW, keep) {
		idx, w := old.textIdx, old.textW
		go func() {
			if w != nil {
				<-w.done
			}
			_ = idx.Close()
		}()
	}
}

// closeGen is retireGen that waits (Close).
func closeGen(old *collection, keep ...*collection) {
	for _, w := range []*asyncIndex{old.textW, old.vecW} {
		if w != nil && !keptWorker(w, keep) {
			w.stop()
			<-w.done
		}
	}
	closeVectors(old, keep, true)
	if old.textIdx != nil && !keptWorker(old.textW, keep) {
		_ = old.textIdx.Close()
	}
}

func keptWorker(w *asyncIndex, keep []*collection) bool {
	if w == nil {
		return false
	}
	for _, k := range keep {
		if k != nil && (k.textW == w || k.vecW == w) {
			return true
		}
	}
	return false
}

// rebuildLocked reports c's rebuild for CollectionStatus.rebuild and the
// metrics (E58); nil when c serves its own searches.
func rebuildLocked(c *collection) *apiv1.RebuildStatus {
	if c.prevGen == nil {
		return nil
	}
	var done, total int
	for _, w := range c.rebuilding {
		d, t := w.rebuildProgress()
		done += d
		total += t
	}
	pct := uint32(100)
	if total > 0 {
		pct = uint32(done * 100 / total)
	}
	return &apiv1.RebuildStatus{
		Generation:        c.rec.GetLineage().GetGeneration(),
		ServingGeneration: c.prevGen.rec.GetLineage().GetGeneration(),
		Percent:           pct,
	}
}
