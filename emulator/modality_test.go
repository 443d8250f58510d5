package emulator

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/searchfabric/sfemu/emulator/docstore"
)

// E51: an async modality that is behind applies everything queued (up to
// maxCoalesce changes) as one batch and reports the marks taken with it
// afterwards, in queue order: a mark is reported only once every change
// queued before it is applied, and never before.
func TestAsyncIndexCoalescesAndOrdersMarks(t *testing.T) {
	type event struct {
		apply int    // number of changes applied, 0 for a mark
		first string // first key of an apply
		mark  string // partition@ts of a mark
	}
	var mu sync.Mutex
	var events []event
	applied := map[string]bool{}
	gate := make(chan struct{})
	calls := 0
	apply := func(ch []docstore.Change) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			<-gate // hold the worker so the rest queues up
		}
		mu.Lock()
		defer mu.Unlock()
		events = append(events, event{apply: len(ch), first: ch[0].PK})
		for _, c := range ch {
			applied[c.PK] = true
		}
		return nil
	}
	// queuedBefore[mark] lists the keys queued before that mark.
	queuedBefore := map[string][]string{}
	var queued []string
	var errs []string
	onMark := func(w *asyncIndex, partition string, ts uint64) {
		mu.Lock()
		defer mu.Unlock()
		m := fmt.Sprintf("%s@%d", partition, ts)
		for _, pk := range queuedBefore[m] {
			if !applied[pk] {
				errs = append(errs, fmt.Sprintf("mark %s reported before %s was applied", m, pk))
			}
		}
		events = append(events, event{mark: m})
	}
	w := newAsyncIndex("text", apply, onMark)
	defer func() { w.stop(); <-w.done }()

	batch := func(from, n int) []docstore.Change {
		out := make([]docstore.Change, n)
		for i := range out {
			out[i] = docstore.Change{PK: strconv.Itoa(from + i), New: &docstore.Entry{Version: 1}}
			queued = append(queued, out[i].PK)
		}
		return out
	}
	w.enqueueChanges(batch(0, 10)) // taken alone, held at the gate
	for w.queueLen() != 0 {
		runtime.Gosched()
	}
	next := 10
	var marks []string
	for ts := uint64(1); ts <= 30; ts++ {
		n := 200
		w.enqueueChanges(batch(next, n))
		next += n
		p := "table:" + strconv.Itoa(int(ts%2))
		m := fmt.Sprintf("%s@%d", p, ts)
		mu.Lock()
		queuedBefore[m] = append([]string(nil), queued...)
		mu.Unlock()
		marks = append(marks, m)
		w.enqueueMark(p, ts)
	}
	close(gate)
	w.waitIdle()

	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	var gotMarks []string
	applies := 0
	for _, e := range events {
		if e.mark != "" {
			gotMarks = append(gotMarks, e.mark)
		} else {
			applies++
			if e.apply > maxCoalesce {
				t.Errorf("apply of %d changes exceeds maxCoalesce %d", e.apply, maxCoalesce)
			}
		}
	}
	if fmt.Sprint(gotMarks) != fmt.Sprint(marks) {
		t.Fatalf("marks reported %v, want %v in queue order", gotMarks, marks)
	}
	// 10 held + 6000 queued changes: the queued ones take ceil(6000/4096)
	// applies at most, not one per batch or per mark.
	if want := 1 + (6000+maxCoalesce-1)/maxCoalesce; applies > want {
		t.Fatalf("%d applies for 31 queued batches, want <= %d (coalesced)", applies, want)
	}
	if len(applied) != next {
		t.Fatalf("applied %d keys, want %d", len(applied), next)
	}
}
