package reorder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/searchfabric/sfemu/memquota"
)

// firedTimer's window has always passed already: a blocked Add makes its
// last attempt at once, so an overflow prints deterministically.
type firedTimer struct{}

func (firedTimer) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

// TestScripts runs the ordering scenarios in testdata/*.txt against one
// partition's Waiter (and its Buffer), with an in-memory run store.
//
// Commands:
//
//	new [rows=N] [bytes=N] [quota=N] [spill-quota=N] [spill] [rec=N] [window=5s] [chunk=N]
//	                      a buffer of partition table:42 (defaults: rows=100
//	                      bytes=1000000, no quota, no spill, rec=10 disk bytes
//	                      per spilled row, window=0, chunk=2 rows)
//	add                   input lines: <tag> <commit_ts> [size]  (size 10)
//	seal-checkpoint ts=N
//	seal-ddl ts=N
//	drain [n=N]           prints <tag>@<ts> in drain order
//	ack                   removes drained runs, prints them
//	state                 memory, disk and quota counters
//	damage run=N at=K     reading run N fails at row K
//	fail-stage n=N        the n-th staged spill row (from now) fails
//	hold n=N              another partition takes N bytes of the memory quota
//	discard
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			w     *Waiter[string]
			store *memStore[string]
			mem   *memquota.Quota
			disk  *memquota.Quota
		)
		ctx := context.Background()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "new" && w == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			errText := func(err error) string {
				if err == nil {
					return "ok"
				}
				return "error: " + err.Error()
			}
			switch d.Cmd {
			case "new":
				cfg := Config{Partition: "table:42", MaxUnsealedRows: 100, MaxUnsealedBytes: 1_000_000}
				d.MaybeScanArgs(t, "rows", &cfg.MaxUnsealedRows)
				d.MaybeScanArgs(t, "bytes", &cfg.MaxUnsealedBytes)
				mem, disk = nil, nil
				if d.HasArg("quota") {
					var q int64
					d.ScanArgs(t, "quota", &q)
					var err error
					if mem, err = memquota.New("memory-quota", q); err != nil {
						return errText(err)
					}
				}
				if d.HasArg("spill-quota") {
					var q int64
					d.ScanArgs(t, "spill-quota", &q)
					var err error
					if disk, err = memquota.New("spill-quota", q); err != nil {
						return errText(err)
					}
				}
				cfg.Memory, cfg.Disk = mem, disk
				if mem != nil || disk != nil {
					cfg.Hint = "raise --memory-quota or --spill-quota"
				}
				rec := int64(10)
				d.MaybeScanArgs(t, "rec", &rec)
				var opts []Option[string]
				store = nil
				if d.HasArg("spill") {
					store = newMemStore[string](rec)
					opts = append(opts, WithRuns[string](store))
				}
				if d.HasArg("merge") {
					var runs, small int
					d.ScanArgs(t, "merge", &runs)
					d.ScanArgs(t, "small", &small)
					opts = append(opts, WithRunMerge[string](runs, small))
				}
				var window time.Duration
				if d.HasArg("window") {
					var s string
					d.ScanArgs(t, "window", &s)
					var err error
					if window, err = time.ParseDuration(s); err != nil {
						d.Fatalf(t, "bad window %q", s)
					}
				}
				shift := uint(1)
				d.MaybeScanArgs(t, "chunk", &shift)
				b, err := newBuffer[string](cfg, shift, opts...)
				if err != nil {
					return errText(err)
				}
				w = &Waiter[string]{buf: b, sealCh: make(chan struct{}), timer: firedTimer{}, window: window}
				return "ok"
			case "add":
				var out []string
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					if len(f) < 2 {
						d.Fatalf(t, "add: want <tag> <ts> [size], got %q", line)
					}
					ts, err := strconv.ParseUint(f[1], 10, 64)
					if err != nil {
						d.Fatalf(t, "add: bad ts %q", f[1])
					}
					size := int64(10)
					if len(f) > 2 {
						if size, err = strconv.ParseInt(f[2], 10, 64); err != nil {
							d.Fatalf(t, "add: bad size %q", f[2])
						}
					}
					var runsBefore uint64
					var diskBefore int
					_ = w.Do(func(b *Buffer[string]) error {
						runsBefore, diskBefore = b.spills, b.spilledRows
						return nil
					})
					err = w.Add(ctx, ts, size, f[0])
					where := ""
					_ = w.Do(func(b *Buffer[string]) error {
						inMemory := err == nil && b.n > 0 && b.at(b.n-1).Value == f[0] && b.at(b.n-1).Ordinal == b.next-1
						moved := b.spilledRows - diskBefore
						if err == nil && !inMemory {
							moved-- // the row itself
						}
						if b.spills > runsBefore && moved > 0 {
							where = fmt.Sprintf("spilled %d rows; ", moved)
						}
						switch {
						case inMemory:
							where += "memory"
						case err == nil:
							where += "disk"
						}
						return nil
					})
					if err != nil {
						out = append(out, fmt.Sprintf("%s@%d: %s%s", f[0], ts, where, errText(err)))
						continue
					}
					out = append(out, fmt.Sprintf("%s@%d: %s", f[0], ts, where))
				}
				return strings.Join(out, "\n")
			case "seal-checkpoint", "seal-ddl":
				var ts uint64
				d.ScanArgs(t, "ts", &ts)
				return errText(w.Seal(ts, d.Cmd == "seal-ddl"))
			case "drain":
				n := -1
				d.MaybeScanArgs(t, "n", &n)
				got, err := w.Take(nil, n)
				var tags []string
				for _, it := range got {
					tags = append(tags, fmt.Sprintf("%s@%d", it.Value, it.CommitTs))
				}
				s := "(none)"
				if len(tags) > 0 {
					s = strings.Join(tags, " ")
				}
				if err != nil {
					s += "\n" + errText(err)
				}
				return s
			case "ack":
				before := 0
				if store != nil {
					before = len(store.removed)
				}
				err := w.Acknowledge()
				var removed []string
				if store != nil {
					removed = store.removed[before:]
				}
				if len(removed) == 0 {
					return "removed (none)\n" + errText(err)
				}
				return "removed " + strings.Join(removed, " ") + "\n" + errText(err)
			case "state":
				var s string
				_ = w.Do(func(b *Buffer[string]) error {
					rows, bytes := b.Unsealed()
					sp := b.Spilled()
					s = fmt.Sprintf("memory: rows=%d sealed=%d unsealed=%d unsealed-bytes=%d held=%d\ndisk: rows=%d bytes=%d files=%d runs=%d\nquota: memory=%d spill=%d",
						b.n, b.Sealed(), rows, bytes, b.Held(), sp.Rows, sp.Bytes, sp.Files, sp.Runs, mem.Used(), disk.Used())
					if sp.Merges > 0 {
						s += fmt.Sprintf(" merges=%d", sp.Merges)
					}
					if m, ok := b.MinUnsealedTs(); ok {
						s += fmt.Sprintf("\nmin-unsealed>=%d", m)
					}
					return nil
				})
				return s
			case "damage":
				var run, at int
				d.ScanArgs(t, "run", &run)
				d.ScanArgs(t, "at", &at)
				store.damage[fmt.Sprintf("table:42/run-%d", run)] = at
				return "ok"
			case "fail-stage":
				var n int
				d.ScanArgs(t, "n", &n)
				store.failStage = store.stages + n
				return "ok"
			case "hold":
				var n int64
				d.ScanArgs(t, "n", &n)
				if n >= 0 {
					mem.Force(n)
				} else {
					mem.Release(-n)
				}
				return fmt.Sprintf("quota: memory=%d", mem.Used())
			case "discard":
				err := w.Discard()
				return fmt.Sprintf("%s\nquota: memory=%d spill=%d", errText(err), mem.Used(), disk.Used())
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// TestScriptErrorsAreTyped: the errors the scripts print are the typed
// errors the bridge matches on.
func TestScriptErrorsAreTyped(t *testing.T) {
	mem, _ := memquota.New("memory-quota", 100)
	b, err := New[string](Config{Partition: "p", Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	w := &Waiter[string]{buf: b, sealCh: make(chan struct{}), timer: firedTimer{}, window: time.Second}
	if err := w.Add(context.Background(), 1, 30, "a"); err != nil {
		t.Fatal(err)
	}
	err = w.Add(context.Background(), 2, 30, "b")
	var oe *OverflowError
	if !errors.As(err, &oe) || oe.Bound != BoundMemory || oe.Waited != time.Second {
		t.Fatalf("want a memory-quota overflow after the window, got %v", err)
	}
}
