package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/snapshot"
)

// statusView is the binary's httpapi.StatusProvider: the upstream, the
// adapter's state as the serve loop drives it, and the DDLs and errors it
// saw. Status never waits on the adapter: it reads counters and one TSO.
type statusView struct {
	up *adapter.Upstream

	mu       sync.Mutex
	state    string
	reason   string
	since    time.Time
	sup      *adapter.Supervisor
	mem      adapter.Memory // the quotas every adapter shares (set before the first starts)
	restarts int            // requested over /admin/restart-adapter
	ddls     []httpapi.DDLEvent
	errs     []httpapi.ErrorRow
	phase    *phaseRate         // the running long phase (snapshot), statusphase.go
	snap     *snapshot.Progress // the initial snapshot's counters, statussnapshot.go

	// Counters of the adapters before the current one, so the totals stay
	// monotonic across restarts (each adapter's runtime counts from 0).
	lastAd   *adapter.Adapter
	lastSt   minicdc.Stats
	baseRows uint64
	baseDDLs uint64
	baseErrs uint64
}

// current returns the running adapter and the totals across adapters.
// Call with v.mu held.
func (v *statusView) current() (*adapter.Adapter, minicdc.Stats, minicdc.Stats) {
	if v.sup == nil {
		return nil, minicdc.Stats{}, minicdc.Stats{}
	}
	cur := v.sup.Adapter()
	if cur != v.lastAd && v.lastAd != nil {
		v.baseRows += v.lastSt.RowsDelivered
		v.baseDDLs += v.lastSt.DDLsDelivered
		v.baseErrs += v.lastSt.TransientFetchErrs
	}
	st := cur.RT.Stats()
	v.lastAd, v.lastSt = cur, st
	total := st
	total.RowsDelivered += v.baseRows
	total.DDLsDelivered += v.baseDDLs
	total.TransientFetchErrs += v.baseErrs
	return cur, st, total
}

// Rows of DDLs and errors kept for the page.
const (
	viewDDLs   = 20
	viewErrors = 10
)

func newStatusView(up *adapter.Upstream) *statusView {
	return &statusView{up: up, state: httpapi.AdapterStarting, since: time.Now()}
}

// setState records a state change with its one-line reason.
func (v *statusView) setState(state, reason string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state, v.reason, v.since = state, oneLine(reason), time.Now()
}

// running records the supervisor now running the adapter.
func (v *statusView) running(sup *adapter.Supervisor, requested bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.sup = sup
	// A snapshot the new adapter already reports keeps its state until
	// the hook says streaming.
	if v.state != httpapi.AdapterSnapshotting || v.phase == nil {
		v.state, v.reason, v.since = httpapi.AdapterStreaming, "", time.Now()
	}
	if requested {
		v.restarts++
	}
}

// stopped records the adapter's stop and its error.
func (v *statusView) stopped(err error) {
	reason := "stopped without an error"
	if err != nil {
		reason = err.Error()
	}
	v.setState(httpapi.AdapterStopped, reason)
	v.addError(time.Now(), "adapter stopped: "+reason)
}

func (v *statusView) addError(at time.Time, msg string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, httpapi.ErrorRow{At: at, Message: oneLine(msg)})
	if len(v.errs) > viewErrors {
		v.errs = v.errs[len(v.errs)-viewErrors:]
	}
}

// tap sees the adapter's DDLs (AdapterConfig.Tap); it never fails.
func (v *statusView) tap() minicdc.Callback { return ddlTap{v} }

type ddlTap struct{ v *statusView }

func (t ddlTap) OnRowChanged(context.Context, minicdc.RowChanged) error { return nil }
func (t ddlTap) OnCheckpoint(context.Context, minicdc.Checkpoint) error { return nil }
func (t ddlTap) OnDDL(_ context.Context, e minicdc.DDL) error {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	t.v.ddls = append(t.v.ddls, httpapi.DDLEvent{Ts: e.FinishedTs, Table: e.SchemaName + "." + e.TableName, Query: oneLine(e.Query)})
	if len(t.v.ddls) > viewDDLs {
		t.v.ddls = t.v.ddls[len(t.v.ddls)-viewDDLs:]
	}
	return nil
}

// Status implements httpapi.StatusProvider.
func (v *statusView) Status(ctx context.Context) httpapi.ProviderStatus {
	v.pollSnapshot(time.Now())
	up := &httpapi.UpstreamStatus{Mode: v.up.Mode().String(), Address: strings.Join(v.up.PDAddrs(), ",")}
	if up.Address == "" {
		up.Address = "in process"
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if now, err := v.up.CurrentTs(tctx); err == nil {
		up.CurrentTs = now
	}
	cancel()

	v.mu.Lock()
	defer v.mu.Unlock()
	a := &httpapi.AdapterStatus{State: v.state, Reason: v.reason, Since: v.since, Restarts: v.restarts, Progress: v.phaseProgress()}
	if v.sup != nil {
		if cur, st, total := v.current(); cur != nil {
			a.Epoch, a.StartTs, a.CheckpointTs = cur.Resume.Epoch, cur.RT.StartTs(), st.LastCheckpointTs
			a.Rows, a.DDLs = total.RowsDelivered, total.DDLsDelivered
			for _, ps := range cur.Bridge.Stats() {
				a.Buffered += ps.UnsealedRows + ps.SealedRows
			}
		}
	}
	return httpapi.ProviderStatus{
		Upstream: up,
		Adapter:  a,
		DDLs:     append([]httpapi.DDLEvent(nil), v.ddls...),
		Errors:   append([]httpapi.ErrorRow(nil), v.errs...),
	}
}

// oneLine keeps the first line of s, so a reason fits a table cell.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// progressLines are the terminal's progress lines (H17): the adapter's
// catch-up after a restart and each collection's rebuild, while they last.
func progressLines(ctx context.Context, b *httpapi.Board, now time.Time) []string {
	doc, err := b.Status(ctx, now)
	if err != nil {
		return nil
	}
	var out []string
	if doc.Adapter != nil && doc.Adapter.Progress != nil {
		out = append(out, doc.Adapter.Progress.Line())
	}
	for _, c := range doc.Collections {
		if c.Rebuild != nil {
			out = append(out, c.Name+": "+c.Rebuild.Line())
		}
	}
	return out
}
