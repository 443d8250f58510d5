package logpuller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"

	"github.com/searchfabric/sfemu/memquota"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// TestCoreScripts runs the puller-core scenarios in testdata/core/*.txt: cdcpb
// events in, rows, resolved ts and retries out. One SpanPuller over table
// 1's record span per script (re-created by `new`); keys are written as row
// handles of table 1 (`5`) or of another table (`t2/5`).
//
// Commands:
//
//	new start-ts=10 [quota=N] [memory=N] [disk=N] [spill]
//	                                a fresh core; memory: a shared memory
//	                                quota of N bytes, disk: a spill quota,
//	                                spill: an in-memory prewrite store
//	spill                           runs, spilled prewrites, quotas, live runs
//	store fail-append=N | damaged   make the store's N-th Append fail, or
//	                                every read report a damaged record
//	charge n=N                      another user of the memory quota takes
//	                                (N < 0: gives back) N bytes
//	release                         Release (the subscription ended)
//	add region=1 req=100 [from=H] [to=H]
//	                                AddRegion over [H, H) (default: the span's
//	                                bounds); prints the checkpoint or the refusal
//	rows region=1 [req=N]           one Entries event; input lines:
//	                                  prewrite <h> <start> [value|-] [old=<v>]
//	                                  commit <h> <start> <commit> [del]
//	                                  committed <h> <start> <commit> [value|-] [old=<v>] [del]
//	                                  rollback <h> <start>
//	                                  init
//	                                  badtype <h> | badop <h> <start> <commit>
//	error region=1 [req=N] kind=epoch_not_match|not_leader|region_not_found|
//	      server_is_busy|congested|unknown|duplicate_request|compatibility|cluster_id_mismatch
//	resolved ts=30 regions=(1,2) [req=N]   a batched resolved ts (req 0: none)
//	fail region=1                   FailRegion (stream failure)
//	holes                           the unheld ranges and their ts
//	stats                           counters, held bytes, live regions
//
// Every command prints what the consumer received (`row ...`,
// `resolved N`), a `retry ...` the core returned, `fatal: ...`, or
// `(nothing)`. The req of rows/error defaults to the region's last add.
func TestCoreScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/core", func(t *testing.T, path string) {
		var h *scriptHarness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && h == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			switch d.Cmd {
			case "new":
				var startTs uint64
				d.ScanArgs(t, "start-ts", &startTs)
				quota := 0
				d.MaybeScanArgs(t, "quota", &quota)
				h = &scriptHarness{reqs: map[uint64]uint64{}}
				var mm MatcherMemory
				if d.HasArg("memory") {
					var n int64
					d.ScanArgs(t, "memory", &n)
					mm.Memory = mustQuota(t, "memory-quota", n)
				}
				if d.HasArg("disk") {
					var n int64
					d.ScanArgs(t, "disk", &n)
					mm.Disk = mustQuota(t, "spill-quota", n)
					mm.Hint = "raise --spill-quota"
				}
				if d.HasArg("spill") {
					h.store = newMemPrewriteStore()
					mm.Store = h.store
				}
				h.mm = mm
				p, err := NewSpanPuller(Config{Span: tableSpan(1), StartTs: startTs, Consumer: &h.out, MatcherQuota: quota, Matcher: mm})
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				h.p = p
				return "ok"
			case "add":
				var region, req uint64
				d.ScanArgs(t, "region", &region)
				d.ScanArgs(t, "req", &req)
				span := tableSpan(1)
				if d.HasArg("from") {
					var from int64
					d.ScanArgs(t, "from", &from)
					span.StartKey = splitAt(from)
				}
				if d.HasArg("to") {
					var to int64
					d.ScanArgs(t, "to", &to)
					span.EndKey = splitAt(to)
				}
				ts, err := h.p.AddRegion(region, req, span)
				var le *RangeLockedError
				switch {
				case errors.As(err, &le):
					return fmt.Sprintf("refused: %s overlaps region %d", spanString(le.Span), le.Holder)
				case err != nil:
					return "refused: " + err.Error()
				}
				h.reqs[region] = req
				return fmt.Sprintf("checkpoint %d", ts)
			case "rows":
				region, req := h.target(t, d)
				var rows []*cdcpb.Event_Row
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					if line = strings.TrimSpace(line); line != "" {
						rows = append(rows, parseScriptRow(t, d, line))
					}
				}
				ev := &cdcpb.Event{RegionId: region, RequestId: req, Event: &cdcpb.Event_Entries_{Entries: &cdcpb.Event_Entries{Entries: rows}}}
				return h.handle(ev)
			case "error":
				region, req := h.target(t, d)
				var kind string
				d.ScanArgs(t, "kind", &kind)
				ev := &cdcpb.Event{RegionId: region, RequestId: req, Event: &cdcpb.Event_Error{Error: scriptError(t, d, kind, region)}}
				return h.handle(ev)
			case "resolved":
				var ts, req uint64
				d.ScanArgs(t, "ts", &ts)
				d.MaybeScanArgs(t, "req", &req)
				rts := &cdcpb.ResolvedTs{Ts: ts, RequestId: req}
				if arg, ok := d.Arg("regions"); ok {
					for _, v := range arg.Vals {
						id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
						if err != nil {
							d.Fatalf(t, "bad region %q", v)
						}
						rts.Regions = append(rts.Regions, id)
					}
				}
				h.p.HandleResolvedTs(rts)
				return h.flush(nil, nil)
			case "fail":
				var region uint64
				d.ScanArgs(t, "region", &region)
				return h.flush(h.p.FailRegion(region, RetryStreamFailure, nil), nil)
			case "holes":
				var out []string
				for _, hole := range h.p.Holes() {
					out = append(out, fmt.Sprintf("hole %s from %d", spanString(hole.Span), hole.Ts))
				}
				if len(out) == 0 {
					return "(none)"
				}
				return strings.Join(out, "\n")
			case "stats":
				s := h.p.Stats()
				return fmt.Sprintf("rows=%d duplicates=%d below-resolved=%d out-of-span=%d stale-events=%d stale-commits=%d dropped-commits=%d resolved-ignored=%d region-failures=%d\nregions=%d held-bytes=%d resolved=%d",
					s.Rows, s.Duplicates, s.BelowResolved, s.OutOfSpan, s.StaleEvents, s.StaleCommits, s.DroppedCommits, s.ResolvedIgnored, s.RegionFailures,
					h.p.RegionCount(), h.p.MatcherBytes(), h.p.ResolvedTs())
			case "spill":
				s := h.p.Stats()
				files := 0
				if h.store != nil {
					files = h.store.files()
				}
				dheld, dspilled := h.p.DeliveredBytes()
				dfiles := 0
				if h.store != nil {
					dfiles = h.store.deliveredFiles()
				}
				return fmt.Sprintf("runs-written=%d spilled-prewrites=%d matched-from-disk=%d live-runs=%d\nheld-bytes=%d memory-used=%d spilled-bytes=%d disk-used=%d\ndelivered: held=%d runs-written=%d live-runs=%d spilled-bytes=%d\nindex: charged=%d refused=%d",
					s.SpillRuns, s.SpilledPrewrites, s.MatchedFromDisk, files, h.p.MatcherBytes(), h.mm.Memory.Used(), h.p.MatcherSpilledBytes(), h.mm.Disk.Used(),
					dheld, s.DeliveredRuns, dfiles, dspilled, h.p.IndexBytes(), s.IndexRefused)
			case "store":
				if h.store == nil {
					d.Fatalf(t, "store without spill")
				}
				d.MaybeScanArgs(t, "fail-append", &h.store.failAppend)
				h.store.damaged = d.HasArg("damaged")
				return "ok"
			case "charge":
				var n int64
				d.ScanArgs(t, "n", &n)
				if n >= 0 {
					return fmt.Sprintf("acquired %t", h.mm.Memory.TryAcquire(n))
				}
				h.mm.Memory.Release(-n)
				return "ok"
			case "release":
				h.p.Release()
				return h.flush(nil, nil)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

