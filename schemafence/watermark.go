package schemafence

import (
	"fmt"
	"sort"

	"github.com/searchfabric/sfemu/internal/invariants"
)

// Modality names used by the emulator contract (specs/emulator-contract.md).
// document is always enabled; the others are optional per collection.
const (
	ModalityDocument    = "document"
	ModalityText        = "text"
	ModalityVector      = "vector"
	ModalityMetadataAux = "metadata_aux"
)

// MinTs returns the smallest of vals, or 0 for no values. Callers that must
// tell "no values" from "zero" check len(vals) themselves.
func MinTs(vals ...uint64) uint64 {
	if len(vals) == 0 {
		return 0
	}
	m := vals[0]
	for _, v := range vals[1:] {
		if v < m {
			m = v
		}
	}
	return m
}

// Monotonic is a set of named timestamps that may only grow. Advance with a
// smaller value returns a *RegressionError and leaves the stored value
// untouched: it never clamps. The zero value is ready to use.
type Monotonic struct {
	// What names the kind of value in errors ("applied_ts", "checkpoint",
	// ...); empty means "timestamp".
	What string
	vals map[string]uint64
}

// Advance sets name to ts. Equal values are accepted (replays are no-ops).
func (m *Monotonic) Advance(name string, ts uint64) error {
	if m.vals == nil {
		m.vals = make(map[string]uint64)
	}
	if old, ok := m.vals[name]; ok && ts < old {
		what := m.What
		if what == "" {
			what = "timestamp"
		}
		return &RegressionError{What: what, Name: name, Old: old, New: ts}
	}
	m.vals[name] = ts
	return nil
}

// Get returns the value stored for name.
func (m *Monotonic) Get(name string) (uint64, bool) {
	v, ok := m.vals[name]
	return v, ok
}

// Watermarks derives one collection's progress (specs/emulator-contract.md):
//
//   - applied_ts(modality) = min over the collection's mapped source
//     partitions of that modality's applied resolved ts; undefined until
//     every partition has reported for the modality.
//   - safe_ts = min over the enabled modalities' applied_ts (metadata_aux
//     counts only when enabled); undefined until all of them are defined.
//
// Every per-partition value, every applied_ts and safe_ts only grow; an
// input or a derived value going backwards is a *RegressionError and the
// state is left as it was before the call.
type Watermarks struct {
	partitions []string // sorted
	modalities []string // sorted, contains document
	// per modality, per partition applied ts
	vals map[string]map[string]uint64
	// derived values already published, guarded monotonic
	applied Monotonic
	safe    Monotonic
}

// NewWatermarks builds the progress of a collection fed by partitions with
// the given enabled modalities. document is added when missing; partitions
// must be non-empty; unknown modality names are errors.
func NewWatermarks(partitions []string, modalities []string) (*Watermarks, error) {
	if len(partitions) == 0 {
		return nil, fmt.Errorf("schemafence: watermarks need at least one source partition")
	}
	w := &Watermarks{vals: make(map[string]map[string]uint64)}
	w.applied.What = "applied_ts"
	w.safe.What = "safe_ts"
	seenP := map[string]bool{}
	for _, p := range partitions {
		if p == "" {
			return nil, fmt.Errorf("schemafence: empty source partition name")
		}
		if seenP[p] {
			return nil, fmt.Errorf("schemafence: duplicate source partition %q", p)
		}
		seenP[p] = true
		w.partitions = append(w.partitions, p)
	}
	seenM := map[string]bool{ModalityDocument: true}
	w.modalities = []string{ModalityDocument}
	for _, m := range modalities {
		switch m {
		case ModalityDocument, ModalityText, ModalityVector, ModalityMetadataAux:
		default:
			return nil, fmt.Errorf("schemafence: unknown modality %q (want document, text, vector or metadata_aux)", m)
		}
		if !seenM[m] {
			seenM[m] = true
			w.modalities = append(w.modalities, m)
		}
	}
	sort.Strings(w.partitions)
	sort.Strings(w.modalities)
	for _, m := range w.modalities {
		w.vals[m] = make(map[string]uint64, len(w.partitions))
	}
	return w, nil
}

