package pd

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// fakeGC models PD's service safe point table: ttl <= 0 removes, a value
// below the minimum is refused and the minimum answered. Time is the
// test's.
type fakeGC struct {
	nowMs    int64
	entries  map[string][2]uint64 // safe point, expire ms
	calls    []string
	failNext error
}

func newFakeGC(gcWorker uint64) *fakeGC {
	return &fakeGC{entries: map[string][2]uint64{"gc_worker": {gcWorker, math.MaxUint64}}}
}

func (f *fakeGC) min() uint64 {
	m := uint64(math.MaxUint64)
	for id, e := range f.entries {
		if e[1] <= uint64(f.nowMs) {
			delete(f.entries, id)
			continue
		}
		if e[0] < m {
			m = e[0]
		}
	}
	return m
}

func (f *fakeGC) UpdateServiceGCSafePoint(_ context.Context, id string, ttl int64, sp uint64) (uint64, error) {
	f.calls = append(f.calls, id)
	if err := f.failNext; err != nil {
		f.failNext = nil
		return 0, err
	}
	if ttl <= 0 {
		delete(f.entries, id)
		return f.min(), nil
	}
	if m := f.min(); sp < m {
		return m, nil
	}
	f.entries[id] = [2]uint64{sp, uint64(f.nowMs + ttl*1000)}
	return f.min(), nil
}

// P3: a start ts below the GC safe point is refused, naming both values;
// the probe never touches a real entry.
func TestCheckStartTs(t *testing.T) {
	ctx := context.Background()
	f := newFakeGC(1000)
	f.entries["other"] = [2]uint64{2000, math.MaxUint64}
	if err := CheckStartTs(ctx, f, 1000); err != nil {
		t.Fatalf("start at the safe point: %v", err)
	}
	err := CheckStartTs(ctx, f, 999)
	if !errors.Is(err, ErrStartTsBeforeGC) || !strings.Contains(err.Error(), "999") || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("want ErrStartTsBeforeGC naming 999 and 1000, got %v", err)
	}
	if _, ok := f.entries["other"]; !ok || len(f.entries) != 2 {
		t.Fatalf("probe changed the table: %v", f.entries)
	}
	f.failNext = errors.New("pd down")
	if err := CheckStartTs(ctx, f, 5000); err == nil || !strings.Contains(err.Error(), "pd down") {
		t.Fatalf("PD error not surfaced: %v", err)
	}
}

// P4-P6: register at start ts - 1, renew only after RefreshEvery with the
// advanced checkpoint, refuse a start below GC, detect a lapse, remove on
// stop.
func TestServiceSafePointLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFakeGC(100)
	k, err := NewServiceSafePoint(f, ServiceSafePointConfig{ServiceID: "sfemu-test", TTL: 10 * time.Second, RefreshEvery: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(ctx, 500, 0); err != nil {
		t.Fatal(err)
	}
	if got := f.entries["sfemu-test"]; got[0] != 499 || got[1] != 10_000 {
		t.Fatalf("registered entry = %v, want safe point 499 expiring at 10000 ms", got)
	}
	k.Advance(800)
	k.Advance(700) // a lower checkpoint never moves the hold back
	if k.Held() != 799 {
		t.Fatalf("held = %d, want 799", k.Held())
	}
	n := len(f.calls)
	if err := k.Tick(ctx, 1999); err != nil || len(f.calls) != n {
		t.Fatalf("renewed before RefreshEvery (err %v, calls %d->%d)", err, n, len(f.calls))
	}
	f.nowMs = 2000
	if err := k.Tick(ctx, 2000); err != nil {
		t.Fatal(err)
	}
	if got := f.entries["sfemu-test"]; got[0] != 799 || got[1] != 12_000 {
		t.Fatalf("renewed entry = %v, want 799 expiring at 12000", got)
	}
	// The entry lapses (no renewal for longer than the TTL) and GC moves
	// past the checkpoint: the next renewal reports the lost history.
	f.nowMs = 20_000
	f.entries["gc_worker"] = [2]uint64{900, math.MaxUint64}
	err = k.Tick(ctx, 20_000)
	if !errors.Is(err, ErrSnapshotLostByGC) || !strings.Contains(err.Error(), "900") {
		t.Fatalf("want ErrSnapshotLostByGC naming 900, got %v", err)
	}
	if err := k.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.entries["sfemu-test"]; ok {
		t.Fatal("entry not removed")
	}
	if err := k.Remove(ctx); err != nil {
		t.Fatalf("second remove: %v", err)
	}

	// Register below GC.
	k2, _ := NewServiceSafePoint(f, ServiceSafePointConfig{ServiceID: "sfemu-late"})
	err = k2.Register(ctx, 600, 20_000)
	if !errors.Is(err, ErrStartTsBeforeGC) || !strings.Contains(err.Error(), "600") || !strings.Contains(err.Error(), "900") {
		t.Fatalf("want ErrStartTsBeforeGC naming 600 and 900, got %v", err)
	}
}

func TestServiceSafePointConfig(t *testing.T) {
	f := newFakeGC(0)
	for _, cfg := range []ServiceSafePointConfig{
		{},
		{ServiceID: probeServiceID},
		{ServiceID: "x", TTL: time.Second, RefreshEvery: time.Second},
	} {
		if _, err := NewServiceSafePoint(f, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// P7: Run renews on its ticker and removes the entry when ctx ends.
func TestServiceSafePointRunRemovesOnStop(t *testing.T) {
	f := &lockedGC{f: newFakeGC(0)}
	k, err := NewServiceSafePoint(f, ServiceSafePointConfig{ServiceID: "sfemu-run", TTL: 10 * time.Second, RefreshEvery: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(context.Background(), 10, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	k.Advance(20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for f.held("sfemu-run") != 19 {
		if time.Now().After(deadline) {
			t.Fatalf("never renewed to 19 (held %d)", f.held("sfemu-run"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.has("sfemu-run") {
		t.Fatal("entry left after a clean stop")
	}
}
