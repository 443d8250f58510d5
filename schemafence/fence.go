package schemafence

import (
	"fmt"
	"sort"

	"github.com/searchfabric/sfemu/internal/invariants"
)

// RegressionError reports a timestamp that went backwards. Every ordering
// core in this package turns a regression into this error instead of
// clamping it: a silent clamp would hide lost or reordered data.
type RegressionError struct {
	// What names the kind of value ("table resolved ts", "ddl cursor",
	// "applied_ts", ...).
	What string
	// Name identifies the instance (table id, partition, modality, ...).
	Name string
	Old  uint64
	New  uint64
}

func (e *RegressionError) Error() string {
	return fmt.Sprintf("schemafence: %s of %s regressed: old=%d new=%d", e.What, e.Name, e.Old, e.New)
}

// UnknownTableError reports a table id that is not part of the set.
type UnknownTableError struct {
	TableID int64
	Known   []int64
}

func (e *UnknownTableError) Error() string {
	return fmt.Sprintf("schemafence: table %d is not in the fence table set %v", e.TableID, e.Known)
}

// Fence is the DDL fence over the followed table set: the minimum resolved ts
// over every configured table. It is undefined until every table has
// reported its first resolved ts, so a DDL can never overtake a table whose
// progress is still unknown (specs/minicdc.md, DDL fence).
//
// Fence is not safe for concurrent use; its owner serializes calls.
type Fence struct {
	ids      []int64 // sorted, for error messages
	slot     []int64 // slot[i] is the id whose state is at ts[i]
	index    map[int64]int
	ts       []uint64
	reported []bool
	missing  int
	// min caches the current fence value when missing == 0; it is only
	// recomputed when the table holding the minimum advances.
	min uint64
}

// NewFence builds a fence over tableIDs. The set must be duplicate-free;
// an empty one is unbounded until a table joins (M53). Add and Remove
// change it later (M50-M53).
func NewFence(tableIDs []int64) (*Fence, error) {
	f := &Fence{
		min:      Unbounded, // an empty start set holds nothing back (M53)
		ids:      append([]int64(nil), tableIDs...),
		slot:     append([]int64(nil), tableIDs...),
		index:    make(map[int64]int, len(tableIDs)),
		ts:       make([]uint64, len(tableIDs)),
		reported: make([]bool, len(tableIDs)),
		missing:  len(tableIDs),
	}
	for i, id := range tableIDs {
		if _, dup := f.index[id]; dup {
			return nil, fmt.Errorf("schemafence: duplicate table id %d in fence table set", id)
		}
		f.index[id] = i
	}
	sort.Slice(f.ids, func(a, b int) bool { return f.ids[a] < f.ids[b] })
	return f, nil
}

// Advance records that every change of tableID with commit_ts <=
// resolvedTs has been delivered. Repeating the current value is a no-op; a
// smaller value is a *RegressionError and an id outside the set an
// *UnknownTableError. On error the fence is unchanged.
func (f *Fence) Advance(tableID int64, resolvedTs uint64) error {
	if invariants.Enabled {
		defer f.checkInvariants()
	}
	i, ok := f.index[tableID]
	if !ok {
		return &UnknownTableError{TableID: tableID, Known: f.ids}
	}
	if f.reported[i] {
		old := f.ts[i]
		if resolvedTs < old {
			return &RegressionError{What: "table resolved ts", Name: fmt.Sprintf("table %d", tableID), Old: old, New: resolvedTs}
		}
		f.ts[i] = resolvedTs
		if f.missing == 0 && old == f.min {
			f.recompute()
		}
		return nil
	}
	f.reported[i] = true
	f.ts[i] = resolvedTs
	f.missing--
	if f.missing == 0 {
		f.recompute()
	}
	return nil
}

func (f *Fence) recompute() {
	m := Unbounded // an empty set holds nothing back (M53)
	for _, v := range f.ts {
		if v < m {
			m = v
		}
	}
	f.min = m
}

// Value returns the fence (min resolved ts over all tables). ok is false
// until every table has reported at least once.
func (f *Fence) Value() (ts uint64, ok bool) {
	if f.missing > 0 {
		return 0, false
	}
	return f.min, true
}

// Table returns the last resolved ts reported for tableID; ok is false when
// the table has not reported or is not in the set.
func (f *Fence) Table(tableID int64) (ts uint64, ok bool) {
	i, known := f.index[tableID]
	if !known || !f.reported[i] {
		return 0, false
	}
	return f.ts[i], true
}

// Missing returns the table ids that have not reported yet, sorted.
func (f *Fence) Missing() []int64 {
	var out []int64
	for _, id := range f.ids {
		if !f.reported[f.index[id]] {
			out = append(out, id)
		}
	}
	return out
}
