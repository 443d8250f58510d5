package tso

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

var _ kvevent.Clock = (*Oracle)(nil)

func TestComposeSplit(t *testing.T) {
	ts := Compose(1700000000123, 7)
	if Physical(ts) != 1700000000123 || Logical(ts) != 7 {
		t.Fatalf("round trip: got %d/%d", Physical(ts), Logical(ts))
	}
	if ts != 1700000000123<<18|7 {
		t.Fatalf("layout: %d", ts)
	}
}

// Rule TSO-1: timestamps are strictly increasing; with a frozen clock the
// logical part counts, and a moving clock resets it.
func TestOracleMonotonicVirtual(t *testing.T) {
	c := NewVirtualClock(1000)
	o := NewOracle(c)
	a := o.Next()
	b := o.Next()
	if Physical(a) != 1000 || Logical(a) != 0 || b != a+1 {
		t.Fatalf("frozen clock: a=%d b=%d", a, b)
	}
	c.Advance(5 * time.Millisecond)
	d := o.Next()
	if Physical(d) != 1005 || Logical(d) != 0 {
		t.Fatalf("after advance: %d/%d", Physical(d), Logical(d))
	}
	c.Advance(-time.Second) // ignored
	if c.NowMs() != 1005 {
		t.Fatalf("clock went back")
	}
}

// Rule TSO-2: logical overflow pushes physical forward instead of wrapping.
func TestOracleLogicalOverflow(t *testing.T) {
	o := NewOracle(NewVirtualClock(10))
	var last uint64
	for i := 0; i < maxLogical+3; i++ {
		ts := o.Next()
		if ts <= last {
			t.Fatalf("not increasing at %d: %d <= %d", i, ts, last)
		}
		last = ts
	}
	if Physical(last) != 11 || Logical(last) != 2 {
		t.Fatalf("overflow: %d/%d", Physical(last), Logical(last))
	}
}

// Rule TSO-3: Observe(ts) makes every later allocation exceed ts.
func TestOracleObserve(t *testing.T) {
	o := NewOracle(NewVirtualClock(10))
	o.Next()
	hand := Compose(50, 3)
	o.Observe(hand)
	if got := o.Next(); got <= hand {
		t.Fatalf("Next after Observe = %d, want > %d", got, hand)
	}
	o.Observe(Compose(1, 0)) // older: no effect
	if o.Peek() <= hand {
		t.Fatalf("Observe went back")
	}
}

func TestOracleWallClock(t *testing.T) {
	o := NewOracle(WallClock{})
	a, err := o.CurrentTs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p := Physical(a); p < time.Now().Add(-time.Hour).UnixMilli() {
		t.Fatalf("wall physical %d looks wrong", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.CurrentTs(ctx); err == nil {
		t.Fatal("cancelled ctx must fail")
	}
}

func BenchmarkOracleNext(b *testing.B) {
	o := NewOracle(NewVirtualClock(1))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		o.Next()
	}
}

// DUR-6: a persistent oracle saves a mark ahead of every ts it hands out,
// starts above the persisted mark whatever the clock says, and stops
// (returns 0, CurrentTs fails) when a save fails.
func TestOracleWindow(t *testing.T) {
	clk := NewVirtualClock(1_000_000)
	o := NewOracle(clk)
	var saved []uint64
	o.SetWindow(0, 3000, func(l uint64) error { saved = append(saved, l); return nil })
	var last uint64
	for i := 0; i < 10; i++ {
		clk.Advance(1000 * time.Millisecond)
		last = o.Next()
		if len(saved) == 0 || last > saved[len(saved)-1] {
			t.Fatalf("ts %d handed out above the saved mark %v", last, saved)
		}
	}
	if len(saved) < 3 || len(saved) > 5 {
		t.Fatalf("saved %d marks over 10 s with a 3 s window", len(saved))
	}
	// Restart with a clock one hour back.
	o2 := NewOracle(NewVirtualClock(1_000_000 - 3_600_000))
	o2.SetWindow(saved[len(saved)-1], 3000, func(uint64) error { return nil })
	if ts := o2.Next(); ts <= saved[len(saved)-1] || ts <= last {
		t.Fatalf("ts %d after restart is not above the mark %d", ts, saved[len(saved)-1])
	}
	// A failed save is sticky.
	o3 := NewOracle(NewVirtualClock(1_000_000))
	o3.SetWindow(0, 0, func(uint64) error { return errors.New("disk full") })
	if ts := o3.Next(); ts != 0 {
		t.Fatalf("ts %d handed out without a saved mark", ts)
	}
	if _, err := o3.CurrentTs(context.Background()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("CurrentTs error %v", err)
	}
}
