package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/text"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/verify"
)

// Config is one simulation run.
type Config struct {
	Seed int64
	// Steps is the number of workload steps (default DefaultSteps).
	Steps int
	// Schedule, when non-nil, replaces the fault schedule drawn from the
	// seed (replaying a shrunk schedule).
	Schedule Schedule
	// Only draws every fault of this kind (meta-tests); "" mixes kinds.
	Only Kind
	// Mutant is a deliberate bug put into the run (meta-tests), armed
	// when a fault of MutantOn begins ("" = from the first step on).
	Mutant   Mutant
	MutantOn Kind
	// Dir is where the run's files go (a fresh temporary directory).
	Dir string
	// KeepTrace keeps the trace lines in the Result (replay output).
	KeepTrace bool
}

// DefaultSteps is a run's length: long enough that most fault kinds meet
// DDL, big transactions and restarts, short enough for thousands of seeds
// per CI run.
const DefaultSteps = 30

// Result is what a run did and found.
type Result struct {
	Seed     int64
	Hash     string
	Schedule Schedule
	// Faults counts the faults that took effect, by kind.
	Faults map[Kind]int
	// Checks counts invariant evaluations, by invariant.
	Checks map[Invariant]int
	// Failure is the first broken invariant (nil: the run passed).
	Failure *Violation
	// MutantApplied reports that the run's mutant changed something.
	MutantApplied                         bool
	Statements, Mutations, Rows, Restarts int
	Trace                                 []string
}

// world is the simulated system and its observers.
type world struct {
	cfg   Config
	tick  *rand.Rand // time advances, delivery cuts, check moments
	dir   string
	c     *fakeupstream.Cluster
	up    *adapter.Upstream
	clk   *vclock
	emu   *emulator.Emulator
	cur   *pipeline
	chk   *checker
	wl    *workload
	h     hash.Hash
	lines []string

	adapterDir, emuDir string

	step        int
	inTablePump bool
	armed       *Fault // storage fault waiting for the next write
	crashed     bool
	torn        *tornWrite // the write a torn-write crash cut (SIM18)
	schemaRot   *schemaRot // a damaged schema store the next start meets (SIM17)
	expectFatal bool       // an injected fault may stop the runtime
	mutant      Mutant
	mut         *mutantState
	stallEnd    map[uint64]int // store down until step
	rawNext     int64
	sinceSweep  time.Duration

	faultsHit                                 map[Kind]int
	statements, mutations, rowsSeen, restarts int
	progressCalls                             int
	lastCommit                                uint64
}

func (w *world) trace(format string, args ...any) {
	line := fmt.Sprintf("%d@%d ", w.step, w.c.NowMs()) + fmt.Sprintf(format, args...)
	w.h.Write([]byte(line))
	w.h.Write([]byte{'\n'})
	if w.cfg.KeepTrace {
		w.lines = append(w.lines, line)
	}
}

