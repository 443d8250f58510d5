package schemafence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs the ordering scenarios in testdata/*.txt against the
// pure cores of this package; each case cites the rule it pins.
//
// Commands (one state per script, replaced by the next constructor):
//
//	fence tables=(1,2,3)                 NewFence
//	advance table=1 ts=10                Fence.Advance; prints the fence
//	add-table table=4 ts=15 floor=12     Fence.Add; prints the fence
//	remove-table table=4                 Fence.Remove; prints the fence
//	cursor ts=100                        NewCursor
//	plan finished=(110,120) next=130 fence=115|fence=none
//	                                     Cursor.Apply; prints the plan
//	watermarks partitions=(a,b) [modalities=(text,vector)]
//	                                     NewWatermarks
//	wm modality=document partition=a ts=10
//	                                     Watermarks.Advance; prints applied/safe
//	add-partition partition=c ts=10      Watermarks.AddPartition
//	releasable ddl=100 flushed=99        DDLReleasable
//	guard                                NewSameTsGuard
//	ddl-released table=1 ts=100          SameTsGuard.DDLReleased
//	dml table=1 ts=100                   SameTsGuard.CheckDML
//
// An error prints as "error: <type>: <text>" (the type only for this
// package's typed errors) and the state it leaves is
// printed as after a success, so a script shows that errors change nothing.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			fence  *Fence
			cursor *Cursor
			wm     *Watermarks
			guard  *SameTsGuard
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "fence":
				f, err := NewFence(int64List(t, d, "tables"))
				if err != nil {
					return errText(err)
				}
				fence = f
				return showFence(fence)
			case "advance":
				var id int64
				var ts uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				err := fence.Advance(id, ts)
				return withErr(err, showFence(fence))
			case "add-table":
				var id int64
				var ts, floor uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				d.ScanArgs(t, "floor", &floor)
				return withErr(fence.Add(id, ts, floor), showFence(fence)+fmt.Sprintf(" tables=%v", fence.Tables()))
			case "remove-table":
				var id int64
				d.ScanArgs(t, "table", &id)
				return withErr(fence.Remove(id), showFence(fence)+fmt.Sprintf(" tables=%v", fence.Tables()))
			case "cursor":
				var ts uint64
				d.ScanArgs(t, "ts", &ts)
				cursor = NewCursor(ts)
				return fmt.Sprintf("cursor=%d", cursor.Ts())
			case "plan":
				finished := uintList(t, d, "finished")
				var next uint64
				d.ScanArgs(t, "next", &next)
				var fenceArg string
				d.ScanArgs(t, "fence", &fenceArg)
				var fv uint64
				ok := fenceArg != "none"
				if ok {
					v, err := strconv.ParseUint(fenceArg, 10, 64)
					if err != nil {
						d.Fatalf(t, "fence=%q: want a ts or none", fenceArg)
					}
					fv = v
				}
				p, err := cursor.Apply(finished, next, fv, ok)
				out := fmt.Sprintf("emit=%d %s cursor=%d", p.Emit, fmtList(finished[:min(p.Emit, len(finished))]), cursor.Ts())
				if p.AdoptedNext {
					out += " (adopted next)"
				}
				return withErr(err, out)
			case "watermarks":
				var mods []string
				if d.HasArg("modalities") {
					mods = strList(t, d, "modalities")
				}
				w, err := NewWatermarks(strList(t, d, "partitions"), mods)
				if err != nil {
					return errText(err)
				}
				wm = w
				return showWatermarks(wm)
			case "wm":
				var mod, part string
				var ts uint64
				d.ScanArgs(t, "modality", &mod)
				d.ScanArgs(t, "partition", &part)
				d.ScanArgs(t, "ts", &ts)
				return withErr(wm.Advance(mod, part, ts), showWatermarks(wm))
			case "add-partition":
				var part string
				var ts uint64
				d.ScanArgs(t, "partition", &part)
				d.ScanArgs(t, "ts", &ts)
				return withErr(wm.AddPartition(part, ts), showWatermarks(wm))
			case "releasable":
				var ddl, flushed uint64
				d.ScanArgs(t, "ddl", &ddl)
				d.ScanArgs(t, "flushed", &flushed)
				return strconv.FormatBool(DDLReleasable(ddl, flushed))
			case "guard":
				guard = NewSameTsGuard()
				return "ok"
			case "ddl-released":
				var id int64
				var ts uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				return withErr(guard.DDLReleased(id, ts), "ok")
			case "dml":
				var id int64
				var ts uint64
				d.ScanArgs(t, "table", &id)
				d.ScanArgs(t, "ts", &ts)
				return withErr(guard.CheckDML(id, ts), "ok")
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

func showFence(f *Fence) string {
	v, ok := f.Value()
	if !ok {
		return fmt.Sprintf("fence=undefined missing=%v", f.Missing())
	}
	if v == Unbounded {
		return "fence=unbounded"
	}
	return fmt.Sprintf("fence=%d", v)
}

func showWatermarks(w *Watermarks) string {
	var b strings.Builder
	for _, m := range w.Modalities() {
		fmt.Fprintf(&b, "applied %s=%s\n", m, tsOrUndefined(w.Applied(m)))
	}
	fmt.Fprintf(&b, "safe=%s", tsOrUndefined(w.Safe()))
	return b.String()
}

func tsOrUndefined(ts uint64, ok bool) string {
	if !ok {
		return "undefined"
	}
	return strconv.FormatUint(ts, 10)
}

// errText names the error's type, so a script pins which error kind a rule
// promises, not only its wording.
func errText(err error) string {
	var re *RegressionError
	var ue *UnknownTableError
	var oe *OrderingError
	var sv *SameTsViolation
	kind := ""
	switch {
	case errors.As(err, &re):
		kind = "RegressionError"
	case errors.As(err, &ue):
		kind = "UnknownTableError"
	case errors.As(err, &oe):
		kind = "OrderingError"
	case errors.As(err, new(*AddBelowFloorError)):
		kind = "AddBelowFloorError"
	case errors.As(err, &sv):
		kind = "SameTsViolation"
	}
	if kind == "" {
		return fmt.Sprintf("error: %v", err)
	}
	return fmt.Sprintf("error: %s: %v", kind, err)
}

func withErr(err error, state string) string {
	if err == nil {
		return state
	}
	return errText(err) + "\n" + state
}

func fmtList(ts []uint64) string {
	s := make([]string, len(ts))
	for i, v := range ts {
		s[i] = strconv.FormatUint(v, 10)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// strList reads key=(a,b,c); key=() is the empty list.
func strList(t *testing.T, d *datadriven.TestData, key string) []string {
	arg, ok := d.Arg(key)
	if !ok {
		d.Fatalf(t, "%s needs %s=(...)", d.Cmd, key)
	}
	var out []string
	for _, v := range arg.Vals {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func uintList(t *testing.T, d *datadriven.TestData, key string) []uint64 {
	var out []uint64
	for _, v := range strList(t, d, key) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "%s: bad ts %q", key, v)
		}
		out = append(out, n)
	}
	return out
}

func int64List(t *testing.T, d *datadriven.TestData, key string) []int64 {
	var out []int64
	for _, v := range strList(t, d, key) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "%s: bad id %q", key, v)
		}
		out = append(out, n)
	}
	return out
}
