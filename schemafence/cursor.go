package schemafence

import "fmt"

// CursorPlan is the outcome of applying the no-skip cursor rule to one
// fetched DDL batch.
type CursorPlan struct {
	// Emit is how many leading events of the batch may be emitted now, in
	// order. The rest must be fetched again later.
	Emit int
	// Cursor is the cursor after emitting those events.
	Cursor uint64
	// AdoptedNext reports that the fetch's `next` became the cursor (the
	// whole batch was emitted and next <= fence).
	AdoptedNext bool
}

// OrderingError reports a fetched DDL batch that breaks the fetch contract
// (events strictly after the cursor, strictly increasing, next not behind
// the last event). The runtime treats it as fatal.
type OrderingError struct {
	Index  int // event index in the batch, -1 for `next`
	Ts     uint64
	Bound  uint64
	Reason string
}

func (e *OrderingError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("schemafence: ddl batch next=%d %s (bound %d)", e.Ts, e.Reason, e.Bound)
	}
	return fmt.Sprintf("schemafence: ddl batch event[%d] FinishedTs=%d %s (bound %d)", e.Index, e.Ts, e.Reason, e.Bound)
}

// PlanCursor applies the DDL cursor no-skip rule (specs/minicdc.md) to a
// batch fetched from cursor: finished holds each event's FinishedTs in
// fetch order, next is the fetch's resume point and fence/fenceOK the
// current DDL fence.
//
//   - Events are emitted in order while FinishedTs <= fence; emission stops
//     at the first event above the fence (later events wait, even if they
//     would pass: order is preserved).
//   - Each emitted event moves the cursor to its FinishedTs.
//   - The cursor moves to next only when every event was emitted and
//     next <= fence; otherwise it stays at the last emitted FinishedTs, so
//     nothing between it and next is skipped.
//   - With an undefined fence nothing is emitted and the cursor stays.
//
// The fetch contract is checked, never repaired: every FinishedTs must be
// > cursor and strictly increasing, and next must be >= cursor and >= the
// last FinishedTs of the batch; a violation returns an *OrderingError.
func PlanCursor(cursor uint64, finished []uint64, next uint64, fence uint64, fenceOK bool) (CursorPlan, error) {
	prev := cursor
	for i, ts := range finished {
		if ts <= prev {
			bound := prev
			reason := "is not after the previous event"
			if i == 0 {
				reason = "is not after the cursor"
			}
			return CursorPlan{Cursor: cursor}, &OrderingError{Index: i, Ts: ts, Bound: bound, Reason: reason}
		}
		prev = ts
	}
	if next < prev {
		return CursorPlan{Cursor: cursor}, &OrderingError{Index: -1, Ts: next, Bound: prev, Reason: "is behind the cursor or the batch's last event"}
	}
	plan := CursorPlan{Cursor: cursor}
	if !fenceOK {
		return plan, nil
	}
	for _, ts := range finished {
		if ts > fence {
			return plan, nil
		}
		plan.Emit++
		plan.Cursor = ts
	}
	if next <= fence {
		plan.Cursor = next
		plan.AdoptedNext = true
	}
	return plan, nil
}

// Cursor is a DDL cursor that only moves forward. It wraps PlanCursor so
// the caller cannot forget to store the result or move it backwards.
type Cursor struct {
	ts uint64
}

// NewCursor starts a cursor at ts (exclusive: events with FinishedTs > ts
// are still to come).
func NewCursor(ts uint64) *Cursor { return &Cursor{ts: ts} }

// Ts returns the current cursor.
func (c *Cursor) Ts() uint64 { return c.ts }

// Apply plans the batch against the current cursor and commits the new
// cursor. It returns the number of leading events to emit.
func (c *Cursor) Apply(finished []uint64, next uint64, fence uint64, fenceOK bool) (CursorPlan, error) {
	p, err := PlanCursor(c.ts, finished, next, fence, fenceOK)
	if err != nil {
		return p, err
	}
	if p.Cursor < c.ts { // cannot happen through PlanCursor; guarded so it never goes silent
		return p, &RegressionError{What: "ddl cursor", Name: "trigger ddl", Old: c.ts, New: p.Cursor}
	}
	c.ts = p.Cursor
	return p, nil
}
