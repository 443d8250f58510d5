package main

import (
	"strings"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/snapshot"
)

// The initial snapshot as the status's `snapshotting` state (SR13): the
// snapshot runs inside the adapter's start and counts into a
// snapshot.Progress; the status view reads it whenever the page, the
// metrics or the terminal ask, and turns it into PhaseHook reports (ranges
// read of ranges planned, every snapshotted table together).

// watchSnapshot makes v follow p.
func (v *statusView) watchSnapshot(p *snapshot.Progress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.snap = p
}

// pollSnapshot reports the snapshot's progress at now, or its end. Call
// without v.mu held.
func (v *statusView) pollSnapshot(now time.Time) {
	v.mu.Lock()
	p := v.snap
	v.mu.Unlock()
	if p == nil {
		return
	}
	if !p.Active() {
		v.Streaming()
		return
	}
	v.snapshotAt(snapshotPhase(p.Report(now)), now)
}

// snapshotPhase sums the tables' ranges into one progress.
func snapshotPhase(tables []snapshot.TableProgress) adapter.PhaseProgress {
	ph := adapter.PhaseProgress{Unit: "ranges"}
	var names []string
	for _, t := range tables {
		names = append(names, t.Table)
		ph.Done += float64(t.RangesDone)
		ph.Total += float64(t.RangesTotal)
	}
	ph.What = "snapshot of " + strings.Join(names, ", ")
	return ph
}
