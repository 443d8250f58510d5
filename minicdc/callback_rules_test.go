package minicdc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// ctxRecorder is the recorder plus the contexts its row and checkpoint
// callbacks were given.
type ctxRecorder struct {
	*recorder
	mu   sync.Mutex
	ctxs []context.Context
}

func (c *ctxRecorder) keep(ctx context.Context) {
	c.mu.Lock()
	c.ctxs = append(c.ctxs, ctx)
	c.mu.Unlock()
}

func (c *ctxRecorder) OnRowChanged(ctx context.Context, ev RowChanged) error {
	c.keep(ctx)
	return c.recorder.OnRowChanged(ctx, ev)
}

func (c *ctxRecorder) OnCheckpoint(ctx context.Context, cp Checkpoint) error {
	c.keep(ctx)
	return c.recorder.OnCheckpoint(ctx, cp)
}

// TestM10_CallbacksGetTheRootContext: the row and checkpoint callbacks get
// a live context while the runtime runs, and that context is cancelled by
// the shutdown (rule M10).
func TestM10_CallbacksGetTheRootContext(t *testing.T) {
	h := newHarness()
	h.prepare(100, 1)
	cb := &ctxRecorder{recorder: h.cb}
	rt, err := Start(context.Background(), StartConfig{TableIDs: []int64{1}, StartTs: 10, DDLPollLimit: 1}, h.deps, cb, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	h.src.consumer(1).ConsumeKV([]kvevent.RawKVEntry{put("a", 11, "v")})
	h.src.consumer(1).AdvanceResolvedTs(20)
	if _, _, err := rt.ctl.step(); err != nil {
		t.Fatal(err)
	}
	cb.mu.Lock()
	ctxs := append([]context.Context(nil), cb.ctxs...)
	cb.mu.Unlock()
	if len(ctxs) < 2 {
		t.Fatalf("want a row and a checkpoint callback, got %d calls: %q", len(ctxs), h.cb.take())
	}
	for i, ctx := range ctxs {
		if ctx.Err() != nil {
			t.Fatalf("callback %d got a context already done while running: %v", i, ctx.Err())
		}
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ctx := range ctxs {
		if ctx.Err() == nil {
			t.Fatalf("callback %d's context is still live after Close", i)
		}
	}
}

// blockingRecorder holds OnRowChanged of table 1 until released.
type blockingRecorder struct {
	*recorder
	entered chan int64
	release chan struct{}
}

func (c *blockingRecorder) OnRowChanged(ctx context.Context, ev RowChanged) error {
	c.entered <- ev.TableID
	if ev.TableID == 1 {
		<-c.release
	}
	return c.recorder.OnRowChanged(ctx, ev)
}

// TestM13_RowCallbacksPerPathOnTheDeliveringGoroutine (rule M13): a path's
// OnRowChanged runs on the goroutine that delivered the batch and has
// returned before the delivery does (so calls of one path are sequential),
// and a row callback of another path runs meanwhile (no lock across paths).
func TestM13_RowCallbacksPerPathOnTheDeliveringGoroutine(t *testing.T) {
	h := newHarness()
	h.prepare(100, 1, 2)
	cb := &blockingRecorder{recorder: h.cb, entered: make(chan int64, 4), release: make(chan struct{})}
	rt, err := Start(context.Background(), StartConfig{TableIDs: []int64{1, 2}, StartTs: 10, DDLPollLimit: 1}, h.deps, cb, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()

	delivered1 := make(chan struct{})
	go func() {
		h.src.consumer(1).ConsumeKV([]kvevent.RawKVEntry{put("a", 11, "v")})
		close(delivered1)
	}()
	if got := <-cb.entered; got != 1 {
		t.Fatalf("first callback for table %d, want 1", got)
	}
	select {
	case <-delivered1:
		t.Fatal("table 1's delivery returned before its OnRowChanged did")
	case <-time.After(20 * time.Millisecond):
	}
	delivered2 := make(chan struct{})
	go func() {
		h.src.consumer(2).ConsumeKV([]kvevent.RawKVEntry{put("x", 11, "v")})
		close(delivered2)
	}()
	select {
	case got := <-cb.entered:
		if got != 2 {
			t.Fatalf("callback for table %d, want 2", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("table 2's row waited for table 1's callback: paths are serialized")
	}
	<-delivered2
	close(cb.release)
	<-delivered1
	if log := h.cb.take(); len(log) != 2 {
		t.Fatalf("callbacks %q", log)
	}
}
