package minicdc

import (
	"testing"
	"time"
)

// steppedTimer is a pending After of a stepped fakeTime.
type steppedTimer struct {
	d  time.Duration
	ch chan time.Time
}

// newSteppedTime is virtual time whose timers fire only when the test
// fires them (fireShort).
func newSteppedTime() *fakeTime {
	f := newFakeTime()
	f.stepped = true
	return f
}

// afterCalls is how many waits the runtime asked for so far.
func (s *fakeTime) afterCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// fireShort fires every pending timer of at most limit, moving time
// forward by the longest of them, and reports how many fired.
func (s *fakeTime) fireShort(limit time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keep []steppedTimer
	var adv time.Duration
	n := 0
	for _, t := range s.timers {
		if t.d > limit {
			keep = append(keep, t)
			continue
		}
		adv = max(adv, t.d)
		n++
	}
	s.now = s.now.Add(adv)
	for _, t := range s.timers {
		if t.d <= limit {
			t.ch <- s.now
		}
	}
	s.timers = keep
	return n
}

// TestM34a_StoreBehindTablesRepollsSoon: the tables' resolved ts passed
// the schema store's (each comes through its own feed), so the checkpoint
// is capped by ddlKnown (M36) and no table report will wake the loop
// again. The loop must re-poll within PollBackoffMax, not sleep
// DDLPollInterval (an hour here): with only the short timers fired, the
// checkpoint at the store's new resolved ts comes. Without M34a the only
// timer is the hour and no checkpoint ever comes.
func TestM34a_StoreBehindTablesRepollsSoon(t *testing.T) {
	h := newHarness()
	st := newSteppedTime()
	h.deps.Time = st
	h.opts = Options{DDLPollInterval: time.Hour, PollBackoffMin: time.Millisecond, PollBackoffMax: 20 * time.Millisecond}
	h.prepare(10, 1)
	rt, err := h.start(t, StartConfig{TableIDs: []int64{1}, StartTs: 10, DDLPollLimit: 4})
	if err != nil {
		t.Fatal(err)
	}
	short := max(h.opts.PollBackoffMax, h.opts.withDefaults().CheckpointInterval)
	waitCheckpoint(t, h, st, 10, short)
	// The table reports 30 while the store is still at 10; the loop
	// wakes, polls, finds the checkpoint capped and goes to sleep (a new
	// timer); only then does the store catch up.
	settle(st)
	calls := st.afterCalls()
	h.src.consumer(1).AdvanceResolvedTs(30)
	for st.afterCalls() == calls {
		time.Sleep(time.Millisecond)
	}
	h.store.setResolved(30)
	waitCheckpoint(t, h, st, 30, short)
	if err := rt.Err(); err != nil {
		t.Fatal(err)
	}
}

// waitCheckpoint fires the timers of at most limit until a checkpoint at
// global ts want is emitted.
func waitCheckpoint(t *testing.T, h *harness, st *fakeTime, want uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		h.cb.mu.Lock()
		n := len(h.cb.cps)
		var got uint64
		if n > 0 {
			got = h.cb.cps[n-1].GlobalResolvedTs
		}
		h.cb.mu.Unlock()
		if got == want {
			return
		}
		st.fireShort(limit)
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no checkpoint at %d with only timers up to %v fired (M34a); checkpoints: %v", want, limit, h.cb.take())
}

// settle waits until the loop sleeps: its After calls stop changing.
func settle(st *fakeTime) {
	for last := -1; ; {
		time.Sleep(10 * time.Millisecond)
		n := st.afterCalls()
		if n == last {
			return
		}
		last = n
	}
}
