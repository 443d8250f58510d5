package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/normalize"
)

// crashAfterBatches is the emulator as the bridge sees it, failing the
// ingest after `after` batches of one large transaction: the adapter dies
// between two batches of a spilled transaction, as a process killed in
// the middle of the drain would.
type crashAfterBatches struct {
	normalize.Sink
	after   int64
	big     atomic.Int64 // batches of the large transaction ingested
	bigTs   atomic.Uint64
	once    sync.Once
	crashed chan struct{}
}

// bigTxnBatchRows cuts the drain into batches small enough that the
// transaction takes many (N21).
const bigTxnBatchRows = 500

// errInjectedCrash is what the failing ingest returns.
var errInjectedCrash = errors.New("injected crash between two batches of a spilled transaction")

func (s *crashAfterBatches) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	// A full batch holds rows of the large transaction (small
	// transactions write a row or two each; batches are cut at
	// bigTxnBatchRows).
	if m := b.GetMutations(); len(m) == bigTxnBatchRows {
		if s.big.Load() >= s.after {
			s.bigTs.Store(m[len(m)-1].GetCommitTs())
			s.once.Do(func() { close(s.crashed) })
			return nil, errInjectedCrash
		}
		s.big.Add(1)
	}
	return s.Sink.Ingest(ctx, b)
}

// TestRS_RestartInTheMiddleOfASpilledDrain (RS3, RS4, N40, LP14; issue
// 15): a transaction larger than the memory quota spills (matcher and
// reorder buffer), its drain reaches the emulator in batches, and the
// adapter dies after a few of them. Until then safe_ts stays below the
// transaction's commit ts (a reader with min_ts at it waits); the spill
// files are gone after the stop; a new adapter over the same data dir and
// emulator (epoch + 1) resumes from the stored progress and the
// collection ends equal to the table, every row once. By default 30k rows
// within 2 MiB; SFEMU_BIGTXN_RESTART_ROWS sets the size.
func TestRS_RestartInTheMiddleOfASpilledDrain(t *testing.T) {
	rows := int64(30_000)
	if n := os.Getenv("SFEMU_BIGTXN_RESTART_ROWS"); n != "" {
		fmt.Sscan(n, &rows)
	}
	const quota = 2 << 20
	r := newBigTxnRig(t, quota)
	r.exec(t, "INSERT INTO shop.bulk VALUES (0, 0, 'first', 'x')")
	r.waitConsistent(t, bulkTables, 2*time.Minute)
	// The adapter the rig started is replaced by one whose sink fails.
	if err := r.a.Close(); err != nil {
		t.Fatal(err)
	}
	crash := &crashAfterBatches{after: 3, crashed: make(chan struct{})}
	cfg := Config{DataDir: r.dir, Tables: bulkTables, Memory: r.mem,
		WrapSink: func(s normalize.Sink) normalize.Sink { crash.Sink = s; return crash }}
	cfg.Bridge.MaxBatchRows = bigTxnBatchRows
	a, err := Start(r.ctx, r.up, r.emu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	epoch1 := a.Resume.Epoch
	bigTs := r.bigTxn(t, 1, rows, 8)
	select {
	case <-crash.crashed:
	case <-time.After(5 * time.Minute):
		t.Fatalf("the drain never reached batch %d (runtime: %v)", crash.after+1, a.RT.Err())
	}
	<-a.Done()
	if !errors.Is(a.RT.Err(), errInjectedCrash) {
		t.Fatalf("runtime stopped with %v, want the injected crash", a.RT.Err())
	}
	if got := crash.bigTs.Load(); got != bigTs {
		t.Fatalf("crashed on a batch of commit ts %d, want the large transaction's %d", got, bigTs)
	}
	if crash.big.Load() != crash.after {
		t.Fatalf("%d batches of the transaction ingested before the crash, want %d", crash.big.Load(), crash.after)
	}
	if _, runs := a.MatcherSpill(); runs == 0 {
		t.Fatal("the matcher did not spill the transaction's prewrites")
	}
	// N22: progress never passed a transaction only partly ingested.
	st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: bulkTables[0].CollectionName()})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetSafeTs() >= bigTs {
		t.Fatalf("safe_ts %d reached the partly ingested transaction's commit ts %d", st.GetSafeTs(), bigTs)
	}
	if err := a.Close(); !errors.Is(err, errInjectedCrash) && err != nil {
		t.Fatalf("close: %v", err)
	}
	// RS4: nothing of the stopped adapter stays on disk.
	if ents, err := os.ReadDir(SpillDir(r.dir)); err != nil || len(ents) != 0 {
		t.Fatalf("spill dir after the stop: %d files (%v)", len(ents), err)
	}
	r.start(t)
	if r.a.Resume.Epoch <= epoch1 {
		t.Fatalf("epoch %d after the restart, want > %d", r.a.Resume.Epoch, epoch1)
	}
	r.waitConsistent(t, bulkTables, 5*time.Minute)
	if r.mem.Quota.Peak() > quota {
		t.Fatalf("memory quota passed: peak %d of %d", r.mem.Quota.Peak(), quota)
	}
	if ents, err := os.ReadDir(SpillDir(r.dir)); err != nil || len(ents) != 0 {
		t.Fatalf("spill dir after the drain: %d files (%v)", len(ents), err)
	}
}
