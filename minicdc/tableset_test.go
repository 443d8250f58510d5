package minicdc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/schemafence"
)

// TestM54_ChangeTablesWithTheControlLoopRunning: ChangeTables from another
// goroutine is applied by the running control loop and answered; the added
// table is subscribed at the TSO and reported by checkpoints; the removed
// one is not any more. A ChangeTablesInDDL outside OnDDL is refused.
func TestM54_ChangeTablesWithTheControlLoopRunning(t *testing.T) {
	h := newHarness()
	h.opts = Options{CheckpointInterval: time.Millisecond, DDLPollInterval: 5 * time.Millisecond}
	h.prepare(1000, 1, 2, 3)
	rt, err := h.start(t, StartConfig{TableIDs: []int64{1, 2}, StartTs: 10, DDLPollLimit: 10})
	if err != nil {
		t.Fatal(err)
	}

	if err := rt.ChangeTablesInDDL(TableChange{Add: []int64{3}, StartTs: 10}); !errors.Is(err, ErrTableChangeOutsideDDL) {
		t.Fatalf("ChangeTablesInDDL outside OnDDL: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	if err := rt.ChangeTables(ctx, TableChange{Add: []int64{3}, Remove: []int64{1}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(h.j.all(), "\n"), "source.Subscribe(3,t3_r,1000)") {
		t.Fatalf("table 3 not subscribed at the TSO 1000:\n%s", strings.Join(h.j.all(), "\n"))
	}
	var below *schemafence.AddBelowFloorError
	if err := rt.ChangeTables(ctx, TableChange{Add: []int64{1}, StartTs: 5}); !errors.As(err, &below) {
		t.Fatalf("add below the floor: %v", err)
	}
	if err := rt.ChangeTables(ctx, TableChange{Remove: []int64{1}}); err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Fatalf("removing a removed table: %v", err)
	}
	// Table 2 advances; the loop publishes checkpoints over {2, 3} only.
	h.src.consumer(2).AdvanceResolvedTs(1000)
	for {
		h.cb.mu.Lock()
		var last *Checkpoint
		if n := len(h.cb.cps); n > 0 {
			last = &h.cb.cps[n-1]
		}
		h.cb.mu.Unlock()
		if last != nil && last.GlobalResolvedTs == 1000 {
			if _, ok := last.TableResolvedTs[1]; ok || len(last.TableResolvedTs) != 2 {
				t.Fatalf("checkpoint %v, want tables 2 and 3 only", last.TableResolvedTs)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no checkpoint at 1000 (runtime err %v)", rt.Err())
		case <-time.After(5 * time.Millisecond): // polling an observed value, not synchronizing
		}
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.ChangeTables(ctx, TableChange{Add: []int64{1}}); err == nil {
		t.Fatal("ChangeTables after Close succeeded")
	}
}
