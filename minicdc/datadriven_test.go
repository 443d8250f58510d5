package minicdc

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/searchfabric/sfemu/schemafence"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// TestScripts runs the ordering scenarios in testdata/*.txt. Each script
// drives one runtime with scripted fakes; the control loop is stepped by
// the `poll` command, so the callback log is deterministic.
//
// Commands:
//
//	start tables=(1,2) start-ts=10 [limit=N] [store-resolved=N] [initial=none] [allow-noold]
//	      [fail-row=<key>] [fail-row-overflow] [fail-ddl=<ts>] [fail-checkpoint]
//	schema table=1 ts=12            add a table version (name t1@12)
//	ddl ts=12 table=1 [job=N] [query=...] [schema=false] [add=(2,3)] [remove=(1)]
//	                                add a DDL event (and a table version at ts unless schema=false);
//	                                add/remove: OnDDL applies that table-set change at the DDL's
//	                                FinishedTs (ChangeTablesInDDL) and logs "change ...: <result>"
//	change [add=(5)] [remove=(1)] [ts=N]
//	                                queue a ChangeTables request (ts 0 = TSO); the next poll applies
//	                                it and prints "change ...: <result>"
//	tables                          the followed tables and the fence
//	drop table=1 ts=12              the table is dropped from ts on (lookups fail)
//	store-resolved ts=20            the store's resolved ts for every table
//	kv table=1                      input lines: put <key> <commit> [value] [old=<v>] | del <key> <commit> [old=<v>]
//	resolved table=1 ts=12
//	poll                            one control step (DDL poll + checkpoint)
//	time advance=30ms
//	fetch-error kind=transient|gc|other [n=1]
//	close
//
// Every command prints the callbacks it caused, then "fatal: ..." the first
// time a fatal error is recorded.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *harness
		var rt *Runtime
		var reported bool
		var startErr error
		var queued []changeReq // ChangeTables requests, answered by a poll
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var out []string
			switch d.Cmd {
			case "start":
				if rt != nil {
					_ = rt.Close()
					rt = nil
				}
				h = newHarness()
				var tables []int64
				arg, ok := d.Arg("tables")
				if !ok {
					d.Fatalf(t, "start needs tables=(...)")
				}
				for _, v := range arg.Vals {
					if strings.TrimSpace(v) == "" { // tables=(): an empty start set (M3)
						continue
					}
					id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					if err != nil {
						d.Fatalf(t, "bad table id %q", v)
					}
					tables = append(tables, id)
				}
				cfg := StartConfig{TableIDs: tables, DDLPollLimit: 10}
				d.MaybeScanArgs(t, "start-ts", &cfg.StartTs)
				d.MaybeScanArgs(t, "limit", &cfg.DDLPollLimit)
				storeResolved := cfg.StartTs
				d.MaybeScanArgs(t, "store-resolved", &storeResolved)
				h.prepare(storeResolved, tables...)
				if d.HasArg("initial") {
					h.src.initialResolved = nil
					h.opts.InitialProgressTimeout = time.Second
				}
				h.opts.AllowMissingOldValue = d.HasArg("allow-noold")
				d.MaybeScanArgs(t, "fail-row", &h.cb.failRowKey)
				d.MaybeScanArgs(t, "fail-ddl", &h.cb.failDDLTs)
				h.cb.failCheckpoint = d.HasArg("fail-checkpoint")
				if d.HasArg("fail-row-overflow") {
					h.cb.failRowErr = fmt.Errorf("partition table:1: %w after 2s", ErrReorderOverflow)
				}
				plans := map[int64]TableChange{}
				h.cb.afterDDL = func(ev DDL) error {
					ch, ok := plans[ev.JobID]
					if !ok {
						return nil
					}
					ch.StartTs = ev.FinishedTs
					err := rt.ChangeTablesInDDL(ch)
					h.cb.note("change %s at %d: %s", showChange(ch), ch.StartTs, errOrOK(err))
					return nil
				}
				ddlPlans = plans
				queued = nil
				rt, startErr = h.start(t, cfg)
				reported = false
				if startErr != nil {
					return "start error: " + startErr.Error()
				}
				out = append(out, fmt.Sprintf("started start-ts=%d", rt.StartTs()))
			case "schema":
				var id int64
				var ts uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				h.store.addVersion(id, ts)
				return "ok"
			case "ddl":
				var ev schemastore.DDLEvent
				d.ScanArgs(t, "ts", &ev.FinishedTs)
				d.MaybeScanArgs(t, "table", &ev.TableID)
				ev.JobID = int64(ev.FinishedTs)
				d.MaybeScanArgs(t, "job", &ev.JobID)
				d.MaybeScanArgs(t, "query", &ev.Query)
				withSchema := true
				d.MaybeScanArgs(t, "schema", &withSchema)
				if h.store.resolved >= ev.FinishedTs {
					d.Fatalf(t, "a DDL at %d below the store's resolved ts %d would break the store's own contract", ev.FinishedTs, h.store.resolved)
				}
				if withSchema && ev.TableID != 0 {
					ev.TableInfo = h.store.addVersion(ev.TableID, ev.FinishedTs)
				}
				if d.HasArg("add") || d.HasArg("remove") {
					ddlPlans[ev.JobID] = TableChange{Add: idList(t, d, "add"), Remove: idList(t, d, "remove")}
				}
				h.store.addDDL(ev)
				return "ok"
			case "drop":
				var id int64
				var ts uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				h.store.mu.Lock()
				h.store.versions[id] = append(h.store.versions[id], tableVersion{ts: ts})
				h.store.mu.Unlock()
				return "ok"
			case "store-resolved":
				var ts uint64
				d.ScanArgs(t, "ts", &ts)
				if ts < h.store.resolved {
					d.Fatalf(t, "the store's resolved ts cannot go back from %d to %d", h.store.resolved, ts)
				}
				h.store.setResolved(ts)
				return "ok"
			case "kv":
				var id int64
				d.ScanArgs(t, "table", &id)
				entries := parseEntries(t, d)
				c := h.src.consumer(id)
				if c == nil {
					d.Fatalf(t, "table %d is not subscribed", id)
				}
				c.ConsumeKV(entries)
			case "resolved":
				var id int64
				var ts uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				h.src.consumer(id).AdvanceResolvedTs(ts)
			case "change":
				req := changeReq{ch: TableChange{Add: idList(t, d, "add"), Remove: idList(t, d, "remove")}, done: make(chan error, 1)}
				d.MaybeScanArgs(t, "ts", &req.ch.StartTs)
				rt.changes <- req
				queued = append(queued, req)
				return "queued"
			case "tables":
				rt.mu.Lock()
				f := showFenceOf(rt)
				rt.mu.Unlock()
				return fmt.Sprintf("following %v %s floor=%d", rt.tables(), f, rt.ctl.floor())
			case "poll":
				h.j.take()
				more, wait, err := rt.ctl.step()
				for _, req := range queued {
					select {
					case cerr := <-req.done:
						out = append(out, fmt.Sprintf("change %s: %s", showChange(req.ch), errOrOK(cerr)))
					default:
						out = append(out, fmt.Sprintf("change %s: not applied", showChange(req.ch)))
					}
				}
				queued = nil
				if err != nil {
					rt.owner.fail(err)
				}
				for _, c := range h.j.take() {
					if strings.HasPrefix(c, "store.Fetch") {
						out = append(out, c)
					}
				}
				out = append(out, h.cb.take()...)
				if more {
					out = append(out, "(more)")
				}
				if wait > 0 {
					out = append(out, fmt.Sprintf("(checkpoint due in %v)", wait))
				}
			case "time":
				var s string
				d.ScanArgs(t, "advance", &s)
				dur, err := time.ParseDuration(s)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				h.tm.advance(dur)
				return "ok"
			case "fetch-error":
				var kind string
				n := 1
				d.ScanArgs(t, "kind", &kind)
				d.MaybeScanArgs(t, "n", &n)
				for i := 0; i < n; i++ {
					var err error
					switch kind {
					case "transient":
						err = tempErr{}
					case "gc":
						err = gcErr{}
					default:
						err = fmt.Errorf("job row is not JSON at byte 0")
					}
					h.store.fetchErrs = append(h.store.fetchErrs, err)
				}
				return "ok"
			case "stats":
				s := rt.Stats()
				return fmt.Sprintf("rows=%d dropped-start=%d skipped-empty=%d ddls=%d checkpoints=%d last=%d transient=%d",
					s.RowsDelivered, s.DroppedStartBound, s.SkippedEmpty, s.DDLsDelivered, s.Checkpoints, s.LastCheckpointTs, s.TransientFetchErrs)
			case "close":
				err := rt.Close()
				if err2 := rt.Close(); err2 != err { // M40: idempotent
					t.Fatalf("second Close returned %v, first %v", err2, err)
				}
				if err != nil {
					return "closed: " + err.Error()
				}
				return "closed: ok"
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			out = append(out, h.cb.take()...)
			if rt != nil && !reported {
				if err := rt.Err(); err != nil {
					reported = true
					out = append(out, "fatal: "+err.Error())
				}
			}
			if len(out) == 0 {
				return "(nothing)"
			}
			return strings.Join(out, "\n")
		})
		if rt != nil {
			_ = rt.Close()
		}
	})
}