// Run runs one simulation. An error is a failure of the harness itself
// (the world could not be built); a broken invariant is Result.Failure.
func Run(cfg Config) (*Result, error) {
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps
	}
	if cfg.Dir == "" {
		// On tmpfs when there is one (as the emulator's text scratch):
		// the emulator and the schema store fsync every commit, which on
		// a disk would dominate a run; a crash is modelled at the write
		// boundary (faultSink), not by the kernel.
		d, err := os.MkdirTemp(filepath.Dir(text.DefaultScratchParent()), "sfemu-sim-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.Dir = d
	}
	sched := cfg.Schedule
	if sched == nil {
		sched = makeSchedule(rand.New(rand.NewSource(cfg.Seed*7919+1)), rand.New(rand.NewSource(cfg.Seed*7919+5)), cfg.Steps, cfg.Only)
	}
	w := &world{cfg: cfg, tick: rand.New(rand.NewSource(cfg.Seed*7919 + 2)), dir: cfg.Dir, h: sha256.New(),
		adapterDir: filepath.Join(cfg.Dir, "adapter"), emuDir: filepath.Join(cfg.Dir, "emulator"),
		mutant: cfg.Mutant, faultsHit: map[Kind]int{}, stallEnd: map[uint64]int{}}
	w.mut = &mutantState{}
	w.chk = newChecker(w)
	res := &Result{Seed: cfg.Seed, Schedule: sched}
	err := w.run(sched)
	w.shutdown()
	if err != nil {
		return nil, fmt.Errorf("sim seed %d: %w", cfg.Seed, err)
	}
	res.Hash = hex.EncodeToString(w.h.Sum(nil))[:16]
	res.Faults = w.faultsHit
	res.Checks = w.chk.counts
	res.Failure = w.chk.failed
	res.MutantApplied = w.mut.applied
	res.Statements, res.Mutations, res.Rows, res.Restarts = w.statements, w.mutations, w.rowsSeen, w.restarts
	res.Trace = w.lines
	return res, nil
}

func (w *world) run(sched Schedule) error {
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: w.cfg.Seed, Stores: 3, LockTTLMs: 3000,
		Feed: cdcfeed.Config{ResolvedTsIntervalMs: 50}})
	if err != nil {
		return err
	}
	w.c = c
	w.clk = &vclock{c: c, yield: w.yield}
	srv, err := sqlfront.New(ctx, c)
	if err != nil {
		return err
	}
	w.up = &adapter.Upstream{Cluster: c, SQL: srv}
	w.wl = &workload{w: w, rng: rand.New(rand.NewSource(w.cfg.Seed*7919 + 3)), ss: srv.NewSession("")}
	for _, q := range schema {
		w.wl.exec(q)
	}
	w.wl.tables = newTableSet(w.cfg.Seed)
	w.splitTables()
	if err := w.openEmulator(); err != nil {
		return err
	}
	w.startAdapter()
	next := 0
	for w.step = 0; w.step < w.cfg.Steps && w.chk.failed == nil; w.step++ {
		w.mut.stepped(w)
		w.wl.step()
		for next < len(sched) && sched[next].Step <= w.step {
			w.apply(sched[next])
			next++
		}
		w.advance()
		if w.tick.Intn(6) == 0 {
			w.checkConsistency(false)
		}
	}
	if w.chk.failed == nil {
		w.finish()
	}
	return nil
}

// splitTables splits every physical table at its bounds and at a few
// handles inside (as TiDB splits tables), so transactions span regions.
func (w *world) splitTables() {
	for _, name := range logicalTables {
		ti, _, err := w.up.SQL.TableInfo("simdb", name)
		if err != nil {
			continue
		}
		for _, phys := range ti.PhysicalIDs() {
			for _, h := range []int64{100, 250, 1500} {
				_, _, _ = w.c.SplitRaw(recordKey(phys, h))
			}
		}
	}
}

func (w *world) openEmulator() error {
	emu, err := emulator.Open(w.emuDir, emulator.Options{Clock: emuClock{w.c}, TombstoneRetention: -1})
	if err != nil {
		return err
	}
	w.emu = emu
	return nil
}

// startAdapter starts a pipeline; a start that fails is a fatal stop like
// any other (it must name its trigger) and is retried at the next step.
func (w *world) startAdapter() {
	if w.cur != nil && !w.cur.closed {
		return
	}
	w.cur = nil
	p, err := w.startPipeline()
	if err != nil {
		w.trace("adapter start failed: %v", err)
		if w.schemaRot != nil && !w.crashed {
			w.schemaRotRefused(err)
			return
		}
		if w.crashed {
			// The crash hit one of the start's own writes.
			w.crash()
			return
		}
		w.judgeStartFailure(err)
		return
	}
	w.restarts++
	w.trace("adapter started at %d epoch %d", p.resume.StartTs, p.resume.Epoch)
}

