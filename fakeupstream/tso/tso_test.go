package tso

import (
	"context"
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
