package sim

import (
	"context"
	"fmt"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// Invariant names one checked property (specs/sim.md SIM10-SIM16).
type Invariant string

const (
	InvConsistency Invariant = "consistency"   // SIM10
	InvSeq         Invariant = "seq"           // SIM11
	InvEpoch       Invariant = "epoch"         // SIM12
	InvMonotonic   Invariant = "monotonic"     // SIM13
	InvDurability  Invariant = "durability"    // SIM14
	InvLateRows    Invariant = "no-late-rows"  // SIM15
	InvFatal       Invariant = "fatal-trigger" // SIM16
	InvIntegrity   Invariant = "integrity"     // SIM17, SIM18
)

// AllInvariants lists every invariant in a fixed order.
var AllInvariants = []Invariant{InvConsistency, InvSeq, InvEpoch, InvMonotonic, InvDurability, InvLateRows, InvFatal, InvIntegrity}

// Violation is a broken invariant.
type Violation struct {
	Inv  Invariant
	What string
}

func (v *Violation) Error() string { return fmt.Sprintf("invariant %s broken: %s", v.Inv, v.What) }

type partEpoch struct {
	part  string
	epoch uint64
}

// sentKey is one change as sent: a (partition, epoch, key, commit ts) is
// sent at most once (duplicate suppression before the emulator, whose
// version guard would hide a duplicate).
type sentKey struct {
	partEpoch
	pk string
	ts uint64
}

// checker sees every call the bridge makes to the emulator (as sent, and
// whether it was acknowledged) and every callback of the runtime, and
// checks the stream invariants as they happen. Its state outlives
// adapter and emulator restarts: it is the record of what the pipeline
// promised.
type checker struct {
	w *world

	lastSeq    map[partEpoch]uint64
	lastCommit map[partEpoch]uint64
	maxEpoch   map[string]uint64 // highest epoch seen per partition
	// dropped are partitions a table-set change unmapped.
	dropped map[string]bool
	// stored is the highest epoch per partition that reached the
	// emulator's storage (a write that returned, or that a crash cut
	// off after it was durable). An epoch nothing was stored in may be
	// used again: the emulator never saw it.
	stored map[string]uint64
	// openedAfter is stored when the running adapter began to open.
	openedAfter map[string]uint64
	runEpoch    uint64            // epoch of the running adapter (resume)
	openEpochs  []uint64          // epochs written while the bridge opened
	acked       map[string]uint64 // highest acknowledged progress per partition
	ackedEpoch  map[string]uint64 // the epoch that progress was acknowledged in
	safe        map[string]uint64 // highest safe_ts seen per collection
	// touched: per collection and primary key, the highest commit ts of a
	// mutation sent (acknowledged or not): a key changed above a safe_ts is
	// left out of the consistency check at that safe_ts.
	touched map[string]map[string]uint64

	// Per runtime (reset at each start): checkpoints.
	cpGlobal uint64
	cpTable  map[int64]uint64

	sent map[sentKey]bool

	counts map[Invariant]int
	failed *Violation
}

func newChecker(w *world) *checker {
	return &checker{w: w, lastSeq: map[partEpoch]uint64{}, lastCommit: map[partEpoch]uint64{}, maxEpoch: map[string]uint64{},
		dropped: map[string]bool{}, stored: map[string]uint64{}, acked: map[string]uint64{}, ackedEpoch: map[string]uint64{}, safe: map[string]uint64{}, touched: map[string]map[string]uint64{},
		cpTable: map[int64]uint64{}, sent: map[sentKey]bool{}, counts: map[Invariant]int{}}
}

// fail records the first violation.
func (c *checker) fail(inv Invariant, format string, args ...any) {
	if c.failed == nil {
		c.failed = &Violation{Inv: inv, What: fmt.Sprintf(format, args...)}
		c.w.trace("VIOLATION %s %s", inv, c.failed.What)
	}
}

func (c *checker) count(inv Invariant) { c.counts[inv]++ }

// reached records a write in epoch of partition that reached storage.
func (c *checker) reached(part string, epoch uint64) {
	c.stored[part] = max(c.stored[part], epoch)
}

// opening is called before an adapter opens its bridge (which may
// already write progress in its new epoch).
func (c *checker) opening() {
	c.runEpoch = 0
	c.openEpochs = nil
	c.openedAfter = map[string]uint64{}
	for k, v := range c.stored {
		c.openedAfter[k] = v
	}
}

// started is called when an adapter opened its bridge: its epoch must be
// above every epoch stored before (SIM12). (That the stored progress holds
// everything acknowledged, SIM14, is checked before the bridge opens:
// world.checkStored.)
func (c *checker) started(res normalize.Resume) {
	c.count(InvEpoch)
	for _, part := range sortedKeys(c.openedAfter) {
		if res.Epoch <= c.openedAfter[part] {
			c.fail(InvEpoch, "adapter resumed with epoch %d, partition %s already stored epoch %d", res.Epoch, part, c.openedAfter[part])
		}
	}
	for _, e := range c.openEpochs {
		if e != res.Epoch {
			c.fail(InvEpoch, "the bridge wrote in epoch %d while opening epoch %d", e, res.Epoch)
		}
	}
	c.runEpoch = res.Epoch
	// An epoch reused because nothing of it was stored starts its
	// sequences afresh: forget what the failed run sent in it.
	for k := range c.lastSeq {
		if k.epoch == res.Epoch {
			delete(c.lastSeq, k)
			delete(c.lastCommit, k)
		}
	}
	for k := range c.sent {
		if k.epoch == res.Epoch {
			delete(c.sent, k)
		}
	}
	c.cpGlobal = 0
	c.cpTable = map[int64]uint64{}
}

// runsIn checks that a write carries the running adapter's epoch (SIM12).
func (c *checker) runsIn(what, part string, epoch uint64) {
	c.count(InvEpoch)
	if c.runEpoch == 0 {
		c.openEpochs = append(c.openEpochs, epoch)
		return
	}
	if epoch != c.runEpoch {
		c.fail(InvEpoch, "partition %s: %s in epoch %d, the adapter runs in epoch %d", part, what, epoch, c.runEpoch)
	}
}

// batch checks a batch as sent (SIM11, SIM12, SIM13, SIM15).
func (c *checker) batch(b *apiv1.MutationBatch) {
	part, epoch := b.GetSourcePartition(), b.GetSourceEpoch()
	c.runsIn("batch", part, epoch)
	key := partEpoch{part, epoch}
	c.count(InvEpoch)
	if epoch < c.maxEpoch[part] {
		c.fail(InvEpoch, "partition %s: batch in epoch %d after epoch %d", part, epoch, c.maxEpoch[part])
	}
	c.maxEpoch[part] = max(c.maxEpoch[part], epoch)
	c.count(InvSeq)
	if want := c.lastSeq[key] + 1; b.GetFirstSeq() != want {
		c.fail(InvSeq, "partition %s epoch %d: batch first_seq %d, want %d", part, epoch, b.GetFirstSeq(), want)
	}
	coll := b.GetCollection()
	if c.touched[coll] == nil {
		c.touched[coll] = map[string]uint64{}
	}
	for i, m := range b.GetMutations() {
		if m.GetSeq() != b.GetFirstSeq()+uint64(i) {
			c.fail(InvSeq, "partition %s epoch %d: mutation %d has seq %d, want %d", part, epoch, i, m.GetSeq(), b.GetFirstSeq()+uint64(i))
		}
		c.count(InvLateRows)
		if m.GetCommitTs() <= c.acked[part] && c.ackedEpoch[part] == epoch {
			c.fail(InvLateRows, "partition %s epoch %d: mutation %s at commit ts %d, progress %d already acknowledged in this epoch",
				part, epoch, m.GetPrimaryKey(), m.GetCommitTs(), c.acked[part])
		}
		once := sentKey{partEpoch: key, pk: m.GetPrimaryKey(), ts: m.GetCommitTs()}
		if c.sent[once] {
			c.fail(InvLateRows, "partition %s epoch %d: mutation %s at commit ts %d sent twice", part, epoch, m.GetPrimaryKey(), m.GetCommitTs())
		}
		c.sent[once] = true
		c.count(InvMonotonic)
		if m.GetCommitTs() < c.lastCommit[key] {
			c.fail(InvMonotonic, "partition %s epoch %d: commit ts %d after %d in seq order", part, epoch, m.GetCommitTs(), c.lastCommit[key])
		}
		c.lastCommit[key] = max(c.lastCommit[key], m.GetCommitTs())
		c.touched[coll][m.GetPrimaryKey()] = max(c.touched[coll][m.GetPrimaryKey()], m.GetCommitTs())
	}
	if n := len(b.GetMutations()); n > 0 {
		c.lastSeq[key] = b.GetFirstSeq() + uint64(n) - 1
	}
}

// progress checks a progress call as sent (SIM12, SIM13).
func (c *checker) progress(p *apiv1.PartitionProgress) {
	part := p.GetSourcePartition()
	c.runsIn("progress", part, p.GetSourceEpoch())
	c.count(InvMonotonic)
	if p.GetResolvedTs() < c.acked[part] {
		c.fail(InvMonotonic, "partition %s: progress %d sent after %d was acknowledged", part, p.GetResolvedTs(), c.acked[part])
	}
	c.count(InvEpoch)
	if p.GetSourceEpoch() < c.maxEpoch[part] {
		c.fail(InvEpoch, "partition %s: progress in epoch %d after epoch %d", part, p.GetSourceEpoch(), c.maxEpoch[part])
	}
	c.maxEpoch[part] = max(c.maxEpoch[part], p.GetSourceEpoch())
}

// progressAcked records an acknowledged progress call.
func (c *checker) progressAcked(p *apiv1.PartitionProgress, resp *apiv1.AdvancePartitionResponse) {
	part := p.GetSourcePartition()
	if p.GetResolvedTs() >= c.acked[part] {
		c.acked[part] = p.GetResolvedTs()
		c.ackedEpoch[part] = p.GetSourceEpoch()
	}
	c.safeTs(resp.GetCollection(), resp.GetSafeTs())
}

// safeTs checks a collection's safe_ts against the highest seen (SIM13).
func (c *checker) safeTs(coll string, ts uint64) {
	c.count(InvMonotonic)
	if ts < c.safe[coll] {
		c.fail(InvMonotonic, "collection %s: safe_ts %d after %d", coll, ts, c.safe[coll])
	}
	c.safe[coll] = max(c.safe[coll], ts)
}

// tapCallback observes the runtime's callbacks before the bridge.
type tapCallback struct{ c *checker }

func (t tapCallback) OnRowChanged(_ context.Context, ev minicdc.RowChanged) error {
	c := t.c
	c.count(InvMonotonic)
	if cp, ok := c.cpTable[ev.TableID]; ok && ev.CommitTs <= cp {
		c.fail(InvMonotonic, "table %d: row at commit ts %d after checkpoint %d (M21)", ev.TableID, ev.CommitTs, cp)
	}
	c.w.rowsSeen++
	return nil
}

func (t tapCallback) OnDDL(_ context.Context, ddl minicdc.DDL) error {
	t.c.w.trace("ddl %s finished %d", ddl.Query, ddl.FinishedTs)
	return nil
}

func (t tapCallback) OnCheckpoint(_ context.Context, cp minicdc.Checkpoint) error {
	c := t.c
	c.count(InvMonotonic)
	if cp.GlobalResolvedTs < c.cpGlobal {
		c.fail(InvMonotonic, "checkpoint %d after %d", cp.GlobalResolvedTs, c.cpGlobal)
	}
	c.cpGlobal = max(c.cpGlobal, cp.GlobalResolvedTs)
	ids := make([]int64, 0, len(cp.TableResolvedTs))
	for id := range cp.TableResolvedTs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ts := cp.TableResolvedTs[id]
		if prev, ok := c.cpTable[id]; ok && ts < prev {
			c.fail(InvMonotonic, "table %d: checkpoint %d after %d", id, ts, prev)
		}
		c.cpTable[id] = max(c.cpTable[id], ts)
	}
	c.w.trace("checkpoint %d", cp.GlobalResolvedTs)
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