// yield lets the world move while a component waits (vclock.After).
func (w *world) yield(d time.Duration) {
	if p := w.cur; p != nil {
		p.pumpStore()
		if !w.inTablePump {
			p.pumpTables(w)
		}
	}
	_ = w.c.Advance(d)
	w.sweepLocks(d)
}

// sweepLocks is the lock resolver: the in-process transport has no
// stuck-resolved-ts task (that is the gRPC transport's, T15), so every
// second of virtual time the world resolves the locks whose TTL expired,
// as TiCDC's resolver would for a stuck region.
func (w *world) sweepLocks(d time.Duration) {
	w.sinceSweep += d
	if w.sinceSweep < time.Second {
		return
	}
	w.sinceSweep = 0
	if n, err := w.c.ResolveLocks(nil, nil, w.c.Oracle().Next()); err != nil || n > 0 {
		w.trace("resolve locks: %d %v", n, err)
	}
}

// advance lets virtual time pass in a few slices; each slice delivers
// what is ready (all of it, or a cut of it) and steps the control loop.
func (w *world) advance() {
	for i := 0; i < 1+w.tick.Intn(3); i++ {
		d := time.Duration(5+w.tick.Intn(60)) * time.Millisecond
		_ = w.c.Advance(d)
		w.sweepLocks(d)
		w.pumpAll()
	}
	for store, until := range w.stallEnd {
		if w.step >= until {
			_ = w.c.StoreUp(store)
			delete(w.stallEnd, store)
			w.trace("store %d up", store)
		}
	}
}

// pumpAll runs one delivery round and reacts to a stopped runtime.
func (w *world) pumpAll() {
	p := w.cur
	if p == nil {
		w.startAdapter()
		return
	}
	p.pumpStore()
	p.pumpTables(w)
	p.control()
	w.afterPump()
}

// afterPump handles a crash and a stopped runtime: a crash restarts the
// emulator and the adapter from disk; any other fatal stop is judged
// (SIM16) and the adapter is restarted, as the supervisor (table-set
// change) or an operator would.
func (w *world) afterPump() {
	p := w.cur
	if p == nil {
		return
	}
	if w.crashed {
		w.crash()
		return
	}
	err := p.stopped()
	if err == nil {
		return
	}
	_ = p.close()
	w.cur = nil
	w.trace("adapter stopped: %v", err)
	var tc *normalize.TableSetChangedError
	if errors.As(err, &tc) {
		for _, id := range tc.Dropped {
			w.chk.dropped[normalize.PartitionName(0, id)] = true
		}
	} else {
		w.judgeFatal(err)
	}
	w.startAdapter()
}

// judgeFatal checks that a fatal stop names its trigger (SIM16) and that
// nothing but an injected fault caused it. A stopped runtime reports a
// *minicdc.FatalError with its trigger; an adapter start that failed
// before the runtime (table set, bridge) names its phase by its prefix.
func (w *world) judgeFatal(err error) {
	w.chk.count(InvFatal)
	if w.mutant == MutantAnonymousFatal && w.mut.arm(w) {
		err = errors.New(errorText(err))
	}
	var fe *minicdc.FatalError
	named := errors.As(err, &fe) && fe.Trigger != ""
	if !named {
		w.chk.fail(InvFatal, "stop without a named trigger: %v", err)
		return
	}
	if w.expectFatal {
		w.expectFatal = false
		return
	}
	w.chk.fail(InvFatal, "unexpected fatal stop (no injected fault explains it): %v", err)
}

// judgeStartFailure: an adapter start that fails before the runtime
// exists must say which phase failed; no injected fault explains one.
func (w *world) judgeStartFailure(err error) {
	var fe *minicdc.FatalError
	if errors.As(err, &fe) {
		w.judgeFatal(err)
		return
	}
	w.chk.count(InvFatal)
	if w.expectFatal && named(err) {
		// An injected storage fault hit the bridge's first writes.
		w.expectFatal = false
		return
	}
	w.chk.fail(InvFatal, "adapter start failed: %v", err)
}

