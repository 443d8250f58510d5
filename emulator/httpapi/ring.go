package httpapi

import "time"

// Sample is one point of the status page's live plot: the cumulative rows
// ingested and each collection's safe_ts lag at a moment.
type Sample struct {
	At time.Time
	// Rows is the cumulative count of ingested mutations. A smaller value
	// than the previous sample's means the counter restarted.
	Rows uint64
	// SafeLag is each collection's safe_ts lag behind the upstream, in
	// seconds.
	SafeLag map[string]float64
}

// Point is a plotted sample: the ingest rate over the interval that ends at
// T, and the lags at T.
type Point struct {
	T          int64              `json:"t"` // Unix milliseconds
	RowsPerSec float64            `json:"rows_per_sec"`
	SafeLag    map[string]float64 `json:"safe_lag_seconds"`
}

// Ring keeps the last samples in a fixed-size buffer (no growth however
// long the process runs). It is pure: callers pass the time, and it does no
// locking (the sampler serialises access).
type Ring struct {
	buf  []Sample
	head int // index of the oldest sample
	n    int
}

// NewRing returns a ring of capacity samples (at least 2: a rate needs two).
func NewRing(capacity int) *Ring {
	return &Ring{buf: make([]Sample, max(capacity, 2))}
}

// Add appends s, dropping the oldest sample when the ring is full. A sample
// older than the newest one is ignored, so the ring stays in time order.
func (r *Ring) Add(s Sample) {
	if r.n > 0 && s.At.Before(r.at(r.n-1).At) {
		return
	}
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.head] = s
	r.head = (r.head + 1) % len(r.buf)
}

// Len is the number of samples held.
func (r *Ring) Len() int { return r.n }

func (r *Ring) at(i int) *Sample { return &r.buf[(r.head+i)%len(r.buf)] }

// Points are the samples of the window (now-window, now], oldest first, each
// with the rate since the sample before it. The first sample held has no
// predecessor and is not plotted; after a counter restart the rate counts
// from zero.
func (r *Ring) Points(now time.Time, window time.Duration) []Point {
	from := now.Add(-window)
	var out []Point
	for i := 1; i < r.n; i++ {
		prev, cur := r.at(i-1), r.at(i)
		if !cur.At.After(from) || cur.At.After(now) {
			continue
		}
		dt := cur.At.Sub(prev.At).Seconds()
		rate := 0.0
		if dt > 0 {
			rows := cur.Rows
			if rows >= prev.Rows {
				rows -= prev.Rows
			}
			rate = float64(rows) / dt
		}
		out = append(out, Point{T: cur.At.UnixMilli(), RowsPerSec: rate, SafeLag: cur.SafeLag})
	}
	return out
}
