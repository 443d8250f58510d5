// Tests for the DDL fence (specs/minicdc.md M29), the no-skip cursor
// (M31, M32) and the same-ts rule (M30).
package schemafence

import (
	"errors"
	"flag"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomized tests (0 = time based)")

func testSeed(t *testing.T) int64 {
	s := *seedFlag
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed=%d (rerun with -seed=%d)", s, s)
	return s
}

// M53: an empty start set is defined and unbounded at once; a table that
// joins bounds it.
func TestM53_NewFenceEmptyIsUnbounded(t *testing.T) {
	f, err := NewFence(nil)
	require.NoError(t, err)
	v, ok := f.Value()
	require.True(t, ok)
	require.Equal(t, Unbounded, v)
	require.NoError(t, f.Add(7, 40, 30))
	v, ok = f.Value()
	require.True(t, ok)
	require.Equal(t, uint64(40), v)
}

func TestNewFenceRejectsDuplicates(t *testing.T) {
	_, err := NewFence([]int64{5, 7, 5})
	require.ErrorContains(t, err, "duplicate table id 5")
}

func TestFenceUndefinedUntilEveryTableReports(t *testing.T) {
	f, err := NewFence([]int64{10, 20, 30})
	require.NoError(t, err)
	_, ok := f.Value()
	require.False(t, ok)
	require.NoError(t, f.Advance(10, 100))
	require.NoError(t, f.Advance(30, 50))
	_, ok = f.Value()
	require.False(t, ok, "table 20 has not reported")
	require.Equal(t, []int64{20}, f.Missing())
	require.NoError(t, f.Advance(20, 70))
	v, ok := f.Value()
	require.True(t, ok)
	require.Equal(t, uint64(50), v)
}

func TestFenceIsMinOfTables(t *testing.T) {
	f, _ := NewFence([]int64{1, 2})
	require.NoError(t, f.Advance(1, 10))
	require.NoError(t, f.Advance(2, 20))
	v, _ := f.Value()
	require.Equal(t, uint64(10), v)
	require.NoError(t, f.Advance(1, 30)) // min moves to table 2
	v, _ = f.Value()
	require.Equal(t, uint64(20), v)
	require.NoError(t, f.Advance(2, 25))
	v, _ = f.Value()
	require.Equal(t, uint64(25), v)
	require.NoError(t, f.Advance(2, 25)) // equal is a no-op
	ts, ok := f.Table(2)
	require.True(t, ok)
	require.Equal(t, uint64(25), ts)
}

func TestFenceRegressionAndUnknownTable(t *testing.T) {
	f, _ := NewFence([]int64{1, 2})
	require.NoError(t, f.Advance(1, 10))
	err := f.Advance(1, 9)
	var re *RegressionError
	require.ErrorAs(t, err, &re)
	require.Equal(t, uint64(10), re.Old)
	require.Equal(t, uint64(9), re.New)
	require.Contains(t, err.Error(), "table 1")
	ts, _ := f.Table(1)
	require.Equal(t, uint64(10), ts, "regression must not change state")

	err = f.Advance(3, 10)
	var ue *UnknownTableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, int64(3), ue.TableID)
}

// TestFenceRandomAgainstModel checks the cached minimum against a full scan.
func TestFenceRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	ids := []int64{3, 1, 4, 15, 9, 2, 6}
	f, _ := NewFence(ids)
	model := map[int64]uint64{}
	for step := 0; step < 5000; step++ {
		id := ids[rng.Intn(len(ids))]
		ts := model[id] + uint64(rng.Intn(5))
		require.NoError(t, f.Advance(id, ts), "step %d", step)
		model[id] = ts
		v, ok := f.Value()
		if len(model) < len(ids) {
			require.False(t, ok, "step %d", step)
			continue
		}
		var want uint64 = ^uint64(0)
		for _, x := range model {
			want = min(want, x)
		}
		require.True(t, ok)
		require.Equal(t, want, v, "step %d", step)
	}
}

func TestPlanCursorNoFenceEmitsNothing(t *testing.T) {
	p, err := PlanCursor(100, []uint64{110, 120}, 130, 0, false)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 0, Cursor: 100}, p)
}