// Partitions returns the mapped partitions, sorted.
func (w *Watermarks) Partitions() []string { return append([]string(nil), w.partitions...) }

// Modalities returns the enabled modalities, sorted.
func (w *Watermarks) Modalities() []string { return append([]string(nil), w.modalities...) }

// AddPartition maps one more partition into the collection with its
// initial applied ts for every modality. It fails when that would lower an
// already published applied_ts or safe_ts.
func (w *Watermarks) AddPartition(partition string, ts uint64) error {
	if invariants.Enabled {
		defer w.checkInvariants()
	}
	for _, p := range w.partitions {
		if p == partition {
			return fmt.Errorf("schemafence: source partition %q already mapped", partition)
		}
	}
	for _, m := range w.modalities {
		if a, ok := w.applied.Get(m); ok && ts < a {
			return &RegressionError{What: "applied_ts", Name: m, Old: a, New: ts}
		}
	}
	w.partitions = append(w.partitions, partition)
	sort.Strings(w.partitions)
	for _, m := range w.modalities {
		w.vals[m][partition] = ts
	}
	return w.publish()
}

// Advance records that modality has applied every change of partition with
// commit_ts <= ts.
func (w *Watermarks) Advance(modality, partition string, ts uint64) error {
	if invariants.Enabled {
		defer w.checkInvariants()
	}
	pm, ok := w.vals[modality]
	if !ok {
		return fmt.Errorf("schemafence: modality %q is not enabled (enabled: %v)", modality, w.modalities)
	}
	if !w.hasPartition(partition) {
		return fmt.Errorf("schemafence: source partition %q is not mapped (mapped: %v)", partition, w.partitions)
	}
	old, had := pm[partition]
	if had && ts < old {
		return &RegressionError{What: "partition applied ts", Name: modality + "@" + partition, Old: old, New: ts}
	}
	pm[partition] = ts
	if err := w.publish(); err != nil {
		if had {
			pm[partition] = old
		} else {
			delete(pm, partition)
		}
		return err
	}
	return nil
}

func (w *Watermarks) hasPartition(p string) bool {
	i := sort.SearchStrings(w.partitions, p)
	return i < len(w.partitions) && w.partitions[i] == p
}

// publish recomputes derived values and runs them through the monotonic
// guards. Per-partition inputs only grow, so a regression here means a bug
// (or a partition added below the published value, checked earlier).
func (w *Watermarks) publish() error {
	for _, m := range w.modalities {
		if a, ok := w.computeApplied(m); ok {
			if err := w.applied.Advance(m, a); err != nil {
				return err
			}
		}
	}
	if s, ok := w.computeSafe(); ok {
		if err := w.safe.Advance("safe_ts", s); err != nil {
			return err
		}
	}
	return nil
}

func (w *Watermarks) computeApplied(modality string) (uint64, bool) {
	pm := w.vals[modality]
	if len(pm) < len(w.partitions) {
		return 0, false
	}
	first := true
	var m uint64
	for _, p := range w.partitions {
		v := pm[p]
		if first || v < m {
			m, first = v, false
		}
	}
	return m, true
}

func (w *Watermarks) computeSafe() (uint64, bool) {
	first := true
	var s uint64
	for _, m := range w.modalities {
		a, ok := w.computeApplied(m)
		if !ok {
			return 0, false
		}
		if first || a < s {
			s, first = a, false
		}
	}
	return s, true
}

// Applied returns applied_ts for modality; ok is false while any mapped
// partition has not reported for it, or when the modality is not enabled.
func (w *Watermarks) Applied(modality string) (uint64, bool) {
	if _, ok := w.vals[modality]; !ok {
		return 0, false
	}
	return w.computeApplied(modality)
}

// Safe returns safe_ts; ok is false while any enabled modality's
// applied_ts is undefined.
func (w *Watermarks) Safe() (uint64, bool) { return w.computeSafe() }

// PartitionApplied returns the last applied ts modality reported for
// partition.
func (w *Watermarks) PartitionApplied(modality, partition string) (uint64, bool) {
	pm, ok := w.vals[modality]
	if !ok {
		return 0, false
	}
	v, ok := pm[partition]
	return v, ok
}
