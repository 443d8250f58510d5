package sim

import (
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
)

// vclock is the runtime's, the reorder buffers' and the emulator's time:
// the fake cluster's virtual clock. A wait (After) is a yield to the
// simulated world: the sources that may deliver now are pumped and the
// clock moves on by d, then the channel fires at once. Every waiter runs
// on the simulator's goroutine (the runtime's readiness and initial
// progress waits, the reorder backpressure wait), so what happens during
// a wait is a function of the seed, not of goroutine scheduling (SIM3).
type vclock struct {
	c     *fakeupstream.Cluster
	yield func(d time.Duration)
}

func (v *vclock) Now() time.Time { return time.UnixMilli(v.c.NowMs()) }

func (v *vclock) After(d time.Duration) <-chan time.Time {
	if d <= 0 {
		d = time.Millisecond
	}
	if v.yield != nil {
		v.yield(d)
	} else {
		_ = v.c.Advance(d)
	}
	ch := make(chan time.Time, 1)
	ch <- v.Now()
	return ch
}

// emuClock is the emulator's clock: the cluster's time for Now (metrics,
// tombstone retention). The emulator waits (After) only in reads with a
// min_ts, which the simulator never makes; those run on the caller's
// goroutine and must not pump the world, so After is plain wall time.
type emuClock struct{ c *fakeupstream.Cluster }

func (e emuClock) Now() time.Time                         { return time.UnixMilli(e.c.NowMs()) }
func (e emuClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