// named reports whether a start error says which component failed.
func named(err error) bool {
	msg := err.Error()
	for _, p := range []string{"adapter: ", "normalize: ", "schemastore: ", "emulator: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func errorText(err error) string {
	var fe *minicdc.FatalError
	if errors.As(err, &fe) && fe.Err != nil {
		return fe.Err.Error()
	}
	return err.Error()
}

// crash: the process died at a storage write. The adapter's memory is
// gone; the emulator reopens from its files (bbolt: the last committed
// transaction).
func (w *world) crash() {
	if w.cur != nil {
		_ = w.cur.close()
		w.cur = nil
	}
	if err := w.emu.Close(); err != nil {
		w.trace("emulator close after crash: %v", err)
	}
	w.crashed = false
	w.expectFatal = false
	t := w.torn
	w.torn = nil
	if t != nil {
		if err := w.tear(t); err != nil {
			w.chk.fail(InvIntegrity, "writing the torn store: %v", err)
			return
		}
	}
	if err := w.reopenEmulator(); err != nil {
		return
	}
	if t != nil {
		w.checkTorn(t)
	}
	w.startAdapter()
}

func (w *world) reopenEmulator() error {
	if err := w.openEmulator(); err != nil {
		w.chk.fail(InvDurability, "emulator does not reopen: %v", err)
		return err
	}
	w.trace("emulator reopened")
	w.checkStored()
	w.mut.restarted()
	return nil
}

// checkStored: after a restart every acknowledged progress is still
// stored (SIM14).
func (w *world) checkStored() {
	parts := sortedKeys(w.chk.acked)
	if len(parts) == 0 {
		return
	}
	resp, err := w.emu.GetProgress(context.Background(), &apiv1.GetProgressRequest{SourcePartitions: parts})
	if err != nil {
		w.chk.fail(InvDurability, "reading stored progress after restart: %v", err)
		return
	}
	got := map[string]uint64{}
	for _, ps := range resp.GetPartitions() {
		got[ps.GetSourcePartition()] = ps.GetResolvedTs()
	}
	// A partition no collection maps any more was unmapped by a durable
	// schema change (a crash may have come before the bridge reported the
	// table-set change): its progress went with it.
	mapped := map[string]bool{}
	if list, err := w.emu.ListCollections(context.Background(), &apiv1.ListCollectionsRequest{}); err == nil {
		for _, st := range list.GetCollections() {
			if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
				continue
			}
			for _, p := range st.GetDefinition().GetSourcePartitions() {
				mapped[p] = true
			}
		}
	}
	for _, part := range parts {
		if w.chk.dropped[part] || !mapped[part] {
			continue
		}
		w.chk.count(InvDurability)
		if got[part] < w.chk.acked[part] {
			w.chk.fail(InvDurability, "partition %s: stored progress %d after restart, %d was acknowledged", part, got[part], w.chk.acked[part])
		}
	}
}

