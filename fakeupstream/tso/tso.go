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
	return Compose(o.physical, o.logical)
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
	return o.Next(), nil
}
