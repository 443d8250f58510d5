// Package memquota is a byte budget shared by goroutines: the adapter's one
// memory quota (reorder buffers of every partition, the log puller's
// matcher) and, as a second instance, the disk quota of spill files.
package memquota

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Quota is a limit in bytes and the bytes currently charged against it.
// It is safe for concurrent use; a nil *Quota is unlimited and counts
// nothing.
type Quota struct {
	name  string
	limit int64
	// reserve is the top of the limit only TryAcquireReserved may take:
	// the in-memory indexes of spilled runs, which must exist to read a
	// run back, so they are not starved by the holders that spill.
	reserve atomic.Int64
	used    atomic.Int64
	peak    atomic.Int64
}

// Unlimited is the limit of a quota that never refuses.
const Unlimited = math.MaxInt64

// New returns a quota of limit bytes (> 0). name says what it bounds in
// errors and metrics, e.g. "memory-quota".
func New(name string, limit int64) (*Quota, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memquota: %s = %d bytes, must be > 0", name, limit)
	}
	return &Quota{name: name, limit: limit}, nil
}

// Name is the quota's name.
func (q *Quota) Name() string {
	if q == nil {
		return ""
	}
	return q.name
}

// Limit is the quota in bytes (Unlimited for a nil quota).
func (q *Quota) Limit() int64 {
	if q == nil {
		return Unlimited
	}
	return q.limit
}

// Used is the bytes charged now.
func (q *Quota) Used() int64 {
	if q == nil {
		return 0
	}
	return q.used.Load()
}

// Peak is the most bytes ever charged at once.
func (q *Quota) Peak() int64 {
	if q == nil {
		return 0
	}
	return q.peak.Load()
}

// SetReserve keeps the top n bytes of the limit (0 <= n <= limit) for
// TryAcquireReserved: TryAcquire admits up to limit - n.
func (q *Quota) SetReserve(n int64) {
	if q == nil {
		return
	}
	q.reserve.Store(min(max(n, 0), q.limit))
}

// Reserve is the part of the limit kept for TryAcquireReserved.
func (q *Quota) Reserve() int64 {
	if q == nil {
		return 0
	}
	return q.reserve.Load()
}

// TryAcquire charges n bytes when they fit under the limit less the
// reserve and reports whether it did. n <= 0 always succeeds.
func (q *Quota) TryAcquire(n int64) bool {
	if q == nil {
		return true
	}
	return q.tryAcquire(n, q.limit-q.reserve.Load())
}

// TryAcquireReserved is TryAcquire that may also take the reserve.
func (q *Quota) TryAcquireReserved(n int64) bool {
	if q == nil {
		return true
	}
	return q.tryAcquire(n, q.limit)
}

func (q *Quota) tryAcquire(n, limit int64) bool {
	if n <= 0 {
		return true
	}
	for {
		cur := q.used.Load()
		if cur+n > limit || cur+n < cur {
			return false
		}
		if q.used.CompareAndSwap(cur, cur+n) {
			q.notePeak(cur + n)
			return true
		}
	}
}

// Force charges n bytes even past the limit: for memory that is already
// held and must be counted (a row read back from disk), never to admit
// new work.
func (q *Quota) Force(n int64) {
	if q == nil || n <= 0 {
		return
	}
	q.notePeak(q.used.Add(n))
}

// Release returns n bytes charged earlier.
func (q *Quota) Release(n int64) {
	if q == nil || n <= 0 {
		return
	}
	q.used.Add(-n)
}

func (q *Quota) notePeak(v int64) {
	for {
		p := q.peak.Load()
		if v <= p || q.peak.CompareAndSwap(p, v) {
			return
		}
	}
}