// apply injects one scheduled fault.
func (w *world) apply(f Fault) {
	w.trace("fault %s", f)
	w.mut.fault(w, f.Kind)
	switch f.Kind {
	case FaultSplit:
		rs := w.c.Regions()
		r := rs[int(f.Arg%uint64(len(rs)))]
		if len(r.StartKey) > 0 {
			key := append(append([]byte(nil), r.StartKey...), byte(f.Arg>>8), byte(f.Arg>>16))
			if _, _, err := w.c.SplitRaw(key); err == nil {
				w.faultsHit[f.Kind]++
			}
		}
	case FaultMerge:
		rs := w.c.Regions()
		if len(rs) > 1 {
			i := int(f.Arg % uint64(len(rs)-1))
			if _, err := w.c.Merge(rs[i].ID, rs[i+1].ID); err == nil {
				w.faultsHit[f.Kind]++
			}
		}
	case FaultLeader:
		rs := w.c.Regions()
		r := rs[int(f.Arg%uint64(len(rs)))]
		if err := w.c.TransferLeader(r.ID, 1+(f.Arg>>8)%3); err == nil {
			w.faultsHit[f.Kind]++
		}
	case FaultStoreDown:
		store := 1 + f.Arg%3
		if _, down := w.stallEnd[store]; !down && len(w.stallEnd) == 0 {
			if err := w.c.StoreDown(store); err == nil {
				w.stallEnd[store] = w.step + 1 + int((f.Arg>>8)%5)
				w.faultsHit[f.Kind]++
			}
		}
	case FaultStreamDrop:
		w.c.DropStreams(1 + f.Arg%3)
		w.faultsHit[f.Kind]++
	case FaultDuplicate:
		// Deliver a little (rows above the delivered resolved ts are the
		// ones a retry may repeat), then repeat the window of the first
		// region from a drawn offset that has one.
		for i := 0; i < 1+int((f.Arg>>16)%8); i++ {
			w.c.Step()
		}
		rs := w.c.Regions()
		for i := range rs {
			r := rs[(int(f.Arg%uint64(len(rs)))+i)%len(rs)]
			if w.c.DuplicateWindow(r.ID, 1+int((f.Arg>>8)%10)) > 0 {
				w.faultsHit[f.Kind]++
				break
			}
		}
	case FaultPartial:
		for i := 0; i < int(f.Arg%8); i++ {
			w.c.Step()
		}
		w.faultsHit[f.Kind]++
	case FaultStuckLock:
		w.stuckLock(f.Arg)
		w.faultsHit[f.Kind]++
	case FaultStall:
		rs := w.c.Regions()
		w.c.HoldRegion(rs[int(f.Arg%uint64(len(rs)))].ID, time.Duration(50+(f.Arg>>8)%1500)*time.Millisecond)
		w.faultsHit[f.Kind]++
	case FaultAdapter:
		if w.cur != nil {
			_ = w.cur.close()
			w.cur = nil
			w.faultsHit[f.Kind]++
			w.startAdapter()
		}
	case FaultEmulator:
		if w.cur != nil {
			_ = w.cur.close()
			w.cur = nil
		}
		if err := w.emu.Close(); err != nil {
			w.trace("emulator close: %v", err)
		}
		w.faultsHit[f.Kind]++
		if w.reopenEmulator() == nil {
			w.startAdapter()
		}
	case FaultRot:
		w.rot(f)
	case FaultCrash, FaultEIO, FaultENOSPC, FaultSlowDisk, FaultTorn:
		if w.armed == nil {
			f := f
			w.armed = &f
		}
	}
}

// checkConsistency compares every collection with its table read by
// snapshot at the collection's safe_ts (SIM10). Keys the pipeline sent
// a change for above safe_ts are left out (the collection may hold that
// newer state); at the end (final) nothing is left out.
func (w *world) checkConsistency(final bool) {
	ctx := context.Background()
	// The text modality indexes on the emulator's own goroutine and holds
	// safe_ts until it caught up: wait for it, so the safe_ts read is a
	// function of the seed (SIM3).
	w.emu.WaitIndexed()
	for _, ref := range w.refs() {
		coll := ref.CollectionName()
		st, err := w.emu.GetCollection(ctx, &apiv1.GetCollectionRequest{Name: coll})
		if err != nil {
			continue // not created yet (the adapter has not started)
		}
		safe := st.GetSafeTs()
		w.chk.safeTs(coll, safe)
		if safe == 0 {
			continue
		}
		if sp, _ := w.c.GCSafePoint(ctx); safe < sp {
			continue
		}
		diffs, err := verify.CheckConsistency(ctx, w.c, w.emu, []verify.TableRef{ref}, safe)
		if err != nil {
			// Renamed after safe_ts: read it by the name it had then.
			diffs, err = verify.CheckConsistency(ctx, w.c, w.emu, []verify.TableRef{otherName(ref)}, safe)
		}
		if err != nil {
			w.trace("check %s at %d: %v", coll, safe, err)
			continue
		}
		w.chk.count(InvConsistency)
		var kept []verify.Diff
		for _, d := range diffs {
			if !final && w.chk.touched[coll][d.Key] > safe {
				continue
			}
			kept = append(kept, d)
		}
		w.trace("check %s at %d: %d diffs (%d in flight)", coll, safe, len(kept), len(diffs)-len(kept))
		if len(kept) > 0 {
			sort.Slice(kept, func(i, j int) bool { return kept[i].String() < kept[j].String() })
			w.chk.fail(InvConsistency, "collection %s at safe_ts %d: %d differences, first: %s", coll, safe, len(kept), kept[0])
		}
	}
}