type scriptHarness struct {
	p     *SpanPuller
	mm    MatcherMemory
	store *memPrewriteStore
	out   scriptConsumer
	reqs  map[uint64]uint64 // region -> request id of its last add
}

// scriptConsumer logs what the core delivers, copying the bytes (the core
// may reuse them).
type scriptConsumer struct{ log []string }

func (c *scriptConsumer) ConsumeKV(es []kvevent.RawKVEntry) {
	for _, e := range es {
		c.log = append(c.log, fmt.Sprintf("row %s %s commit=%d start=%d v=%s old=%s region=%d",
			e.OpType, keyString(e.Key), e.CRTs, e.StartTs, e.Value, e.OldValue, e.RegionID))
	}
}

func (c *scriptConsumer) AdvanceResolvedTs(ts uint64) {
	c.log = append(c.log, fmt.Sprintf("resolved %d", ts))
}

func (h *scriptHarness) target(t *testing.T, d *datadriven.TestData) (uint64, uint64) {
	var region uint64
	d.ScanArgs(t, "region", &region)
	req := h.reqs[region]
	d.MaybeScanArgs(t, "req", &req)
	return region, req
}

func (h *scriptHarness) handle(ev *cdcpb.Event) string {
	retry, err := h.p.HandleEvent(ev)
	return h.flush(retry, err)
}

