package logpuller

// The in-memory index of every spilled run (prewrite runs, LP14, and
// delivered-row runs, LP17) is charged to the memory quota (LP18). It may
// take the quota's reserve (memquota.SetReserve): a run cannot be read
// without its index, so the holders that spill must not starve it. When
// even the reserve cannot take it the run is kept uncharged for those
// bytes (the run is on disk by then: refusing its index would lose its
// rows) and Stats.IndexRefused counts the refusals, so the quota itself is never
// passed and what it misses is in the metrics.

// chargeIndex brings run's index charge to its current size.
func (p *SpanPuller) chargeIndex(run *spilledRun) {
	delta := run.indexBytes() - run.indexed
	switch {
	case delta < 0:
		p.mm.Memory.Release(-delta)
	case delta == 0:
		return
	case !p.mm.Memory.TryAcquireReserved(delta):
		p.stats.IndexRefused++
		return
	}
	run.indexed += delta
	p.indexBytes += delta
}

// releaseIndex gives back run's index charge (the run is gone).
func (p *SpanPuller) releaseIndex(run *spilledRun) {
	p.mm.Memory.Release(run.indexed)
	p.indexBytes -= run.indexed
	run.indexed = 0
}

// IndexBytes is what the span's run indexes are charged (LP18).
func (p *SpanPuller) IndexBytes() int64 { return p.indexBytes }