// ddlPlans are the table-set changes the running script's OnDDL applies,
// by job id.
var ddlPlans map[int64]TableChange

func idList(t *testing.T, d *datadriven.TestData, key string) []int64 {
	arg, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []int64
	for _, v := range arg.Vals {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			d.Fatalf(t, "bad table id %q in %s", v, key)
		}
		out = append(out, id)
	}
	return out
}

func showChange(ch TableChange) string {
	var parts []string
	if len(ch.Add) > 0 {
		parts = append(parts, fmt.Sprintf("add=%v", ch.Add))
	}
	if len(ch.Remove) > 0 {
		parts = append(parts, fmt.Sprintf("remove=%v", ch.Remove))
	}
	return strings.Join(parts, " ")
}

func errOrOK(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

// showFenceOf prints the runtime's fence. Caller holds rt.mu.
func showFenceOf(rt *Runtime) string {
	v, ok := rt.fence.Value()
	switch {
	case !ok:
		return fmt.Sprintf("fence=undefined missing=%v", rt.fence.Missing())
	case v == schemafence.Unbounded:
		return "fence=unbounded"
	}
	return fmt.Sprintf("fence=%d", v)
}

type tempErr struct{}

func (tempErr) Error() string   { return "store busy" }
func (tempErr) Temporary() bool { return true }

type gcErr struct{}

func (gcErr) Error() string    { return "fetch start ts is below the GC safe point" }
func (gcErr) GCBoundary() bool { return true }

func parseEntries(t *testing.T, d *datadriven.TestData) []kvevent.RawKVEntry {
	var out []kvevent.RawKVEntry
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			d.Fatalf(t, "bad kv line %q", line)
		}
		commit, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			d.Fatalf(t, "bad commit in %q", line)
		}
		e := kvevent.RawKVEntry{Key: []byte(f[1]), StartTs: commit - 1, CRTs: commit}
		switch f[0] {
		case "put":
			e.OpType = kvevent.OpTypePut
		case "del":
			e.OpType = kvevent.OpTypeDelete
		default:
			d.Fatalf(t, "bad op in %q", line)
		}
		for _, x := range f[3:] {
			if v, ok := strings.CutPrefix(x, "old="); ok {
				e.OldValue = []byte(v)
			} else if x == "-" {
				e.Value = []byte{}
			} else {
				e.Value = []byte(x)
			}
		}
		if e.OpType == kvevent.OpTypePut && e.Value == nil {
			e.Value = []byte("v")
		}
		out = append(out, e)
	}
	return out
}