func (h *scriptHarness) flush(retry *RegionRetry, err error) string {
	out := h.out.log
	h.out.log = nil
	if retry != nil {
		out = append(out, fmt.Sprintf("retry region %d %s: %s from %d", retry.RegionID, retry.Reason, spanString(retry.Span), retry.Ts))
	}
	if err != nil {
		var fe *FatalError
		if !errors.As(err, &fe) {
			out = append(out, "error (not a FatalError): "+err.Error())
		} else {
			out = append(out, "fatal: "+err.Error())
		}
	}
	if len(out) == 0 {
		return "(nothing)"
	}
	return strings.Join(out, "\n")
}

// parseScriptRow reads one input line of `rows`.
func parseScriptRow(t *testing.T, d *datadriven.TestData, line string) *cdcpb.Event_Row {
	f := strings.Fields(line)
	num := func(i int) uint64 {
		if i >= len(f) {
			d.Fatalf(t, "%q: missing field %d", line, i)
		}
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			d.Fatalf(t, "%q: field %d: %v", line, i, err)
		}
		return v
	}
	key := func() []byte {
		if len(f) < 2 {
			d.Fatalf(t, "%q: missing key", line)
		}
		return parseScriptKey(t, d, f[1])
	}
	// Optional trailing fields: a value, old=<v>, del.
	tail := func(r *cdcpb.Event_Row, from int, valueAllowed bool) {
		for _, x := range f[min(from, len(f)):] {
			switch {
			case x == "del":
				r.OpType = cdcpb.Event_Row_DELETE
			case strings.HasPrefix(x, "old="):
				r.OldValue = []byte(strings.TrimPrefix(x, "old="))
			case valueAllowed && x == "-":
				r.Value = nil
			case valueAllowed:
				r.Value = []byte(x)
			default:
				d.Fatalf(t, "%q: unexpected %q", line, x)
			}
		}
	}
	switch f[0] {
	case "prewrite":
		r := &cdcpb.Event_Row{Type: cdcpb.Event_PREWRITE, OpType: cdcpb.Event_Row_PUT, Key: key(), StartTs: num(2)}
		tail(r, 3, true)
		return r
	case "commit":
		r := &cdcpb.Event_Row{Type: cdcpb.Event_COMMIT, OpType: cdcpb.Event_Row_PUT, Key: key(), StartTs: num(2), CommitTs: num(3)}
		tail(r, 4, false)
		return r
	case "committed":
		r := &cdcpb.Event_Row{Type: cdcpb.Event_COMMITTED, OpType: cdcpb.Event_Row_PUT, Key: key(), StartTs: num(2), CommitTs: num(3)}
		tail(r, 4, true)
		return r
	case "rollback":
		return &cdcpb.Event_Row{Type: cdcpb.Event_ROLLBACK, Key: key(), StartTs: num(2)}
	case "init":
		return &cdcpb.Event_Row{Type: cdcpb.Event_INITIALIZED}
	case "badtype":
		return &cdcpb.Event_Row{Type: cdcpb.Event_LogType(9), Key: key()}
	case "badop":
		return &cdcpb.Event_Row{Type: cdcpb.Event_COMMITTED, OpType: cdcpb.Event_Row_UNKNOWN, Key: key(), StartTs: num(2), CommitTs: num(3)}
	}
	d.Fatalf(t, "unknown row kind %q", f[0])
	return nil
}

