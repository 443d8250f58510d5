// Package tso hands out TiDB/PD-style timestamps: physical milliseconds
// shifted left by 18 bits, OR-ed with an 18-bit logical counter. The
// physical part comes from a Clock the caller chooses: a VirtualClock that a
// test steps explicitly (deterministic runs) or the wall clock (demo).
package tso

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// LogicalBits is the number of low bits holding the logical counter.
const LogicalBits = 18

const maxLogical = 1 << LogicalBits

// Compose builds a timestamp from physical milliseconds and a logical count.
func Compose(physicalMs int64, logical int64) uint64 {
	return uint64(physicalMs)<<LogicalBits | uint64(logical)
}

// Physical returns the millisecond part of ts.
func Physical(ts uint64) int64 { return int64(ts >> LogicalBits) }

// Logical returns the counter part of ts.
func Logical(ts uint64) int64 { return int64(ts & (maxLogical - 1)) }

// Clock reports the current physical time in Unix milliseconds.
type Clock interface {
	NowMs() int64
}

// VirtualClock is a Clock that only moves when told to. The zero value
// starts at 0 ms; use NewVirtualClock for a realistic epoch.
type VirtualClock struct {
	mu sync.Mutex
	ms int64
}

// NewVirtualClock starts a virtual clock at startMs.
func NewVirtualClock(startMs int64) *VirtualClock { return &VirtualClock{ms: startMs} }

// NowMs implements Clock.
func (c *VirtualClock) NowMs() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ms
}

// Advance moves the clock forward by d (negative d is ignored: a clock that
// goes back would let PD hand out a timestamp twice).
func (c *VirtualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.ms += d.Milliseconds()
	c.mu.Unlock()
}

// Set moves the clock to ms if that is later than now.
func (c *VirtualClock) Set(ms int64) {
	c.mu.Lock()
	if ms > c.ms {
		c.ms = ms
	}
	c.mu.Unlock()
}

// WallClock reads the real time; it is the edge used by the demo driver.
type WallClock struct{}

// NowMs implements Clock.
func (WallClock) NowMs() int64 { return time.Now().UnixMilli() }

// Oracle allocates strictly increasing timestamps. It is safe for
// concurrent use.
type Oracle struct {
	mu       sync.Mutex
	clock    Clock
	physical int64
	logical  int64
	// Persistent window (SetWindow): every ts handed out is <= limit,
	// and limit is saved before a ts above it is handed out.
	save     func(limit uint64) error
	limit    uint64
	windowMs int64
	err      error
}

// DefaultWindowMs is how far ahead of the clock a persistent oracle saves
// its high-water mark (PD saves a 3 s window in etcd).
const DefaultWindowMs = 3000

// ErrWindow wraps a failure to persist the timestamp window.
type ErrWindow struct{ Err error }

func (e *ErrWindow) Error() string {
	return "tso: cannot persist the timestamp window, refusing to hand out timestamps: " + e.Err.Error()
}

func (e *ErrWindow) Unwrap() error { return e.Err }

// SetWindow makes the oracle durable across restarts, as PD's TSO: persisted
// is the high-water mark saved by the previous run (0: none); every later
// timestamp exceeds it, whatever the clock says (a clock stepped back after
// a restart cannot make the oracle repeat a ts). Before handing out a ts
// above the current mark the oracle calls save with a new mark windowMs
// (<= 0: DefaultWindowMs) ahead, and hands the ts out only if save
// succeeded. A failed save is sticky: Next returns 0 (never a valid ts)
// from then on and CurrentTs and Err return the error.
func (o *Oracle) SetWindow(persisted uint64, windowMs int64, save func(limit uint64) error) {
	if windowMs <= 0 {
		windowMs = DefaultWindowMs
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.observeLocked(persisted)
	o.save, o.limit, o.windowMs = save, persisted, windowMs
}

// Err is the sticky window-save error (nil when none).
func (o *Oracle) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Limit is the persisted high-water mark (0 without SetWindow).
func (o *Oracle) Limit() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.limit
}

// NewOracle returns an oracle reading physical time from clock.
func NewOracle(clock Clock) *Oracle { return &Oracle{clock: clock} }

// Next allocates a new timestamp, strictly greater than every timestamp
// handed out or observed before. When the clock does not move, the logical
// part counts up; when it would overflow, the physical part is pushed one
// millisecond ahead of the clock, as PD does when it runs out of logicals.
func (o *Oracle) Next() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0
	}
	now := o.clock.NowMs()
	if now > o.physical {
		o.physical, o.logical = now, 0
	} else {
		o.logical++
		if o.logical >= maxLogical {
			o.physical++
			o.logical = 0
		}
	}
	ts := Compose(o.physical, o.logical)
	if o.save != nil && ts > o.limit {
		limit := Compose(o.physical+o.windowMs, 0)
		if err := o.save(limit); err != nil {
			o.err = &ErrWindow{Err: err}
			return 0
		}
		o.limit = limit
	}
	return ts
}

// Peek returns the greatest timestamp handed out or observed so far, without
// allocating (0 before the first allocation).
func (o *Oracle) Peek() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return Compose(o.physical, o.logical)
}

// Observe makes sure later allocations are greater than ts. Tests that pick
// a commit ts by hand call it so the oracle never hands that ts out again.
func (o *Oracle) Observe(ts uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.observeLocked(ts)
}

func (o *Oracle) observeLocked(ts uint64) {
	p, l := Physical(ts), Logical(ts)
	if p > o.physical || (p == o.physical && l > o.logical) {
		o.physical, o.logical = p, l
	}
}

// CurrentTs implements kvevent.Clock: it allocates a fresh timestamp, as a
// PD TSO request does.
func (o *Oracle) CurrentTs(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("tso: %w", err)
	}
	if ts := o.Next(); ts != 0 {
		return ts, nil
	}
	return 0, o.Err()
}
