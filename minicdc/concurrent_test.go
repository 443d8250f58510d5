package minicdc

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/schemastore"
)

// testSeed returns MINICDC_SEED when set, else a fixed default; the seed is
// printed when the test fails.
func testSeed(t *testing.T) int64 {
	seed := int64(20261129)
	if s := os.Getenv("MINICDC_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad MINICDC_SEED %q", s)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with MINICDC_SEED=%d)", seed, seed)
		}
	})
	return seed
}

// invariantSink checks, at every callback, the runtime's cross-path
// guarantees against the full script of what the feeders will send.
type invariantSink struct {
	t        *testing.T
	mu       sync.Mutex
	rows     map[int64][]uint64 // table -> commit ts of every row the feeder sends
	got      map[int64]map[uint64]int
	ddls     []uint64 // all DDL FinishedTs, ascending
	gotDDLs  []uint64
	lastCP   Checkpoint
	final    uint64
	finished chan struct{}
	errs     []string
}

func (s *invariantSink) failf(format string, args ...any) {
	if len(s.errs) < 10 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
}

func (s *invariantSink) OnRowChanged(_ context.Context, ev RowChanged) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[ev.TableID][ev.CommitTs]++
	return nil
}

// allRowsUpTo reports whether every row of table with commit_ts <= ts was
// delivered.
func (s *invariantSink) missingRow(table int64, ts uint64) (uint64, bool) {
	for _, c := range s.rows[table] {
		if c <= ts && s.got[table][c] == 0 {
			return c, true
		}
	}
	return 0, false
}

func (s *invariantSink) OnDDL(_ context.Context, ev DDL) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := ev.FinishedTs
	for table := range s.rows { // M30: same-ts rule over every table
		if c, missing := s.missingRow(table, ts); missing {
			s.failf("OnDDL(%d) before row table %d commit %d", ts, table, c)
		}
	}
	if n := len(s.gotDDLs); n > 0 && s.gotDDLs[n-1] >= ts {
		s.failf("DDL %d after DDL %d", ts, s.gotDDLs[n-1])
	}
	s.gotDDLs = append(s.gotDDLs, ts)
	return nil
}

func (s *invariantSink) OnCheckpoint(_ context.Context, cp Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for table, ts := range cp.TableResolvedTs {
		if c, missing := s.missingRow(table, ts); missing { // M26
			s.failf("checkpoint table %d at %d before row commit %d", table, ts, c)
		}
		for _, d := range s.ddls { // M36
			if d <= ts && (len(s.gotDDLs) == 0 || s.gotDDLs[len(s.gotDDLs)-1] < d) {
				s.failf("checkpoint table %d at %d before DDL %d", table, ts, d)
			}
		}
		if prev, ok := s.lastCP.TableResolvedTs[table]; ok && ts < prev { // M39
			s.failf("checkpoint table %d regressed %d -> %d", table, prev, ts)
		}
	}
	s.lastCP = cp
	if cp.GlobalResolvedTs >= s.final {
		select {
		case <-s.finished:
		default:
			close(s.finished)
		}
	}
	return nil
}

// TestM30_ConcurrentPathsKeepCrossPathRules runs the real control loop on
// real time against feeders on their own goroutines (like a KV source's
// per-span delivery), with rows out of commit order inside each resolved
// interval and DDLs at random timestamps, some equal to row commit ts.
func TestM30_ConcurrentPathsKeepCrossPathRules(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	tables := []int64{11, 12, 13}
	const startTs, final = 100, 2000

	type step struct {
		rows     []uint64
		resolved uint64
	}
	script := map[int64][]step{}
	sink := &invariantSink{t: t, rows: map[int64][]uint64{}, got: map[int64]map[uint64]int{}, final: final, finished: make(chan struct{})}
	for _, id := range tables {
		sink.got[id] = map[uint64]int{}
		var resolved uint64 = startTs
		for resolved < final {
			next := min(resolved+uint64(1+rng.Intn(40)), final)
			var rows []uint64
			for c := resolved + 1; c <= next; c++ {
				if rng.Intn(3) == 0 {
					rows = append(rows, c)
				}
			}
			rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			script[id] = append(script[id], step{rows: rows, resolved: next})
			sink.rows[id] = append(sink.rows[id], rows...)
			resolved = next
		}
	}

	j := &journal{}
	store := newFakeStore(j)
	for _, id := range tables {
		store.addVersion(id, 0)
	}
	for ts := uint64(startTs + 1); ts < final; ts++ {
		if rng.Intn(25) == 0 {
			store.addDDL(schemastore.DDLEvent{JobID: int64(ts), FinishedTs: ts, TableID: tables[rng.Intn(len(tables))]})
			sink.ddls = append(sink.ddls, ts)
		}
	}
	store.setResolved(final + 100)
	src := newFakeSource(j)
	src.initialResolved = func(_ int64, ts uint64) (uint64, bool) { return ts, true }
	deps := Deps{
		Clock: &fakeClock{ts: 5000}, SchemaStore: store, Source: src,
		NewDecoder: func(int64) (RowDecoder, error) { return fakeDecoder{}, nil },
		TableSpan:  spanOf,
	}
	opts := Options{DDLPollInterval: time.Millisecond, CheckpointInterval: time.Millisecond}
	rt, err := Start(context.Background(), StartConfig{TableIDs: tables, StartTs: startTs, DDLPollLimit: 3}, deps, sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	var wg sync.WaitGroup
	for _, id := range tables {
		c := src.consumer(id)
		steps := script[id]
		feedRng := rand.New(rand.NewSource(seed + id))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, st := range steps {
				batch := make([]kvevent.RawKVEntry, 0, len(st.rows))
				for _, c := range st.rows {
					batch = append(batch, put(fmt.Sprintf("k%d", c), c, "v"))
				}
				// Deliver in one or two batches, then the resolved ts.
				cut := 0
				if len(batch) > 0 {
					cut = feedRng.Intn(len(batch) + 1)
				}
				c.ConsumeKV(batch[:cut])
				c.ConsumeKV(batch[cut:])
				c.AdvanceResolvedTs(st.resolved)
			}
		}()
	}
	wg.Wait()
	select {
	case <-sink.finished:
	case <-rt.Done():
		t.Fatalf("runtime stopped: %v", rt.Err())
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("final checkpoint never came")
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, e := range sink.errs {
		t.Error(e)
	}
	if len(sink.gotDDLs) != len(sink.ddls) {
		t.Errorf("delivered %d DDLs, want %d", len(sink.gotDDLs), len(sink.ddls))
	}
	for _, id := range tables {
		for _, c := range sink.rows[id] {
			if n := sink.got[id][c]; n != 1 {
				t.Errorf("table %d row %d delivered %d times", id, c, n)
			}
		}
	}
}
