package wire_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"github.com/pingcap/kvproto/pkg/errorpb"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// Every fault test runs its scenario twice (W11):
//
//   - clean: after the fault the collections equal the upstream snapshot
//     at the final write's commit ts (W2) and the checker saw no problem
//     (W3-W9) and enough traffic (W10);
//   - mutant: the same scenario with one deliberate bug, armed when the
//     fault begins; the check named in the test's comment must report it.
//
// The mutant of each test is the bug the fault most plausibly causes.
func runFault(t *testing.T, mode string, o rigOpts, scenario func(r *rig)) {
	t.Run("clean", func(t *testing.T) {
		r := newRig(t, o)
		scenario(r)
		r.requireClean(r.finish())
	})
	t.Run("mutant-"+mode, func(t *testing.T) {
		mo := o
		mo.mutant = newMutant(mode)
		r := newRig(t, mo)
		scenario(r)
		r.requireCaught(r.finish())
	})
}

// warmUp runs the workload before the fault and waits until it is
// delivered.
func (r *rig) warmUp() {
	r.t.Helper()
	r.w.run(30)
	r.caughtUp("before the fault")
}

// TestFaultSplitMergeMidTransaction: regions of items and ledger are
// split and then merged while multi-region transactions are between
// prewrite and commit (a raw transaction over four ledger regions, each
// split under its lock; a SQL transaction over items and orders), with
// the workload running before, during and after.
// Mutant drop-row (the marker row, inserted during the splits, never
// reaches the emulator): caught by CheckConsistency (W2), the check a
// re-subscription from a too-high ts after a split would fail.
func TestFaultSplitMergeMidTransaction(t *testing.T) {
	runFault(t, mutDropRow, rigOpts{}, func(r *rig) {
		r.warmUp()
		before := len(r.tableRegions())
		r.arm()
		txn, _ := r.rawTxn("split", 0, 1, 2, 3)
		r.exec("BEGIN")
		if vals := r.w.itemInserts(3); len(vals) > 0 {
			r.exec("INSERT INTO shop.items VALUES " + join(vals))
		}
		for _, h := range []int64{50, 150, 250} {
			r.split(r.ledger.ID, h) // through the raw transaction's regions
			r.split(r.items.ID, h)
			if id, ok := r.w.liveID(r.w.items); ok {
				r.exec(fmt.Sprintf("UPDATE shop.items SET note = 'in split txn' WHERE id = %d", id))
			}
		}
		for i, phys := range r.orders.PhysicalIDs() {
			r.split(phys, []int64{30, 230, 430}[i])
		}
		if q, ok := r.w.orderInsert(); ok {
			r.exec(q)
		}
		r.exec("COMMIT")
		r.marker()
		r.w.run(10)
		r.commit(txn)
		r.w.run(10)
		r.expect(len(r.tableRegions()) > before, "regions %d after splits, %d before", len(r.tableRegions()), before)
		r.caughtUp("after the splits")

		// Merge back four of the new regions while another transaction is
		// prewritten over them.
		txn2, _ := r.rawTxn("merge", 0, 1)
		n := len(r.tableRegions())
		for _, pair := range [][2]int64{{60, 10}, {160, 110}} {
			for _, key := range []func(int64) []byte{r.ledgerKey, r.itemKey} {
				src, dst := r.c.LocateRaw(key(pair[0])).ID, r.c.LocateRaw(key(pair[1])).ID
				if _, err := r.c.Merge(src, dst); err != nil {
					r.t.Fatalf("merge region of row %d into that of row %d: %v", pair[0], pair[1], err)
				}
			}
			r.w.step()
		}
		r.w.run(5)
		r.commit(txn2)
		r.w.run(20)
		r.expect(len(r.tableRegions()) == n-4, "regions %d after four merges, %d before", len(r.tableRegions()), n)
	})
}

