package logpuller

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/searchfabric/sfemu/internal/invariants"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// rangeEntry is one piece of the span: either held by a region subscription
// (owner != 0) or unlocked (owner == 0: between a failure and the
// re-subscription, or never subscribed yet). Its ts is the piece's resolved
// ts; unlocked pieces keep the ts they had when they were released.
type rangeEntry struct {
	start, end []byte // comparable; end empty = +inf
	ts         uint64
	owner      uint64
}

// frontier is the span's resolved-ts frontier: a sorted, gap-free, non
// overlapping cover of the span by range entries. The span ts is the min over
// all entries, so an unlocked hole holds the span back exactly as a live
// region does.
type frontier struct {
	span    kvevent.Span
	ranges  []*rangeEntry // sorted by start, contiguous
	byOwner map[uint64]*rangeEntry
	// The min over ranges is cached with the number of ranges at it: a
	// round of resolved ts moving n regions costs O(n), not O(n) per
	// region (per-region resolved ts, regions with rows queued). forward
	// only raises a ts, so the min stays valid until its last range moves.
	minTs    uint64
	minCount int
	minValid bool
	// floor is the smallest the minimum may ever be again (LP7: it never
	// decreases); kept up to date only under the invariants build tag.
	floor uint64
}

func newFrontier(span kvevent.Span, ts uint64) *frontier {
	s := cloneSpan(span)
	return &frontier{
		span:    s,
		ranges:  []*rangeEntry{{start: s.StartKey, end: s.EndKey, ts: ts}},
		byOwner: make(map[uint64]*rangeEntry),
	}
}

// lock hands sub (which must lie inside the span and be entirely unlocked) to
// region owner and returns the checkpoint to subscribe it from: the minimum
// ts of the pieces it covers.
func (f *frontier) lock(sub kvevent.Span, owner uint64) (uint64, error) {
	if owner == 0 {
		return 0, fmt.Errorf("logpuller: region id 0 is reserved")
	}
	if _, dup := f.byOwner[owner]; dup {
		return 0, fmt.Errorf("logpuller: region %d already holds a range of this span", owner)
	}
	in, ok := Intersect(sub, f.span)
	if !ok || !bytes.Equal(in.StartKey, sub.StartKey) || endCompare(in.EndKey, sub.EndKey) != 0 {
		return 0, fmt.Errorf("logpuller: region %d range [%x, %x) is not inside span [%x, %x)",
			owner, sub.StartKey, sub.EndKey, f.span.StartKey, f.span.EndKey)
	}
	// Locate the covered pieces [i, j): the ranges are sorted and
	// contiguous, so the first one is the last that starts at or before
	// sub's start (binary search keeps subscribing n regions O(n log n)
	// in comparisons).
	i := sort.Search(len(f.ranges), func(k int) bool { return bytes.Compare(f.ranges[k].start, sub.StartKey) > 0 }) - 1
	if i < 0 {
		i = 0
	}
	j := i
	minTs := uint64(math.MaxUint64)
	for j < len(f.ranges) && startBeforeEnd(f.ranges[j].start, sub.EndKey) {
		r := f.ranges[j]
		if r.owner != 0 {
			return 0, &RangeLockedError{Span: cloneSpan(sub), Holder: r.owner}
		}
		if r.ts < minTs {
			minTs = r.ts
		}
		j++
	}
	if i == j {
		return 0, fmt.Errorf("logpuller: region %d range [%x, %x) covers nothing", owner, sub.StartKey, sub.EndKey)
	}
	first, last := f.ranges[i], f.ranges[j-1]
	repl := make([]*rangeEntry, 0, 3)
	if bytes.Compare(first.start, sub.StartKey) < 0 {
		repl = append(repl, &rangeEntry{start: first.start, end: cloneBytes(sub.StartKey), ts: first.ts})
	}
	held := &rangeEntry{start: cloneBytes(sub.StartKey), end: cloneBytes(sub.EndKey), ts: minTs, owner: owner}
	repl = append(repl, held)
	if endCompare(last.end, sub.EndKey) > 0 {
		repl = append(repl, &rangeEntry{start: cloneBytes(sub.EndKey), end: last.end, ts: last.ts})
	}
	f.ranges = slices.Replace(f.ranges, i, j, repl...)
	f.byOwner[owner] = held
	f.minValid = false
	if invariants.Enabled {
		f.checkInvariants("lock")
	}
	return minTs, nil
}

// unlock releases owner's range, keeping its ts, and returns it.
func (f *frontier) unlock(owner uint64) (kvevent.Span, uint64, bool) {
	r, ok := f.byOwner[owner]
	if !ok {
		return kvevent.Span{}, 0, false
	}
	delete(f.byOwner, owner)
	r.owner = 0
	if invariants.Enabled {
		f.checkInvariants("unlock")
	}
	return kvevent.Span{StartKey: r.start, EndKey: r.end}, r.ts, true
}

