package minicdc

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// notifyingStore is the fake store with a progress announcement
// (StoreNotifier), like upstream/schemastore's.
type notifyingStore struct {
	*fakeStore
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifyingStore) ResolvedAdvanced() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// advance raises the resolved ts and announces it.
func (n *notifyingStore) advance(ts uint64) {
	n.fakeStore.setResolved(ts)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

func notifyingHarness() (*harness, *notifyingStore, *fakeTime) {
	h := newHarness()
	ns := &notifyingStore{fakeStore: h.store}
	h.deps.SchemaStore = ns
	st := newSteppedTime()
	h.deps.Time = st
	return h, ns, st
}

// TestM22_StoreNotifierWakesSchemaWait: a row above the store's resolved
// ts waits for the store (M22); a store that announces its progress wakes
// the wait at once. No timer ever fires here, so without the announcement
// the row would wait for the backoff timer forever.
func TestM22_StoreNotifierWakesSchemaWait(t *testing.T) {
	h, ns, _ := notifyingHarness()
	h.prepare(10, 1)
	if _, err := h.start(t, StartConfig{TableIDs: []int64{1}, StartTs: 10, DDLPollLimit: 4}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.src.consumer(1).ConsumeKV([]kvevent.RawKVEntry{put("a", 21, "v")})
	}()
	select {
	case <-done:
		t.Fatal("M22: the row was delivered before the store reached commit_ts-1")
	case <-time.After(20 * time.Millisecond):
	}
	ns.advance(25)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the store's announcement did not wake the schema wait (M22)")
	}
	if log := strings.Join(h.cb.take(), "\n"); !strings.Contains(log, "row table=1 commit=21") {
		t.Fatalf("row not delivered: %s", log)
	}
}

// TestM34_StoreNotifierWakesControlLoop: the table reported past the store
// and the loop went to sleep; the store's announcement wakes it, so the
// checkpoint follows with only the checkpoint interval's timer fired (the
// poll interval and the M34a backoff are an hour here).
func TestM34_StoreNotifierWakesControlLoop(t *testing.T) {
	h, ns, st := notifyingHarness()
	h.opts = Options{DDLPollInterval: time.Hour, PollBackoffMin: time.Hour, PollBackoffMax: time.Hour}
	h.prepare(10, 1)
	if _, err := h.start(t, StartConfig{TableIDs: []int64{1}, StartTs: 10, DDLPollLimit: 4}); err != nil {
		t.Fatal(err)
	}
	cpDue := h.opts.withDefaults().CheckpointInterval // fire only the coalescing timer (M38)
	waitCheckpoint(t, h, st, 10, cpDue)
	settle(st)
	calls := st.afterCalls()
	h.src.consumer(1).AdvanceResolvedTs(30)
	for st.afterCalls() == calls { // the loop polled the store at 10 and sleeps
		time.Sleep(time.Millisecond)
	}
	ns.advance(30)
	waitCheckpoint(t, h, st, 30, cpDue)
}
