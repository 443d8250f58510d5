package logpuller

import "fmt"

// The checks below run only under the invariants build tag (callers guard
// them with invariants.Enabled, so normal builds compile them out). A
// failure is a bug in the core, never bad input: they panic, naming the
// rule (specs/logpuller.md LP12).

// checkEmitted: the frontier never falls below what the span emitted, and
// nothing about to be delivered is at or below it (LP7, LP9).
func (p *SpanPuller) checkEmitted(batch bool) {
	if m := p.front.min(); m < p.emittedTs {
		panic(fmt.Sprintf("logpuller invariant (LP7) broken: span frontier %d below the emitted resolved ts %d", m, p.emittedTs))
	}
	if !batch {
		return
	}
	for _, e := range p.batch {
		if e.CRTs <= p.emittedTs {
			panic(fmt.Sprintf("logpuller invariant (LP9) broken: row of key %x commit_ts %d delivered at or below the emitted resolved ts %d",
				e.Key, e.CRTs, p.emittedTs))
		}
	}
}

// checkHeld: the span's held-bytes count is the sum over its live regions'
// matchers, and an empty matcher holds nothing (LP11).
func (p *SpanPuller) checkHeld() {
	sum := 0
	var disk int64
	for id, st := range p.regions {
		if st.m.bytes < 0 || st.m.bytes != st.m.held.bytes || (st.m.held.n == 0 && st.m.bytes != 0) {
			panic(fmt.Sprintf("logpuller invariant (LP11) broken: region %d matcher holds %d bytes (its table %d) in %d entries", id, st.m.bytes, st.m.held.bytes, st.m.held.n))
		}
		sum += st.m.bytes
		for _, r := range st.m.runs {
			if r.live <= 0 || r.live > r.count {
				panic(fmt.Sprintf("logpuller invariant (LP14) broken: region %d run %s has %d live records of %d", id, r.r.Name(), r.live, r.count))
			}
			disk += r.cost
		}
		if st.m.tail != nil {
			disk += st.m.tail.run.cost
		}
	}
	if disk != p.spilledBytes {
		panic(fmt.Sprintf("logpuller invariant (LP14) broken: span counts %d spilled bytes, its regions' runs %d", p.spilledBytes, disk))
	}
	if sum != p.heldBytes {
		panic(fmt.Sprintf("logpuller invariant (LP11) broken: span counts %d held bytes, its regions' matchers %d", p.heldBytes, sum))
	}
}

// checkMatcher recounts one matcher's bytes from its table (a scan of
// the table: done when a region is dropped, not on every row) and checks
// that every held entry is found through the index (LP11, LP13).
func checkMatcher(regionID uint64, m *matcher) {
	t := &m.held
	n := allocSize(8*len(t.slots)) + allocSize(cap(t.spare)*heldEntrySize)
	for _, c := range t.chunks {
		n += allocSize(cap(c) * heldEntrySize)
	}
	entries, used := 0, 0
	for _, w := range t.slots {
		if w != 0 {
			used++
		}
	}
	t.each(func(e *heldEntry) {
		n += allocSize(e.payload())
		if _, i := t.find(uint64(e.tag), e.startTs, e.key()); i != entries {
			panic(fmt.Sprintf("logpuller invariant (LP13) broken: region %d matcher entry %d found at %d", regionID, entries, i))
		}
		entries++
	})
	if n != m.bytes || n != t.bytes || entries != t.n || used != t.n {
		panic(fmt.Sprintf("logpuller invariant (LP11) broken: region %d matcher counts %d bytes (table %d), its table holds %d in %d entries (%d counted, %d slots used)",
			regionID, m.bytes, t.bytes, n, entries, t.n, used))
	}
}
