package wire_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// Problem kinds the checker reports; each is one rule of
// specs/wire-faults.md.
const (
	kindSeq        = "seq"          // W3: gap, overlap or reorder of seqs in a (partition, epoch)
	kindOrder      = "commit-order" // W4: commit_ts decreasing in seq order within a partition
	kindDup        = "duplicate"    // W5: one (partition, epoch, primary key, commit_ts) sent twice
	kindLate       = "late-row"     // W6: a mutation at or below the partition's acknowledged progress
	kindProgress   = "progress"     // W7: AdvancePartition resolved ts regressed
	kindCheckpoint = "checkpoint"   // W8: a checkpoint (global or per table) regressed
	kindRowBehind  = "row-behind"   // W9: a row at or below its table's last checkpoint
)

// problem is one violation the checker saw.
type problem struct {
	kind, msg string
}

func (p problem) String() string { return p.kind + ": " + p.msg }

// checker observes the adapter's output at two points and checks the
// delivery invariants of specs/wire-faults.md as calls happen:
//
//   - as the sink the bridge writes to (it wraps the emulator): every
//     batch, recorded as it is sent, before the emulator sees it (W3-W6),
//     and every AdvancePartition (W7);
//   - as the runtime's tap: every row and checkpoint before the bridge
//     sees it (W8, W9).
//
// It never changes what passes through.
type checker struct {
	normalize.Sink // the emulator (set by wrapSink)

	mu         sync.Mutex
	lastSeq    map[string]uint64 // "partition/epoch" -> last seq sent
	lastCommit map[string]uint64 // "partition/epoch" -> commit_ts of the last mutation sent
	sent       map[string]bool   // "partition/epoch/pk/commit_ts" -> sent
	progress   map[string]uint64 // partition -> highest resolved ts acknowledged
	progEpoch  map[string]uint64 // partition -> epoch of that progress
	global     uint64            // last checkpoint's GlobalResolvedTs
	tableCp    map[int64]uint64  // table id -> last checkpoint's TableResolvedTs
	problems   []problem

	batches, mutations, advances, checkpoints, rows int
	partitions                                      map[string]int // partition -> mutations sent
}

func newChecker() *checker {
	return &checker{
		lastSeq: map[string]uint64{}, lastCommit: map[string]uint64{}, sent: map[string]bool{},
		progress: map[string]uint64{}, progEpoch: map[string]uint64{}, tableCp: map[int64]uint64{},
		partitions: map[string]int{},
	}
}

func (c *checker) wrapSink(s normalize.Sink) normalize.Sink {
	c.mu.Lock()
	c.Sink = s
	c.mu.Unlock()
	return c
}

func (c *checker) report(kind, format string, args ...any) {
	c.problems = append(c.problems, problem{kind: kind, msg: fmt.Sprintf(format, args...)})
}

// Ingest checks W3-W6 on the batch as sent, then forwards it.
func (c *checker) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	c.observeBatch(b)
	return c.Sink.Ingest(ctx, b)
}

func (c *checker) observeBatch(b *apiv1.MutationBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part, epoch := b.GetSourcePartition(), b.GetSourceEpoch()
	pe := fmt.Sprintf("%s/%d", part, epoch)
	c.batches++
	ms := b.GetMutations()
	if len(ms) == 0 {
		c.report(kindSeq, "%s: empty batch at first_seq %d", pe, b.GetFirstSeq())
		return
	}
	// W3: the batch continues the (partition, epoch) sequence exactly.
	switch last := c.lastSeq[pe]; {
	case b.GetFirstSeq() > last+1:
		c.report(kindSeq, "%s: gap: batch first_seq %d after last seq %d", pe, b.GetFirstSeq(), last)
	case b.GetFirstSeq() <= last:
		c.report(kindSeq, "%s: overlap or reorder: batch first_seq %d at or below last seq %d", pe, b.GetFirstSeq(), last)
	}
	for i, m := range ms {
		if want := b.GetFirstSeq() + uint64(i); m.GetSeq() != want {
			c.report(kindSeq, "%s: mutation %d of the batch has seq %d, want %d", pe, i, m.GetSeq(), want)
		}
		// W4: canonical order, commit_ts never decreases in seq order.
		if prev := c.lastCommit[pe]; m.GetCommitTs() < prev {
			c.report(kindOrder, "%s seq %d: commit_ts %d after %d", pe, m.GetSeq(), m.GetCommitTs(), prev)
		}
		c.lastCommit[pe] = max(c.lastCommit[pe], m.GetCommitTs())
		// W5: each change once per epoch.
		id := fmt.Sprintf("%s/%s/%d", pe, m.GetPrimaryKey(), m.GetCommitTs())
		if c.sent[id] {
			c.report(kindDup, "%s seq %d: pk %s at commit_ts %d sent again (%s)", pe, m.GetSeq(), m.GetPrimaryKey(), m.GetCommitTs(), m.GetKind())
		}
		c.sent[id] = true
		// W6: nothing at or below the progress this epoch acknowledged.
		if p, ok := c.progress[part]; ok && c.progEpoch[part] == epoch && m.GetCommitTs() <= p {
			c.report(kindLate, "%s seq %d: pk %s commit_ts %d at or below acknowledged progress %d", pe, m.GetSeq(), m.GetPrimaryKey(), m.GetCommitTs(), p)
		}
	}
	c.lastSeq[pe] = max(c.lastSeq[pe], b.GetFirstSeq()+uint64(len(ms))-1)
	c.mutations += len(ms)
	c.partitions[part] += len(ms)
}

