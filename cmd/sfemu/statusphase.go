package main

import (
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator/httpapi"
)

// The adapter's long phases on the status page (SR13): statusView is the
// adapter's PhaseHook, so the initial snapshot shows as the state
// `snapshotting` with its progress (done/total, rate, ETA; H17) until the
// stream takes over.

var _ adapter.PhaseHook = (*statusView)(nil)

// phaseRate follows a phase's done between reports.
type phaseRate struct {
	p    adapter.PhaseProgress
	at   time.Time
	rate float64 // units per second, smoothed
}

// observe records a report at now and updates the smoothed rate (a new
// phase, or done going back, starts over).
func (r *phaseRate) observe(p adapter.PhaseProgress, now time.Time) {
	if r.at.IsZero() || p.What != r.p.What || p.Done < r.p.Done {
		*r = phaseRate{p: p, at: now}
		return
	}
	if dt := now.Sub(r.at).Seconds(); dt > 0 {
		x := (p.Done - r.p.Done) / dt
		if r.rate == 0 {
			r.rate = x
		} else {
			r.rate = 0.7*r.rate + 0.3*x
		}
		r.p, r.at = p, now
	} else {
		r.p = p
	}
}

// progress is the phase as the page's Progress.
func (r *phaseRate) progress() *httpapi.Progress {
	return httpapi.NewProgress(r.p.What, r.p.Unit, r.p.Done, r.p.Total, r.rate)
}

// Snapshotting implements adapter.PhaseHook.
func (v *statusView) Snapshotting(p adapter.PhaseProgress) {
	v.snapshotAt(p, time.Now())
}

func (v *statusView) snapshotAt(p adapter.PhaseProgress, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.phase == nil {
		v.phase = &phaseRate{}
	}
	v.phase.observe(p, now)
	if v.state != httpapi.AdapterSnapshotting {
		v.state, v.reason, v.since = httpapi.AdapterSnapshotting, "", now
	}
}

// Streaming implements adapter.PhaseHook.
func (v *statusView) Streaming() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.phase = nil
	if v.state == httpapi.AdapterSnapshotting {
		v.state, v.reason, v.since = httpapi.AdapterStreaming, "", time.Now()
	}
}

// phaseProgress is the running phase's progress (nil: none). Call with
// v.mu held.
func (v *statusView) phaseProgress() *httpapi.Progress {
	if v.phase == nil || v.state != httpapi.AdapterSnapshotting {
		return nil
	}
	return v.phase.progress()
}
