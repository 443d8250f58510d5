package httpapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_700_000_000, 0)

func sampleAt(sec int, rows uint64) Sample {
	return Sample{At: t0.Add(time.Duration(sec) * time.Second), Rows: rows, SafeLag: map[string]float64{"c": float64(sec)}}
}

// H16: the plot's ring keeps a fixed number of samples, in time order, and
// turns them into rates over the window.
func TestRingRatesAndWindow(t *testing.T) {
	r := NewRing(4)
	require.Empty(t, r.Points(t0, time.Minute), "empty ring")
	r.Add(sampleAt(0, 0))
	require.Empty(t, r.Points(t0, time.Minute), "one sample has no rate")
	r.Add(sampleAt(1, 100))
	r.Add(sampleAt(3, 500))
	pts := r.Points(t0.Add(3*time.Second), time.Minute)
	require.Len(t, pts, 2)
	require.Equal(t, t0.Add(time.Second).UnixMilli(), pts[0].T)
	require.InDelta(t, 100, pts[0].RowsPerSec, 1e-9)
	require.InDelta(t, 200, pts[1].RowsPerSec, 1e-9, "400 rows over 2 s")
	require.Equal(t, 3.0, pts[1].SafeLag["c"])

	// Full: the oldest sample goes, the length stays at the capacity.
	r.Add(sampleAt(4, 600))
	r.Add(sampleAt(5, 700))
	require.Equal(t, 4, r.Len())
	pts = r.Points(t0.Add(5*time.Second), time.Minute)
	require.Len(t, pts, 3, "4 samples give 3 rates")
	require.Equal(t, t0.Add(3*time.Second).UnixMilli(), pts[0].T)

	// The window cuts older points; points after now are not shown.
	pts = r.Points(t0.Add(5*time.Second), 1500*time.Millisecond)
	require.Len(t, pts, 2)
	require.Equal(t, t0.Add(4*time.Second).UnixMilli(), pts[0].T)
	require.Len(t, r.Points(t0.Add(4*time.Second), time.Minute), 2)
}

// A counter restart (the adapter restarted) counts from zero, and an
// out-of-order sample is ignored.
func TestRingCounterRestartAndOrder(t *testing.T) {
	r := NewRing(10)
	r.Add(sampleAt(0, 1000))
	r.Add(sampleAt(2, 40))
	r.Add(sampleAt(1, 5000)) // older than the newest: ignored
	pts := r.Points(t0.Add(2*time.Second), time.Minute)
	require.Len(t, pts, 1)
	require.InDelta(t, 20, pts[0].RowsPerSec, 1e-9)
	require.Equal(t, 2, r.Len())
	small := NewRing(0)
	for i := 0; i < 3; i++ {
		small.Add(sampleAt(i, 0))
	}
	require.Equal(t, 2, small.Len(), "capacity is at least 2")
}

// A long run wraps the ring many times; it keeps exactly the last samples.
func TestRingWrapsMany(t *testing.T) {
	r := NewRing(900)
	for i := 0; i < 10_000; i++ {
		r.Add(sampleAt(i, uint64(i*10)))
	}
	require.Equal(t, 900, r.Len())
	now := t0.Add(9_999 * time.Second)
	pts := r.Points(now, 15*time.Minute)
	require.Len(t, pts, 899)
	for _, p := range pts {
		require.InDelta(t, 10, p.RowsPerSec, 1e-9)
	}
	require.Equal(t, now.UnixMilli(), pts[len(pts)-1].T)
}