// AdvancePartition forwards the progress and, once the emulator
// acknowledged it, checks it against the last one (W7).
func (c *checker) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	c.observeProgress(p)
	resp, err := c.Sink.AdvancePartition(ctx, p)
	if err == nil {
		c.mu.Lock()
		part := p.GetSourcePartition()
		if p.GetResolvedTs() >= c.progress[part] {
			c.progress[part], c.progEpoch[part] = p.GetResolvedTs(), p.GetSourceEpoch()
		}
		c.mu.Unlock()
	}
	return resp, err
}

func (c *checker) observeProgress(p *apiv1.PartitionProgress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advances++
	if prev := c.progress[p.GetSourcePartition()]; p.GetResolvedTs() < prev {
		c.report(kindProgress, "%s epoch %d: resolved ts %d sent after %d", p.GetSourcePartition(), p.GetSourceEpoch(), p.GetResolvedTs(), prev)
	}
}

// tap is the checker's minicdc.Callback side (W8, W9).
type checkerTap struct{ c *checker }

func (c *checker) tap() minicdc.Callback { return checkerTap{c} }

func (t checkerTap) OnRowChanged(_ context.Context, ev minicdc.RowChanged) error {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows++
	if cp, ok := c.tableCp[ev.TableID]; ok && ev.CommitTs <= cp {
		c.report(kindRowBehind, "table %d: row %x at commit_ts %d after checkpoint %d", ev.TableID, ev.RowKey, ev.CommitTs, cp)
	}
	return nil
}

func (t checkerTap) OnDDL(context.Context, minicdc.DDL) error { return nil }

func (t checkerTap) OnCheckpoint(_ context.Context, cp minicdc.Checkpoint) error {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkpoints++
	if cp.GlobalResolvedTs < c.global {
		c.report(kindCheckpoint, "global resolved ts %d after %d", cp.GlobalResolvedTs, c.global)
	}
	c.global = max(c.global, cp.GlobalResolvedTs)
	for _, id := range sortedIDs(cp.TableResolvedTs) {
		ts := cp.TableResolvedTs[id]
		if prev := c.tableCp[id]; ts < prev {
			c.report(kindCheckpoint, "table %d resolved ts %d after %d", id, ts, prev)
		}
		c.tableCp[id] = max(c.tableCp[id], ts)
	}
	return nil
}

func sortedIDs(m map[int64]uint64) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// snapshot returns the problems seen so far and the counters.
func (c *checker) snapshot() (problems []problem, summary string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := make([]string, 0, len(c.partitions))
	for p, n := range c.partitions {
		parts = append(parts, fmt.Sprintf("%s=%d", p, n))
	}
	sort.Strings(parts)
	return append([]problem(nil), c.problems...),
		fmt.Sprintf("batches=%d mutations=%d advances=%d checkpoints=%d rows=%d partitions[%s]",
			c.batches, c.mutations, c.advances, c.checkpoints, c.rows, strings.Join(parts, " "))
}

// counts returns the non-vacuity counters.
func (c *checker) counts() (mutations, advances, checkpoints, rows, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mutations, c.advances, c.checkpoints, c.rows, len(c.partitions)
}
