package snapshot

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs testdata/*.txt: the pure plan and progress (SN2-SN4,
// SN8). Keys are written as plain strings; "" is +inf for an end.
//
//	split start=a end=z bounds=(m,c,c,zz)    split a span at region bounds
//	state ts=100 table=shop.t id=5 split=(a,z,m)   new state, one table (repeatable)
//	ack t=0 r=1 next=q rows=3 [done]
//	pending
//	show
//	check
//	progress-begin at=0s
//	progress-rows table=shop.t rows=10 [range-done]
//	progress-finish table=shop.t at=3s
//	progress at=2s
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var st *State
		var prog *Progress
		t0 := time.Unix(1000, 0)
		at := func(d *datadriven.TestData) time.Time {
			var s string
			d.ScanArgs(t, "at", &s)
			dur, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "bad at=%q", s)
			}
			return t0.Add(dur)
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "split":
				var start, end string
				d.ScanArgs(t, "start", &start)
				d.ScanArgs(t, "end", &end)
				var bounds [][]byte
				if arg, ok := d.Arg("bounds"); ok {
					for _, v := range arg.Vals {
						bounds = append(bounds, []byte(v))
					}
				}
				rs, err := SplitSpan([]byte(start), []byte(end), bounds)
				if err != nil {
					return "error: " + err.Error()
				}
				return showRanges(rs)
			case "state":
				var ts uint64
				var name string
				var id int64
				d.ScanArgs(t, "ts", &ts)
				d.ScanArgs(t, "table", &name)
				d.ScanArgs(t, "id", &id)
				arg, _ := d.Arg("split")
				if len(arg.Vals) < 2 {
					d.Fatalf(t, "split=(start,end,bounds...)")
				}
				var bounds [][]byte
				for _, v := range arg.Vals[2:] {
					bounds = append(bounds, []byte(v))
				}
				rs, err := SplitSpan([]byte(arg.Vals[0]), []byte(arg.Vals[1]), bounds)
				if err != nil {
					return "error: " + err.Error()
				}
				if st == nil || st.Ts != ts {
					st = &State{Version: StateVersion, Ts: ts}
				}
				st.Tables = append(st.Tables, Table{Name: name, Collection: name, PhysicalID: id, Ranges: rs})
				return showState(st)
			case "ack":
				var tsk Task
				var next string
				var rows uint64
				d.ScanArgs(t, "t", &tsk.Table)
				d.ScanArgs(t, "r", &tsk.Range)
				d.MaybeScanArgs(t, "next", &next)
				d.MaybeScanArgs(t, "rows", &rows)
				if err := st.Ack(tsk, []byte(next), rows, d.HasArg("done")); err != nil {
					return "error: " + err.Error()
				}
				return showState(st)
			case "pending":
				var out []string
				for _, p := range st.Pending() {
					out = append(out, fmt.Sprintf("t%d r%d from %q", p.Table, p.Range, st.Resume(p)))
				}
				if len(out) == 0 {
					return "(none)"
				}
				return strings.Join(out, "\n")
			case "show":
				return showState(st)
			case "check":
				if err := st.Check(); err != nil {
					return "error: " + err.Error()
				}
				return "ok"
			case "corrupt":
				// Break the state the way a bad file would.
				var what string
				d.ScanArgs(t, "what", &what)
				switch what {
				case "gap":
					st.Tables[0].Ranges[1].Start = append(st.Tables[0].Ranges[1].Start, 'x')
				case "next":
					st.Tables[0].Ranges[0].Next = []byte("~")
				case "version":
					st.Version = 99
				}
				return "ok"
			case "progress-begin":
				prog = &Progress{}
				prog.Begin(st, at(d))
				return showProgress(prog, at(d))
			case "progress-rows":
				var name string
				var rows uint64
				d.ScanArgs(t, "table", &name)
				d.ScanArgs(t, "rows", &rows)
				var task Task
				frac := -1.0
				if d.HasArg("range") {
					d.ScanArgs(t, "table-index", &task.Table)
					d.ScanArgs(t, "range", &task.Range)
				}
				if d.HasArg("frac") {
					d.ScanArgs(t, "frac", &frac)
				}
				prog.addRows(name, task, rows, d.HasArg("range-done"), frac)
				return "ok"
			case "progress-finish":
				var name string
				d.ScanArgs(t, "table", &name)
				prog.finish(name, at(d))
				return "ok"
			case "progress":
				return showProgress(prog, at(d))
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
				return ""
			}
		})
	})
}

func showRanges(rs []Range) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("[%q, %q)", r.Start, r.End))
	}
	return strings.Join(out, "\n")
}

func showState(st *State) string {
	out := []string{fmt.Sprintf("ts=%d", st.Ts)}
	for ti, t := range st.Tables {
		out = append(out, fmt.Sprintf("t%d %s id=%d rows=%d ranges %d/%d", ti, t.Name, t.PhysicalID, t.Rows(), t.RangesDone(), len(t.Ranges)))
		for ri, r := range t.Ranges {
			s := fmt.Sprintf("  r%d [%q, %q) rows=%d", ri, r.Start, r.End, r.Rows)
			if r.Done {
				s += " done"
			} else if r.Next != nil {
				s += fmt.Sprintf(" next=%q", r.Next)
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n")
}

func showProgress(p *Progress, now time.Time) string {
	var out []string
	for _, tp := range p.Report(now) {
		out = append(out, fmt.Sprintf("%s [%s] eta_s=%.1f", tp.Line(), tp.State, tp.ETASeconds))
	}
	return strings.Join(out, "\n")
}