// forward raises owner's ts; lower values are ignored (a fallback is normal).
func (f *frontier) forward(owner, ts uint64) bool {
	r, ok := f.byOwner[owner]
	if !ok || ts <= r.ts {
		return false
	}
	if f.minValid && r.ts == f.minTs {
		if f.minCount--; f.minCount == 0 {
			f.minValid = false
		}
	}
	r.ts = ts
	if invariants.Enabled {
		f.checkInvariants("forward")
	}
	return true
}

// min is the span's resolved ts.
func (f *frontier) min() uint64 {
	if !f.minValid {
		f.minTs, f.minCount = scanMin(f.ranges)
		f.minValid = true
	}
	if invariants.Enabled {
		f.checkInvariants("min")
	}
	return f.minTs
}

// checkInvariants re-checks the whole frontier after an operation (LP12,
// under the invariants build tag only: it costs a scan of every range).
// The cover must be sound, the cached minimum must equal a full scan's,
// and the minimum must not have fallen below any earlier one.
func (f *frontier) checkInvariants(op string) {
	if err := f.check(); err != nil {
		panic(fmt.Sprintf("logpuller invariant (LP12) broken after frontier %s: %v", op, err))
	}
	m, _ := scanMin(f.ranges)
	if m < f.floor {
		panic(fmt.Sprintf("logpuller invariant (LP7) broken after frontier %s: the span minimum fell from %d to %d", op, f.floor, m))
	}
	f.floor = m
}

// scanMin is the min ts over ranges and how many ranges hold it.
func scanMin(ranges []*rangeEntry) (uint64, int) {
	m, n := uint64(math.MaxUint64), 0
	for _, r := range ranges {
		switch {
		case r.ts < m:
			m, n = r.ts, 1
		case r.ts == m:
			n++
		}
	}
	return m, n
}

// Hole is an unlocked part of the span that must be (re-)subscribed from Ts.
type Hole struct {
	Span kvevent.Span
	Ts   uint64
}

// holes lists the unlocked pieces, merging neighbours (their checkpoint is
// the min of both).
func (f *frontier) holes() []Hole {
	var out []Hole
	for _, r := range f.ranges {
		if r.owner != 0 {
			continue
		}
		if n := len(out); n > 0 && bytes.Equal(out[n-1].Span.EndKey, r.start) && len(out[n-1].Span.EndKey) != 0 {
			out[n-1].Span.EndKey = cloneBytes(r.end)
			if r.ts < out[n-1].Ts {
				out[n-1].Ts = r.ts
			}
			continue
		}
		out = append(out, Hole{Span: kvevent.Span{StartKey: cloneBytes(r.start), EndKey: cloneBytes(r.end)}, Ts: r.ts})
	}
	return out
}

// check verifies the cover invariant (tests and debug builds).
func (f *frontier) check() error {
	if len(f.ranges) == 0 {
		return fmt.Errorf("frontier: empty")
	}
	if !bytes.Equal(f.ranges[0].start, f.span.StartKey) {
		return fmt.Errorf("frontier: first range starts at %x, span at %x", f.ranges[0].start, f.span.StartKey)
	}
	if endCompare(f.ranges[len(f.ranges)-1].end, f.span.EndKey) != 0 {
		return fmt.Errorf("frontier: last range ends at %x, span at %x", f.ranges[len(f.ranges)-1].end, f.span.EndKey)
	}
	owners := 0
	for i, r := range f.ranges {
		if !startBeforeEnd(r.start, r.end) {
			return fmt.Errorf("frontier: range %d [%x, %x) is empty", i, r.start, r.end)
		}
		if i > 0 && !bytes.Equal(f.ranges[i-1].end, r.start) {
			return fmt.Errorf("frontier: gap or overlap between range %d end %x and range %d start %x", i-1, f.ranges[i-1].end, i, r.start)
		}
		if r.owner != 0 {
			owners++
			if f.byOwner[r.owner] != r {
				return fmt.Errorf("frontier: range %d owner %d not indexed", i, r.owner)
			}
		}
	}
	if owners != len(f.byOwner) {
		return fmt.Errorf("frontier: %d owned ranges but %d indexed owners", owners, len(f.byOwner))
	}
	if m, n := scanMin(f.ranges); f.minValid && (m != f.minTs || n != f.minCount) {
		return fmt.Errorf("frontier: cached min %d (%d ranges), actual %d (%d ranges)", f.minTs, f.minCount, m, n)
	}
	return nil
}

// RangeLockedError says a sub-span overlaps a range another region holds:
// the transport must retry only the uncovered holes (Holes()).
type RangeLockedError struct {
	Span   kvevent.Span
	Holder uint64
}

func (e *RangeLockedError) Error() string {
	return fmt.Sprintf("logpuller: range [%x, %x) overlaps a range held by region %d", e.Span.StartKey, e.Span.EndKey, e.Holder)
}
