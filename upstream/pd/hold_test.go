package pd

import (
	"context"
	"errors"
	"testing"
	"time"
)

// rule: P15 — the hold renews the advanced checkpoint on its own loop;
// Stop(false) keeps the entry (a fatal stop), Stop(true) removes it, and
// Stop is idempotent.
func TestHoldRenewsKeepsOrRemoves(t *testing.T) {
	for _, remove := range []bool{false, true} {
		f := &lockedGC{f: newFakeGC(0)}
		k, err := NewServiceSafePoint(f, ServiceSafePointConfig{ServiceID: "sfemu-hold", TTL: time.Hour, RefreshEvery: 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Register(context.Background(), 10, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		h := StartHold(k)
		if h.SafePoint() != k {
			t.Fatal("SafePoint is not the held keeper")
		}
		k.Advance(30)
		deadline := time.Now().Add(5 * time.Second)
		for f.held("sfemu-hold") != 29 {
			if time.Now().After(deadline) {
				t.Fatalf("never renewed to 29 (held %d)", f.held("sfemu-hold"))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := h.Err(); err != nil {
			t.Fatalf("no history lost, got %v", err)
		}
		if err := h.Stop(remove); err != nil {
			t.Fatal(err)
		}
		if err := h.Stop(!remove); err != nil {
			t.Fatal(err)
		}
		if got := f.has("sfemu-hold"); got == remove {
			t.Fatalf("Stop(remove=%v): entry present=%v", remove, got)
		}
	}
}

// rule: P15 — a renewal that finds PD's minimum past the checkpoint ends
// the loop with ErrSnapshotLostByGC for Err.
func TestHoldReportsLostHistory(t *testing.T) {
	f := &lockedGC{f: newFakeGC(0)}
	k, err := NewServiceSafePoint(f, ServiceSafePointConfig{ServiceID: "sfemu-hold-lost", TTL: time.Hour, RefreshEvery: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(context.Background(), 10, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	// The entry lapses and GC passes the checkpoint.
	f.mu.Lock()
	delete(f.f.entries, "sfemu-hold-lost")
	f.f.entries["gc_worker"] = [2]uint64{100, f.f.entries["gc_worker"][1]}
	f.mu.Unlock()
	h := StartHold(k)
	defer h.Stop(false)
	deadline := time.Now().Add(5 * time.Second)
	for h.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("lost history never reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.Is(h.Err(), ErrSnapshotLostByGC) {
		t.Fatalf("want ErrSnapshotLostByGC, got %v", h.Err())
	}
}
