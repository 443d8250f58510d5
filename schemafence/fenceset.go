package schemafence

import (
	"fmt"
	"math"
	"sort"

	"github.com/searchfabric/sfemu/internal/invariants"
)

// The fence over a changing table set (specs/minicdc.md M50-M53). TiCDC's
// rule for a table span created while a changefeed runs is the reference:
// the span starts at the ts of the DDL that created it (or the ts it was
// added at), and from then on the barrier for later DDLs is the minimum
// over every span, the new one included. A span removed stops holding the
// barrier back.

// Unbounded is the fence of an empty table set (M53): no table holds a DDL
// back, only the DDL stream's own resolved ts does.
const Unbounded = uint64(math.MaxUint64)

// AddBelowFloorError reports a table added at a ts below the floor: an
// emitted DDL or a published checkpoint is already past it, so rows of the
// table between its start and the floor could land after them (M51).
type AddBelowFloorError struct {
	TableID int64
	Ts      uint64
	Floor   uint64
}

func (e *AddBelowFloorError) Error() string {
	return fmt.Sprintf("schemafence: table %d cannot join the fence at %d: below the floor %d (an emitted DDL or a published checkpoint is past it)", e.TableID, e.Ts, e.Floor)
}

// Add puts tableID into the set with resolved ts ts, as if it had reported
// ts already (M50): nothing of it at or below its start is delivered, and
// a later DDL waits for it. floor is the lowest start the caller allows:
// the last emitted DDL's FinishedTs and the last published checkpoint
// (M51). The fence may fall to ts, never below floor. A duplicate id is
// an error; on error the fence is unchanged.
func (f *Fence) Add(tableID int64, ts, floor uint64) error {
	if invariants.Enabled {
		defer f.checkInvariants()
	}
	if tableID <= 0 {
		return fmt.Errorf("schemafence: table id %d must be > 0", tableID)
	}
	if _, dup := f.index[tableID]; dup {
		return fmt.Errorf("schemafence: table %d is already in the fence table set %v", tableID, f.ids)
	}
	if ts < floor {
		return &AddBelowFloorError{TableID: tableID, Ts: ts, Floor: floor}
	}
	f.index[tableID] = len(f.ts)
	f.ts = append(f.ts, ts)
	f.reported = append(f.reported, true)
	f.slot = append(f.slot, tableID)
	f.ids = append(f.ids, tableID)
	sort.Slice(f.ids, func(a, b int) bool { return f.ids[a] < f.ids[b] })
	if f.missing == 0 {
		f.recompute()
	}
	return nil
}

// Remove takes tableID out of the set (M52): it no longer holds DDLs
// back, so the fence can only rise. An unknown id is an
// *UnknownTableError; on error the fence is unchanged.
func (f *Fence) Remove(tableID int64) error {
	if invariants.Enabled {
		defer f.checkInvariants()
	}
	i, ok := f.index[tableID]
	if !ok {
		return &UnknownTableError{TableID: tableID, Known: f.ids}
	}
	if !f.reported[i] {
		f.missing--
	}
	last := len(f.ts) - 1
	if i != last { // move the last table into the hole
		moved := f.slot[last]
		f.ts[i], f.reported[i], f.slot[i] = f.ts[last], f.reported[last], moved
		f.index[moved] = i
	}
	f.ts, f.reported, f.slot = f.ts[:last], f.reported[:last], f.slot[:last]
	delete(f.index, tableID)
	j := sort.Search(len(f.ids), func(k int) bool { return f.ids[k] >= tableID })
	f.ids = append(f.ids[:j], f.ids[j+1:]...)
	if f.missing == 0 {
		f.recompute()
	}
	return nil
}

// Tables returns the ids in the set, sorted.
func (f *Fence) Tables() []int64 { return append([]int64(nil), f.ids...) }
