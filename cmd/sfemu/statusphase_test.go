package main

import (
	"testing"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/snapshot"
)

// SR13, H15, H17: the adapter's PhaseHook: a snapshot's reports put the
// adapter in the state snapshotting with its progress (done/total, rate
// between reports, ETA) and the terminal line; a supervisor starting
// meanwhile does not hide it; Streaming ends it.
func TestStatusViewSnapshotPhase(t *testing.T) {
	v := &statusView{state: httpapi.AdapterStarting}
	t0 := time.Unix(1000, 0)
	v.snapshotAt(adapter.PhaseProgress{What: "snapshot of demo.products", Unit: "rows", Done: 0, Total: 1000}, t0)
	v.snapshotAt(adapter.PhaseProgress{What: "snapshot of demo.products", Unit: "rows", Done: 200, Total: 1000}, t0.Add(time.Second))
	v.mu.Lock()
	state, p := v.state, v.phaseProgress()
	v.mu.Unlock()
	if state != httpapi.AdapterSnapshotting || p == nil {
		t.Fatalf("state %s progress %v", state, p)
	}
	if p.Done != 200 || p.Total != 1000 || p.Rate != 200 || p.ETASeconds == nil || *p.ETASeconds != 4 {
		t.Fatalf("progress %+v", p)
	}
	if line := p.Line(); line != "snapshot of demo.products 20% (200 rows/1000 rows) at 200 rows/s ETA 4s" {
		t.Errorf("line %q", line)
	}

	v.running(nil, false) // the supervisor returned while the snapshot runs
	v.mu.Lock()
	state = v.state
	v.mu.Unlock()
	if state != httpapi.AdapterSnapshotting {
		t.Errorf("running() hid the snapshot: %s", state)
	}

	v.Streaming()
	v.mu.Lock()
	state, p = v.state, v.phaseProgress()
	v.mu.Unlock()
	if state != httpapi.AdapterStreaming || p != nil {
		t.Errorf("after Streaming: state %s progress %v", state, p)
	}
	// Without a snapshot, running() is streaming at once.
	w := &statusView{state: httpapi.AdapterStarting}
	w.running(nil, false)
	if w.state != httpapi.AdapterStreaming {
		t.Errorf("running without a snapshot: %s", w.state)
	}
}

// SR13: the initial snapshot's counters (snapshot.Progress) drive the
// status's `snapshotting` state with ranges read of ranges planned, and
// its end hands the state to streaming.
func TestStatusViewFollowsSnapshot(t *testing.T) {
	p := &snapshot.Progress{}
	t0 := time.Unix(2000, 0)
	p.Begin(&snapshot.State{Ts: 5, Tables: []snapshot.Table{{Name: "demo.products", Collection: "demo.products", Ranges: []snapshot.Range{{}, {Done: true, Rows: 10}}}}}, t0)
	v := &statusView{state: httpapi.AdapterStarting}
	v.watchSnapshot(p)
	v.pollSnapshot(t0)
	v.mu.Lock()
	state, pr := v.state, v.phaseProgress()
	v.mu.Unlock()
	if state != httpapi.AdapterSnapshotting || pr == nil || pr.Done != 1 || pr.Total != 2 || pr.Unit != "ranges" || pr.What != "snapshot of demo.products" {
		t.Fatalf("during the snapshot: state %s progress %+v", state, pr)
	}
	p.Begin(&snapshot.State{Ts: 5, Tables: []snapshot.Table{{Name: "demo.products", Collection: "demo.products", Finished: true, Ranges: []snapshot.Range{{Done: true}}}}}, t0.Add(time.Second))
	v.pollSnapshot(t0.Add(time.Second))
	v.mu.Lock()
	state, pr = v.state, v.phaseProgress()
	v.mu.Unlock()
	if state != httpapi.AdapterStreaming || pr != nil {
		t.Fatalf("after the snapshot: state %s progress %+v", state, pr)
	}
}
