package schemafence

import "fmt"

// The checks below recompute from scratch what the cores keep incrementally
// (the fence's cached minimum, the published applied_ts and safe_ts). Built
// with -tags invariants they run after every operation and panic on a
// mismatch: a mismatch is a bug in this package, never bad input, which
// the operations report as errors.

// checkInvariants is deferred by every Fence operation when
// invariants.Enabled.
func (f *Fence) checkInvariants() {
	if err := f.verify(); err != nil {
		panic(err)
	}
}

// verify: missing counts the tables without a report, and a defined fence
// is the minimum over all tables.
func (f *Fence) verify() error {
	missing := 0
	for i := range f.ts {
		if !f.reported[i] {
			missing++
		}
	}
	if missing != f.missing {
		return fmt.Errorf("schemafence invariant: fence counts %d tables without progress, %d have none", f.missing, missing)
	}
	if missing > 0 {
		return nil
	}
	m := Unbounded
	for _, v := range f.ts {
		m = min(m, v)
	}
	if len(f.ids) != len(f.ts) || len(f.index) != len(f.ts) || len(f.reported) != len(f.ts) || len(f.slot) != len(f.ts) {
		return fmt.Errorf("schemafence invariant: fence holds %d ids, %d index entries, %d slots, %d ts, %d flags", len(f.ids), len(f.index), len(f.slot), len(f.ts), len(f.reported))
	}
	for i, id := range f.slot {
		if f.index[id] != i {
			return fmt.Errorf("schemafence invariant: table %d is at slot %d, its index says %d", id, i, f.index[id])
		}
	}
	if m != f.min {
		return fmt.Errorf("schemafence invariant: cached fence %d, min over tables %d", f.min, m)
	}
	return nil
}

// checkInvariants is deferred by every Watermarks operation when
// invariants.Enabled.
func (w *Watermarks) checkInvariants() {
	if err := w.verify(); err != nil {
		panic(err)
	}
}

// verify: every published applied_ts equals the min over its partitions
// (so the monotonic guard saw every value the readers see), no applied_ts
// exceeds a partition's value, and safe_ts is the min over the applied_ts.
func (w *Watermarks) verify() error {
	for _, m := range w.modalities {
		pub, published := w.applied.Get(m)
		a, defined := w.computeApplied(m)
		if published != defined || pub != a {
			return fmt.Errorf("schemafence invariant: applied_ts of %s published=%d (%v), computed=%d (%v)", m, pub, published, a, defined)
		}
		if !defined {
			continue
		}
		for _, p := range w.partitions {
			if v := w.vals[m][p]; v < a {
				return fmt.Errorf("schemafence invariant: applied_ts of %s is %d above partition %s at %d", m, a, p, v)
			}
		}
	}
	pub, published := w.safe.Get("safe_ts")
	s, defined := w.computeSafe()
	if published != defined || pub != s {
		return fmt.Errorf("schemafence invariant: safe_ts published=%d (%v), computed=%d (%v)", pub, published, s, defined)
	}
	return nil
}
