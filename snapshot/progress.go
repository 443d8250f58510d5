package snapshot

// Progress of a running snapshot, for the terminal and /v1/progress
// (SN8). The counters are updated by the runner; Report derives rates and
// ETAs from a time the caller passes in.

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// TableProgress is one table's progress at a moment.
type TableProgress struct {
	Table       string  `json:"table"`
	Collection  string  `json:"collection"`
	Ts          uint64  `json:"snapshot_ts"`
	Rows        uint64  `json:"rows"`
	RangesDone  int     `json:"ranges_done"`
	RangesTotal int     `json:"ranges_total"`
	RowsPerSec  float64 `json:"rows_per_sec"`
	// ETASeconds estimates the time left from the ranges still to read
	// at the table's rate so far, a range in the middle counted by the
	// part of its progress bound read (-1: unknown yet).
	ETASeconds float64 `json:"eta_seconds"`
	// State: "waiting", "reading", "done" (every range read and the
	// partitions' progress stored at S).
	State string `json:"state"`
}

// Line is the terminal form of p.
func (p TableProgress) Line() string {
	eta := "?"
	switch {
	case p.State == "done":
		eta = "done"
	case p.ETASeconds >= 0:
		eta = (time.Duration(p.ETASeconds * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("snapshot %s at ts %d: %d rows, ranges %d/%d, %.0f rows/s, eta %s", p.Table, p.Ts, p.Rows, p.RangesDone, p.RangesTotal, p.RowsPerSec, eta)
}

// tableCounters are one logical table's counters (its physical tables
// summed).
type tableCounters struct {
	collection     string
	ts             uint64
	rows, baseRows uint64 // baseRows: acknowledged before this run
	done, total    int
	baseDone       int
	// partial sums the read fractions of the ranges being read that have
	// a progress bound (SN8, SN14); basePartial is Begin's.
	partial, basePartial float64
	partsLeft            int
	started, finished    time.Time
}

// Progress collects the counters of the snapshots of one adapter. It is
// safe for concurrent use; the zero value is empty and usable.
type Progress struct {
	mu     sync.Mutex
	tables map[string]*tableCounters
	order  []string
	frac   map[fracKey]float64 // read fraction of each range counted in partial
}

// fracKey names a range of a table's current snapshot.
type fracKey struct {
	name string
	t    Task
}

func (p *Progress) table(name string) *tableCounters {
	if p.tables == nil {
		p.tables = map[string]*tableCounters{}
	}
	c, ok := p.tables[name]
	if !ok {
		c = &tableCounters{}
		p.tables[name] = c
		p.order = append(p.order, name)
	}
	return c
}

// Begin registers the state's tables as of now (resumed counts are kept
// apart so the rate counts only this run's rows).
func (p *Progress) Begin(st *State, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for i := range st.Tables {
		t := &st.Tables[i]
		c := p.table(t.Name)
		if !seen[t.Name] {
			seen[t.Name] = true
			*c = tableCounters{collection: t.Collection, ts: st.Ts, started: now}
			for k := range p.frac {
				if k.name == t.Name {
					delete(p.frac, k) // an earlier snapshot's
				}
			}
		}
		c.total += len(t.Ranges)
		c.done += t.RangesDone()
		c.baseDone += t.RangesDone()
		c.rows += t.Rows()
		c.baseRows += t.Rows()
		if !t.Finished {
			c.partsLeft++
		}
		for ri := range t.Ranges {
			r := &t.Ranges[ri]
			if f := r.readFraction(r.Next); !r.Done && f > 0 {
				p.setFrac(c, fracKey{t.Name, Task{Table: i, Range: ri}}, f)
				c.basePartial += f
			}
		}
	}
	for _, name := range p.order {
		if c := p.tables[name]; seen[name] && c.partsLeft == 0 {
			c.finished = now
		}
	}
}

// addRows counts rows acknowledged for table name in range t; rangeDone
// that the range was read completely, else frac is the part of it read
// (-1: unknown).
func (p *Progress) addRows(name string, t Task, rows uint64, rangeDone bool, frac float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.table(name)
	c.rows += rows
	if rangeDone {
		p.setFrac(c, fracKey{name, t}, 0)
		c.done++
	} else if frac >= 0 {
		p.setFrac(c, fracKey{name, t}, frac)
	}
}

// setFrac records range t's read fraction in c's partial sum (0 removes
// it).
func (p *Progress) setFrac(c *tableCounters, k fracKey, f float64) {
	if p.frac == nil {
		p.frac = map[fracKey]float64{}
	}
	c.partial += f - p.frac[k]
	if f == 0 {
		delete(p.frac, k)
	} else {
		p.frac[k] = f
	}
}

// finish records that one physical table of name stored its progress.
func (p *Progress) finish(name string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.table(name)
	if c.partsLeft > 0 {
		c.partsLeft--
	}
	if c.partsLeft == 0 {
		c.finished = now
	}
}

// Report is every table's progress at now, in the order they were begun.
func (p *Progress) Report(now time.Time) []TableProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]TableProgress, 0, len(p.order))
	for _, name := range p.order {
		c := p.tables[name]
		tp := TableProgress{Table: name, Collection: c.collection, Ts: c.ts, Rows: c.rows, RangesDone: c.done, RangesTotal: c.total, ETASeconds: -1}
		end := now
		if !c.finished.IsZero() {
			end = c.finished
		}
		if el := end.Sub(c.started).Seconds(); el > 0 {
			tp.RowsPerSec = float64(c.rows-c.baseRows) / el
			units := float64(c.done) + c.partial
			if run := units - float64(c.baseDone) - c.basePartial; run > 0 && c.done < c.total {
				tp.ETASeconds = el / run * max(float64(c.total)-units, 0)
			}
		}
		switch {
		case !c.finished.IsZero():
			tp.State, tp.ETASeconds = "done", 0
		case c.rows > 0 || c.done > 0:
			tp.State = "reading"
		default:
			tp.State = "waiting"
		}
		out = append(out, tp)
	}
	return out
}

// Active reports whether some table has not finished.
func (p *Progress) Active() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.tables {
		if c.finished.IsZero() {
			return true
		}
	}
	return false
}

// Tables lists the table names known, sorted.
func (p *Progress) Tables() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]string(nil), p.order...)
	sort.Strings(out)
	return out
}