// finish heals every fault, writes one last row to every physical table,
// lets the pipeline catch up and checks everything at the end.
func (w *world) finish() {
	for store := range w.stallEnd {
		_ = w.c.StoreUp(store)
		delete(w.stallEnd, store)
	}
	for _, r := range w.c.Regions() {
		w.c.ReleaseRegion(r.ID)
	}
	w.armed = nil
	w.schemaRot = nil
	w.step = w.cfg.Steps
	w.wl.exec("REPLACE INTO simdb.items (id, title, qty) VALUES (9999, 'final', 1)")
	w.wl.exec("REPLACE INTO simdb.ledger (id, title, qty) VALUES (9999, 'final', 1)")
	w.wl.exec("REPLACE INTO simdb.orders (id, item, amount, status) VALUES (1, 1, 1.00, 'final'), (201, 1, 1.00, 'final'), (401, 1, 1.00, 'final')")
	if !w.wl.tables.dropped["notes"] {
		w.wl.exec("REPLACE INTO simdb.notes (id, body) VALUES (9999, 'final')")
	}
	target := w.lastCommit
	for round := 0; round < 400 && w.chk.failed == nil; round++ {
		if w.allSafe(target) {
			break
		}
		_ = w.c.Advance(50 * time.Millisecond)
		w.sweepLocks(50 * time.Millisecond)
		w.pumpAll()
	}
	if w.chk.failed != nil {
		return
	}
	if !w.allSafe(target) {
		// Progress acknowledged but not stored holds safe_ts back: name
		// that (SIM14) rather than the stall it causes.
		w.checkStored()
		w.chk.fail(InvConsistency, "safe_ts did not reach the last commit %d after healing every fault (%s)", target, w.safeSummary())
		return
	}
	w.checkConsistency(true)
	w.checkStored()
}

func (w *world) allSafe(ts uint64) bool {
	w.emu.WaitIndexed()
	for _, ref := range w.refs() {
		st, err := w.emu.GetCollection(context.Background(), &apiv1.GetCollectionRequest{Name: ref.CollectionName()})
		if err != nil || st.GetSafeTs() < ts {
			return false
		}
	}
	return true
}

func (w *world) safeSummary() string {
	out := ""
	for _, ref := range w.refs() {
		st, err := w.emu.GetCollection(context.Background(), &apiv1.GetCollectionRequest{Name: ref.CollectionName()})
		out += fmt.Sprintf("%s=%d(err %v) ", ref.CollectionName(), st.GetSafeTs(), err)
	}
	if w.cur == nil {
		out += "no adapter running"
	}
	return out
}

// shutdown releases everything (the runtime's instance slot included).
func (w *world) shutdown() {
	if w.cur != nil {
		_ = w.cur.close()
		w.cur = nil
	}
	if w.emu != nil {
		_ = w.emu.Close()
	}
	if w.c != nil {
		_ = w.c.Close()
	}
}