// parseScriptKey reads `5` (handle 5 of table 1) or `t2/5`.
func parseScriptKey(t *testing.T, d *datadriven.TestData, s string) []byte {
	table := int64(1)
	if strings.HasPrefix(s, "t") {
		tab, h, ok := strings.Cut(s[1:], "/")
		if !ok {
			d.Fatalf(t, "bad key %q", s)
		}
		v, err := strconv.ParseInt(tab, 10, 64)
		if err != nil {
			d.Fatalf(t, "bad key %q", s)
		}
		table, s = v, h
	}
	h, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "bad key %q", s)
	}
	return rawKey(table, h)
}

func scriptError(t *testing.T, d *datadriven.TestData, kind string, region uint64) *cdcpb.Error {
	switch kind {
	case "epoch_not_match":
		return &cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{}}
	case "not_leader":
		return &cdcpb.Error{NotLeader: &errorpb.NotLeader{RegionId: region}}
	case "region_not_found":
		return &cdcpb.Error{RegionNotFound: &errorpb.RegionNotFound{RegionId: region}}
	case "server_is_busy":
		return &cdcpb.Error{ServerIsBusy: &errorpb.ServerIsBusy{Reason: "too many pending incremental scans"}}
	case "congested":
		return &cdcpb.Error{Congested: &cdcpb.Congested{RegionId: region}}
	case "unknown":
		return &cdcpb.Error{} // a kind newer than the pinned proto
	case "duplicate_request":
		return &cdcpb.Error{DuplicateRequest: &cdcpb.DuplicateRequest{RegionId: region}}
	case "compatibility":
		return &cdcpb.Error{Compatibility: &cdcpb.Compatibility{}} // proto text of fields is unstable
	case "cluster_id_mismatch":
		return &cdcpb.Error{ClusterIdMismatch: &cdcpb.ClusterIDMismatch{Current: 1, Request: 2}}
	}
	d.Fatalf(t, "unknown error kind %q", kind)
	return nil
}

// keyString prints a raw record key as its handle (`5`, or `t2/5` for
// another table than 1).
func keyString(raw []byte) string {
	if len(raw) != 19 || raw[0] != 't' || raw[9] != '_' || raw[10] != 'r' {
		return fmt.Sprintf("%x", raw)
	}
	table := int64(binary.BigEndian.Uint64(raw[1:9]) ^ (1 << 63))
	h := int64(binary.BigEndian.Uint64(raw[11:19]) ^ (1 << 63))
	if table == 1 {
		return strconv.FormatInt(h, 10)
	}
	return fmt.Sprintf("t%d/%d", table, h)
}

// spanString prints a comparable span of table 1 as [start|h, h|end).
func spanString(s kvevent.Span) string {
	full := tableSpan(1)
	bound := func(k, edge []byte, name string) string {
		if bytes.Equal(k, edge) {
			return name
		}
		if len(k) == 0 {
			return "inf"
		}
		_, raw, err := codec.DecodeBytes(k, nil)
		if err != nil {
			return fmt.Sprintf("%x", k)
		}
		return keyString(raw)
	}
	return fmt.Sprintf("[%s, %s)", bound(s.StartKey, full.StartKey, "start"), bound(s.EndKey, full.EndKey, "end"))
}

func mustQuota(t testing.TB, name string, n int64) *memquota.Quota {
	q, err := memquota.New(name, n)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