// TestFaultLeaderMove: every region of the tables changes leader, one
// after the other between statements, while a raw transaction over two
// regions is prewritten; then the workload continues. Mutant swap (two
// mutations of one batch with different commit ts change places):
// caught by the commit-order check (W4), the invariant a re-subscription
// on the new leader that re-delivered rows out of order would break.
func TestFaultLeaderMove(t *testing.T) {
	runFault(t, mutSwap, rigOpts{}, func(r *rig) {
		r.warmUp()
		r.arm()
		txn, _ := r.rawTxn("leader", 0, 2)
		moved := 0
		for i, id := range r.tableRegions() {
			reg, ok := r.c.Region(id)
			if !ok {
				continue
			}
			to := reg.Leader%3 + 1
			if err := r.c.TransferLeader(id, to); err != nil {
				r.t.Fatalf("transfer leader of region %d to store %d: %v", id, to, err)
			}
			moved++
			if i%2 == 0 {
				r.w.step()
			}
		}
		r.marker()
		r.commit(txn)
		r.w.run(20)
		r.expect(moved >= 10, "%d leaders moved", moved)
	})
}

// TestFaultStoreDownAndBack: the store leading a region of ledger goes
// down (its leaders move to the other stores, its streams break) while a
// raw transaction is prewritten; the workload continues, the pipeline
// catches up on the remaining stores; the store comes back and takes
// leaders again. Mutant skip-seq (one seq skipped after the store went
// down): caught by the seq check (W3); the emulator refuses the gap
// (SEQ_GAP) and the adapter stops, which the clean run would report.
func TestFaultStoreDownAndBack(t *testing.T) {
	runFault(t, mutSkipSeq, rigOpts{}, func(r *rig) {
		r.warmUp()
		r.arm()
		txn, _ := r.rawTxn("store", 1, 3)
		down := r.c.LocateRaw(r.ledgerKey(150)).Leader
		led := 0
		for _, id := range r.tableRegions() {
			if reg, ok := r.c.Region(id); ok && reg.Leader == down {
				led++
			}
		}
		r.expect(led > 0, "store %d leads no region of the tables", down)
		if err := r.c.StoreDown(down); err != nil {
			r.t.Fatal(err)
		}
		r.w.run(15)
		r.marker()
		r.commit(txn)
		r.w.run(15)
		r.caughtUp("store down")
		for _, id := range r.tableRegions() {
			if reg, ok := r.c.Region(id); ok && reg.Leader == down {
				r.expect(false, "region %d still led by the down store %d", id, down)
			}
		}
		if err := r.c.StoreUp(down); err != nil {
			r.t.Fatal(err)
		}
		for i, id := range r.tableRegions() {
			if i%2 == 0 {
				if err := r.c.TransferLeader(id, down); err != nil {
					r.t.Fatalf("transfer leader of region %d back to store %d: %v", id, down, err)
				}
			}
		}
		r.w.run(20)
	})
}

// TestFaultStreamReset: the server resets every stream of every store
// three times during the workload, with a raw transaction prewritten over
// four regions across the resets. Mutant regress-progress (an
// AdvancePartition below the last one, as a re-subscription from an older
// resolved ts that leaked into the frontier would send): caught by the
// progress check (W7).
func TestFaultStreamReset(t *testing.T) {
	runFault(t, mutRegress, rigOpts{}, func(r *rig) {
		r.warmUp()
		r.arm()
		txn, _ := r.rawTxn("reset", 0, 1, 2, 3)
		dropped := 0
		for i := 0; i < 3; i++ {
			r.w.run(8)
			for store := uint64(1); store <= 3; store++ {
				dropped += r.c.DropStreams(store)
			}
			r.w.run(5)
			if i == 0 {
				r.marker()
				r.commit(txn)
			}
			r.caughtUp(fmt.Sprintf("reconnect %d", i))
		}
		r.w.run(20)
		r.expect(dropped >= 9, "%d streams reset", dropped)
	})
}

