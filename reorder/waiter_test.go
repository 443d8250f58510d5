// Tests for bounded backpressure and terminal overflow
// (specs/normalization.md N13).
package reorder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// manualTimer fires only when the test says so.
type manualTimer struct {
	ch     chan time.Time
	armed  chan time.Duration
	called int
}

func newManualTimer() *manualTimer {
	return &manualTimer{ch: make(chan time.Time, 1), armed: make(chan time.Duration, 16)}
}

func (m *manualTimer) After(d time.Duration) <-chan time.Time {
	m.called++
	m.armed <- d
	return m.ch
}

func newWaiter(t *testing.T, rows int, tm Timer, window time.Duration) *Waiter[int] {
	t.Helper()
	w, err := NewWaiter[int](Config{Partition: "keyspace:1/table:7", MaxUnsealedRows: rows, MaxUnsealedBytes: 1 << 20}, tm, window)
	require.NoError(t, err)
	return w
}

func TestWaiterOverflowAfterWindow(t *testing.T) {
	tm := newManualTimer()
	w := newWaiter(t, 2, tm, 250*time.Millisecond)
	ctx := context.Background()
	require.NoError(t, w.Add(ctx, 1, 1, 1))
	require.NoError(t, w.Add(ctx, 2, 1, 2))
	done := make(chan error, 1)
	go func() { done <- w.Add(ctx, 3, 1, 3) }()
	require.Equal(t, 250*time.Millisecond, <-tm.armed, "waits exactly the configured window")
	select {
	case err := <-done:
		t.Fatalf("Add returned before the window expired: %v", err)
	default:
	}
	tm.ch <- time.Time{}
	err := <-done
	var oe *OverflowError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "keyspace:1/table:7", oe.Partition)
	require.Equal(t, BoundRows, oe.Bound)
	require.Equal(t, int64(2), oe.Limit)
	require.Equal(t, 2, oe.UnsealedRows)
	require.Equal(t, 250*time.Millisecond, oe.Waited)
	require.Contains(t, err.Error(), "max_unsealed_rows=2")
	// Nothing was emitted and nothing dropped.
	require.NoError(t, w.Do(func(b *Buffer[int]) error {
		require.Equal(t, 0, b.Sealed())
		require.Equal(t, 2, b.Len())
		return nil
	}))
}

func TestWaiterSealDuringWindowAdmitsRow(t *testing.T) {
	tm := newManualTimer()
	w := newWaiter(t, 1, tm, time.Second)
	ctx := context.Background()
	require.NoError(t, w.Add(ctx, 10, 1, 10))
	done := make(chan error, 1)
	go func() { done <- w.Add(ctx, 20, 1, 20) }()
	<-tm.armed // the adder is now waiting
	got, err := w.SealCheckpoint(10, nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, <-done)
	got, err = w.SealDDL(20, nil)
	require.NoError(t, err)
	require.Equal(t, 20, got[0].Value)
}

func TestWaiterRowNeverFitsFailsAtOnce(t *testing.T) {
	tm := newManualTimer()
	w, err := NewWaiter[int](Config{Partition: "p", MaxUnsealedRows: 5, MaxUnsealedBytes: 8}, tm, time.Second)
	require.NoError(t, err)
	var oe *OverflowError
	require.ErrorAs(t, w.Add(context.Background(), 1, 9, 0), &oe)
	require.Equal(t, BoundBytes, oe.Bound)
	require.Equal(t, 0, tm.called, "no wait for a row that can never fit")
}

func TestWaiterContextCancel(t *testing.T) {
	tm := newManualTimer()
	w := newWaiter(t, 1, tm, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, w.Add(ctx, 1, 1, 1))
	done := make(chan error, 1)
	go func() { done <- w.Add(ctx, 2, 1, 2) }()
	<-tm.armed
	cancel()
	require.True(t, errors.Is(<-done, context.Canceled))
}

func TestWaiterZeroWindowAndLateRow(t *testing.T) {
	tm := newManualTimer()
	w := newWaiter(t, 1, tm, 0)
	ctx := context.Background()
	require.NoError(t, w.Add(ctx, 5, 1, 5))
	var oe *OverflowError
	require.ErrorAs(t, w.Add(ctx, 6, 1, 6), &oe)
	_, err := w.SealCheckpoint(6, nil)
	require.NoError(t, err)
	var le *LateRowError
	require.ErrorAs(t, w.Add(ctx, 6, 1, 6), &le)
	_, err = NewWaiter[int](Config{Partition: "p", MaxUnsealedRows: 1, MaxUnsealedBytes: 1}, nil, time.Second)
	require.Error(t, err)
}

// TestWaiterSealWithoutWaitersAllocatesNothing: the wake-up channel is
// only replaced when an adder is blocked on it.
func TestWaiterSealWithoutWaitersAllocatesNothing(t *testing.T) {
	w := newWaiter(t, 1000, newManualTimer(), time.Second)
	dst := make([]Item[int], 0, 16)
	ts := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		ts++
		_ = w.Add(context.Background(), ts, 1, 1)
		dst, _ = w.SealCheckpoint(ts, dst[:0])
	})
	require.Zero(t, allocs)
}
