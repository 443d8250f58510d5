package snapshot

// The plan and its progress: which key ranges of which tables are read at
// S, and how far each got. Pure: no I/O, no clock (SN2-SN4).

import (
	"bytes"
	"errors"
	"fmt"
)

// StateVersion is the format of a saved State.
const StateVersion = 1

// Range is one key range of a table's record span: raw keys, End
// exclusive. It is one region's part of the span when planned (SN2);
// later splits or merges do not change it, since a snapshot scan of a key
// range reads across region boundaries.
type Range struct {
	Start []byte `json:"start"`
	End   []byte `json:"end"`
	// Next is where the scan resumes: every row of [Start, Next) was
	// acknowledged (nil: nothing yet).
	Next []byte `json:"next,omitempty"`
	Done bool   `json:"done,omitempty"`
	// Rows is the number of rows acknowledged in the range.
	Rows uint64 `json:"rows,omitempty"`
	// Bound, when set, is where the range's rows end as estimated when it
	// was planned (SN14: the cut key, or just past the last row): the
	// progress's fraction of the range read is measured against it (SN8).
	// Nil: unknown (a region's range may hold rows up to its end or none).
	Bound []byte `json:"bound,omitempty"`
}

// readFraction is the part of the range read once its scan resumes at
// next, from 0 to 1 with the keys read as numbers (-1: no Bound).
func (r *Range) readFraction(next []byte) float64 {
	if r.Bound == nil {
		return -1
	}
	if next == nil {
		return 0
	}
	return keyFraction(r.Start, next, r.Bound)
}

// resume is where the range's next scan starts.
func (r *Range) resume() []byte {
	if r.Next != nil {
		return r.Next
	}
	return r.Start
}

// Table is one physical table (one source partition) of the snapshot.
type Table struct {
	// Name is db.table (for messages), Collection the collection that
	// maps the partition.
	Name       string  `json:"name"`
	Collection string  `json:"collection"`
	PhysicalID int64   `json:"physical_id"`
	Ranges     []Range `json:"ranges"`
	// Finished: the partition's progress at S was stored (SN5).
	Finished bool `json:"finished,omitempty"`
}

// Rows is the number of rows acknowledged over the table's ranges.
func (t *Table) Rows() uint64 {
	var n uint64
	for i := range t.Ranges {
		n += t.Ranges[i].Rows
	}
	return n
}

// RangesDone counts the ranges read completely.
func (t *Table) RangesDone() int {
	n := 0
	for i := range t.Ranges {
		if t.Ranges[i].Done {
			n++
		}
	}
	return n
}

// AllRead reports whether every range was read completely.
func (t *Table) AllRead() bool { return t.RangesDone() == len(t.Ranges) }

// State is a snapshot's plan and progress, saved with the emulator's data
// (SN6).
type State struct {
	Version int `json:"version"`
	// Ts is the snapshot ts S; Epoch the epoch of the latest run's rows
	// (0 until the first run opened: the state is saved before it, SN6).
	Ts     uint64  `json:"ts"`
	Epoch  uint64  `json:"epoch"`
	Tables []Table `json:"tables"`
	// Complete: every table finished; the stream starts at Ts.
	Complete bool `json:"complete,omitempty"`
}

// Task names one range of one table.
type Task struct{ Table, Range int }

// SplitSpan splits the raw key range [start, end) at the region
// boundaries that fall strictly inside it (bounds in any order, raw keys;
// duplicates and boundaries outside are ignored): one range per region
// part, in key order (SN2). An empty end means +inf.
func SplitSpan(start, end []byte, bounds [][]byte) ([]Range, error) {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil, fmt.Errorf("snapshot: empty span [%x, %x)", start, end)
	}
	var inside [][]byte
	for _, b := range bounds {
		if bytes.Compare(b, start) > 0 && (len(end) == 0 || bytes.Compare(b, end) < 0) {
			inside = append(inside, b)
		}
	}
	sortKeys(inside)
	out := make([]Range, 0, len(inside)+1)
	cur := start
	for _, b := range inside {
		if bytes.Equal(b, cur) {
			continue
		}
		out = append(out, Range{Start: bytes.Clone(cur), End: bytes.Clone(b)})
		cur = b
	}
	return append(out, Range{Start: bytes.Clone(cur), End: bytes.Clone(end)}), nil
}