func TestPlanCursorBatchCrossingFenceDoesNotSkip(t *testing.T) {
	// Fence at 115: only the first event may go, the cursor stays on it
	// and next=130 is NOT adopted (event 120 must be fetched again).
	p, err := PlanCursor(100, []uint64{110, 120}, 130, 115, true)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 1, Cursor: 110}, p)

	// Fence below the first event: nothing emitted, cursor kept.
	p, err = PlanCursor(100, []uint64{110, 120}, 130, 105, true)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 0, Cursor: 100}, p)
}

func TestPlanCursorAdoptsNextOnlyWhenAllowed(t *testing.T) {
	// Whole batch emitted, next <= fence: adopt next.
	p, err := PlanCursor(100, []uint64{110, 120}, 130, 130, true)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 2, Cursor: 130, AdoptedNext: true}, p)

	// Whole batch emitted but next > fence: stay at last event.
	p, err = PlanCursor(100, []uint64{110, 120}, 140, 130, true)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 2, Cursor: 120}, p)

	// Empty batch: next adopted iff next <= fence.
	p, err = PlanCursor(100, nil, 150, 200, true)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 0, Cursor: 150, AdoptedNext: true}, p)
	p, err = PlanCursor(100, nil, 250, 200, true)
	require.NoError(t, err)
	require.Equal(t, CursorPlan{Emit: 0, Cursor: 100}, p)
}

func TestPlanCursorOrderingErrors(t *testing.T) {
	cases := []struct {
		name     string
		cursor   uint64
		finished []uint64
		next     uint64
		index    int
	}{
		{"event at cursor", 100, []uint64{100}, 120, 0},
		{"event before cursor", 100, []uint64{90}, 120, 0},
		{"not increasing", 100, []uint64{110, 110}, 120, 1},
		{"next behind last event", 100, []uint64{110, 120}, 115, -1},
		{"next behind cursor", 100, nil, 99, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := PlanCursor(c.cursor, c.finished, c.next, 1000, true)
			var oe *OrderingError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, c.index, oe.Index)
			require.Equal(t, c.cursor, p.Cursor)
			require.Equal(t, 0, p.Emit)
		})
	}
}

func TestCursorApplyNeverMovesBackAndNeverSkips(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	// A DDL history; the "fetch" returns up to 3 events after the cursor.
	var history []uint64
	ts := uint64(10)
	for i := 0; i < 200; i++ {
		ts += uint64(1 + rng.Intn(10))
		history = append(history, ts)
	}
	c := NewCursor(0)
	var fence uint64
	var emitted []uint64
	for guard := 0; guard < 10000 && len(emitted) < len(history); guard++ {
		fence += uint64(rng.Intn(8))
		var batch []uint64
		for _, h := range history {
			if h > c.Ts() && len(batch) < 3 {
				batch = append(batch, h)
			}
		}
		next := c.Ts()
		if len(batch) > 0 {
			next = batch[len(batch)-1]
		}
		// next may run ahead of the batch but never past an unfetched event.
		nextBound := ^uint64(0)
		for _, h := range history {
			if h > next {
				nextBound = h - 1
				break
			}
		}
		if nextBound > next {
			next += uint64(rng.Int63n(int64(min(nextBound-next, 20)) + 1))
		}
		before := c.Ts()
		p, err := c.Apply(batch, next, fence, true)
		require.NoError(t, err)
		require.GreaterOrEqual(t, c.Ts(), before)
		emitted = append(emitted, batch[:p.Emit]...)
		for _, e := range batch[:p.Emit] {
			require.LessOrEqual(t, e, fence)
		}
	}
	require.Equal(t, history, emitted, "every DDL emitted exactly once, in order")
}

func TestSameTs(t *testing.T) {
	require.True(t, DDLReleasable(100, 100), "DML at ts flushed: DDL at ts may go")
	require.False(t, DDLReleasable(100, 99), "DML at ts may still arrive")

	g := NewSameTsGuard()
	require.NoError(t, g.CheckDML(1, 100))
	require.NoError(t, g.DDLReleased(1, 100))
	var v *SameTsViolation
	require.ErrorAs(t, g.CheckDML(1, 100), &v)
	require.Equal(t, uint64(100), v.DDLTs)
	require.ErrorAs(t, g.CheckDML(1, 50), &v)
	require.NoError(t, g.CheckDML(1, 101))
	require.NoError(t, g.CheckDML(2, 50), "other table not affected")
	var re *RegressionError
	require.True(t, errors.As(g.DDLReleased(1, 99), &re))
}