// TestFaultDuplicateDelivery: streams are reset (the reconnected regions
// re-scan from their resolved ts, so rows already delivered but not yet
// resolved come again), and on the reconnected streams every region of the
// tables re-sends its last rows (DuplicateWindow) while a raw transaction's
// locks keep the ledger regions' resolved ts below the rows just written
// there, so the re-sent rows are above what was resolved: exactly the
// rows only the puller's duplicate suppression stops. Mutant dup-row (the
// marker row sent twice, as with duplicate suppression off): caught by the
// duplicate check (W5); the collections alone could not tell (the
// emulator's version guard absorbs the copy).
func TestFaultDuplicateDelivery(t *testing.T) {
	runFault(t, mutDupRow, rigOpts{}, func(r *rig) {
		r.warmUp()
		r.arm()
		resent := 0
		for i := 0; i < 3; i++ {
			txn, _ := r.rawTxn("dup", 0, 1, 2, 3)
			r.w.run(5)
			for j := 0; j < 6; j++ {
				if q, ok := r.w.ledgerInsert(); ok {
					r.exec(q)
				}
			}
			if i == 0 {
				r.marker()
			}
			for store := uint64(1); store <= 3; store++ {
				r.c.DropStreams(store)
			}
			r.w.run(5)
			r.commit(txn)
			r.caughtUp(fmt.Sprintf("reconnect %d", i))

			// On the live streams: rows above the stalled resolved ts are
			// re-sent.
			txn, _ = r.rawTxn("dup-live", 0, 1, 2, 3)
			for j := 0; j < 6; j++ {
				if q, ok := r.w.ledgerInsert(); ok {
					r.exec(q)
				}
			}
			// The feed delivers on its own goroutine: repeat until the
			// rows were delivered (and so can be re-sent).
			for try := 0; try < 200; try++ {
				n := 0
				for _, id := range r.tableRegions() {
					n += r.c.DuplicateWindow(id, 8)
				}
				if resent += n; n > 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			r.w.run(3)
			r.commit(txn)
		}
		r.w.run(20)
		r.expect(resent > 0, "no row re-sent")
	})
}

// TestFaultAbandonedLock: two transactions are abandoned over the ledger
// table: one after prewrite (its locks expire, the resolver rolls it
// back), one after committing only its primary (the resolver commits its
// secondaries). Their locks hold the items partition's resolved ts, hence
// the collection's safe_ts, at or below their start ts while later
// commits land (W12); the stuck-region detector resolves them through
// client-go's lock resolver and safe_ts moves on. The transport's clock
// runs slow until the stall was observed (items, holding no lock, passed
// the later commits; ledger did not) and 100x fast after, so the 4 s
// stuck threshold costs 40 ms.
// Mutant delay-row (the marker row, committed while the locks stall the
// global checkpoint, held back until its partition's progress passed it:
// data behind progress, which is what a resolved ts run past a lock
// means): caught by the late-row check (W6); the emulator refuses it
// (LATE_MUTATION).
func TestFaultAbandonedLock(t *testing.T) {
	// The transport's clock runs 10x slow until the stall has been
	// observed (so the 4 s stuck threshold cannot fire early on a loaded
	// machine), then 100x fast.
	var fast atomic.Bool
	var base atomic.Int64
	now := func() time.Time {
		b := time.Unix(0, base.Load())
		d := time.Since(b)
		if fast.Load() {
			d *= 100
		} else {
			d /= 10
		}
		return b.Add(d)
	}
	runFault(t, mutDelayRow, rigOpts{transport: logpuller.TransportConfig{Now: now}}, func(r *rig) {
		fast.Store(false)
		base.Store(time.Now().UnixNano())
		r.warmUp()
		r.arm()
		rolledBack, _ := r.rawTxnTTL("abandoned", 50, 0, 2)
		half, halfIDs := r.rawTxnTTL("half-committed", 50, 1, 3)
		if err := half.CommitKeys(r.c.Oracle().Next(), r.ledgerKey(halfIDs[0])); err != nil {
			r.t.Fatal(err)
		}
		lockTs := min(rolledBack.StartTs(), half.StartTs())
		r.marker()
		var later uint64
		for i := 0; i < 5; i++ {
			r.w.run(4)
			ts, err := r.up.CurrentTs(r.ctx)
			if err != nil {
				r.t.Fatal(err)
			}
			later = ts
			time.Sleep(20 * time.Millisecond) // a resolved-ts round
			// W12: resolved ts never passes an unresolved lock.
			if s := r.collSafeTs(ledgerRef.CollectionName()); s > lockTs {
				r.expect(false, "ledger safe_ts %d passed the unresolved lock at %d", s, lockTs)
			}
		}
		r.expect(later > lockTs, "no commit after the lock")
		// The stall is the lock's: items, without locks, passes the later
		// commits while ledger stays held.
		if err := r.waitSafeOf([]adapter.TableRef{itemsRef}, later); err != nil && !r.stopped() {
			r.t.Fatalf("items did not move past %d: %v", later, err)
		}
		if s := r.collSafeTs(ledgerRef.CollectionName()); s > lockTs {
			r.expect(false, "ledger safe_ts %d passed the unresolved lock at %d", s, lockTs)
		}
		fast.Store(true)
		r.caughtUp("locks resolved")
		r.w.run(10)
		// The resolver committed the half-committed transaction's
		// secondaries: the upstream now has them (CheckConsistency then
		// compares the collection with it).
		for _, id := range halfIDs[1:] {
			ts, _ := r.up.CurrentTs(r.ctx)
			v, err := r.c.Get(r.ctx, r.ledgerKey(id), ts)
			r.expect(err == nil && v != nil, "secondary row %d of the half-committed transaction: %v %v", id, v, err)
		}
	})
}

// TestFaultEpochNotMatchStorm: every region of the tables answers
// epoch_not_match again and again (forty rounds), with a real split in
// the middle of the storm and the workload running. Mutant
// regress-checkpoint (a stale checkpoint re-delivered after a newer one,
// as a frontier that took a re-subscribed region's older resolved ts
// would emit): caught by the checkpoint check (W8).
func TestFaultEpochNotMatchStorm(t *testing.T) {
	runFault(t, mutCheckpoint, rigOpts{}, func(r *rig) {
		r.warmUp()
		r.arm()
		failed := 0
		for i := 0; i < 40; i++ {
			for _, id := range r.tableRegions() {
				failed += r.c.FailRegion(id, &cdcpb.Error{EpochNotMatch: &errorpb.EpochNotMatch{}})
			}
			if i%4 == 0 {
				r.w.step()
			}
			switch i {
			case 10:
				r.split(r.items.ID, 350)
			case 20:
				r.marker()
			}
			time.Sleep(2 * time.Millisecond)
		}
		r.w.run(20)
		r.expect(failed > 0, "no subscription failed")
	})
}

// TestFaultUnknownRegionError: every region of the tables answers an
// error kind the pinned proto does not know (on the wire: an Error with
// none of the known fields), repeatedly during the workload, with a raw
// transaction prewritten across the errors. Mutant replay-row (a row
// delivered again after a checkpoint passed it, as a source that took the
// unknown error for a fresh start would): caught by the row-behind check
// (W9).
func TestFaultUnknownRegionError(t *testing.T) {
	runFault(t, mutReplayRow, rigOpts{}, func(r *rig) {
		r.warmUp()
		r.arm()
		txn, _ := r.rawTxn("unknown", 0, 3)
		failed := 0
		for i := 0; i < 15; i++ {
			for _, id := range r.tableRegions() {
				failed += r.c.FailRegion(id, &cdcpb.Error{})
			}
			r.w.step()
			if i == 7 {
				r.marker()
				r.commit(txn)
			}
			time.Sleep(3 * time.Millisecond)
		}
		r.w.run(20)
		r.expect(failed > 0, "no subscription failed")
	})
}

func join(vals []string) string {
	out := ""
	for i, v := range vals {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}