func sortKeys(ks [][]byte) {
	// Insertion sort: a table has few regions per planning call, and the
	// package stays free of reflection-based sorts in its pure core.
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && bytes.Compare(ks[j-1], ks[j]) > 0; j-- {
			ks[j-1], ks[j] = ks[j], ks[j-1]
		}
	}
}

// Pending lists the ranges not read completely, table by table, in key
// order (SN3).
func (s *State) Pending() []Task {
	var out []Task
	for ti := range s.Tables {
		for ri := range s.Tables[ti].Ranges {
			if !s.Tables[ti].Ranges[ri].Done {
				out = append(out, Task{Table: ti, Range: ri})
			}
		}
	}
	return out
}

// Resume is where task's next scan starts.
func (s *State) Resume(t Task) []byte { return s.Tables[t.Table].Ranges[t.Range].resume() }

// ErrBadAck is returned for an acknowledgement that does not fit the plan.
var ErrBadAck = errors.New("snapshot: acknowledgement does not fit the plan")

// Ack records that rows rows of task were acknowledged, up to (not
// including) next; done says the range was read to its end (SN3). next
// must not go backwards and must stay inside the range.
func (s *State) Ack(t Task, next []byte, rows uint64, done bool) error {
	if t.Table < 0 || t.Table >= len(s.Tables) || t.Range < 0 || t.Range >= len(s.Tables[t.Table].Ranges) {
		return fmt.Errorf("%w: no range %d of table %d", ErrBadAck, t.Range, t.Table)
	}
	tb := &s.Tables[t.Table]
	r := &tb.Ranges[t.Range]
	if r.Done {
		return fmt.Errorf("%w: %s range %d [%x, %x) is already done", ErrBadAck, tb.Name, t.Range, r.Start, r.End)
	}
	if !done {
		if bytes.Compare(next, r.resume()) < 0 || (len(r.End) > 0 && bytes.Compare(next, r.End) > 0) {
			return fmt.Errorf("%w: %s range %d [%x, %x): resume key %x outside [%x, end]", ErrBadAck, tb.Name, t.Range, r.Start, r.End, next, r.resume())
		}
		r.Next = bytes.Clone(next)
	} else {
		r.Next = nil
		r.Done = true
	}
	r.Rows += rows
	return nil
}

// Restart plans table t again from nothing (a new S for it, SN7).
func (s *State) Restart(t int, ranges []Range) {
	s.Tables[t].Ranges = ranges
	s.Tables[t].Finished = false
}

// Check validates a loaded state: version, S, ranges ordered and
// non-overlapping within each table, resume keys inside their range.
func (s *State) Check() error {
	if s.Version != StateVersion {
		return fmt.Errorf("snapshot: state version %d, this build reads %d", s.Version, StateVersion)
	}
	if s.Ts == 0 {
		return fmt.Errorf("snapshot: state without a ts")
	}
	for _, t := range s.Tables {
		if len(t.Ranges) == 0 {
			return fmt.Errorf("snapshot: table %s (physical %d) has no ranges", t.Name, t.PhysicalID)
		}
		for i, r := range t.Ranges {
			if len(r.End) > 0 && bytes.Compare(r.Start, r.End) >= 0 {
				return fmt.Errorf("snapshot: table %s range %d [%x, %x) is empty", t.Name, i, r.Start, r.End)
			}
			if i > 0 && !bytes.Equal(t.Ranges[i-1].End, r.Start) {
				return fmt.Errorf("snapshot: table %s range %d starts at %x, the previous one ends at %x", t.Name, i, r.Start, t.Ranges[i-1].End)
			}
			if r.Next != nil && (bytes.Compare(r.Next, r.Start) < 0 || (len(r.End) > 0 && bytes.Compare(r.Next, r.End) > 0)) {
				return fmt.Errorf("snapshot: table %s range %d resume key %x outside [%x, %x)", t.Name, i, r.Next, r.Start, r.End)
			}
			if r.Bound != nil && (bytes.Compare(r.Bound, r.Start) <= 0 || (len(r.End) > 0 && bytes.Compare(r.Bound, r.End) > 0)) {
				return fmt.Errorf("snapshot: table %s range %d progress bound %x outside (%x, %x]", t.Name, i, r.Bound, r.Start, r.End)
			}
		}
	}
	return nil
}
