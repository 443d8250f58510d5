package sim

import (
	"context"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
	"google.golang.org/protobuf/proto"
)

// Mutant is a deliberate bug the simulator must catch (SIM20). A mutant
// is armed when a fault of Config.MutantOn begins (or, with MutantOn
// empty, from the first step on) and then applies once, or, where a bug
// is a state (a write cache that never flushes), until the next restart.
// Row mutants sit between the runtime and the bridge; sink mutants
// between the bridge and the checker, so the checker and the emulator see
// the mutated stream.
type Mutant string

const (
	MutantNone Mutant = ""
	// MutantDropRow loses one row change on its way to the bridge.
	MutantDropRow Mutant = "drop-row"
	// MutantDupRow delivers one row change twice (duplicate suppression
	// broken).
	MutantDupRow Mutant = "dup-row"
	// MutantSeqGap skips a seq number in one batch.
	MutantSeqGap Mutant = "seq-gap"
	// MutantEpochReuse sends one batch or progress call of a restarted
	// adapter in the previous epoch.
	MutantEpochReuse Mutant = "epoch-reuse"
	// MutantProgressRegress sends one progress call below the progress
	// already acknowledged.
	MutantProgressRegress Mutant = "progress-regress"
	// MutantLateRow re-sends an acknowledged mutation in the same epoch.
	MutantLateRow Mutant = "late-row"
	// MutantLostAck acknowledges a partition's progress writes without
	// storing them, until the next restart (a write cache never flushed).
	MutantLostAck Mutant = "lost-ack"
	// MutantSwallowError reports a failed storage write of a batch as
	// success.
	MutantSwallowError Mutant = "swallow-error"
	// MutantRetryTwice re-sends a batch after a slow write (a client retry
	// that is not idempotent).
	MutantRetryTwice Mutant = "retry-twice"
	// MutantAnonymousFatal loses the trigger of one fatal stop.
	MutantAnonymousFatal Mutant = "anonymous-fatal"
	// MutantReseal damages a stored document at rest and seals it with a
	// checksum of the damaged bytes (a store that skipped the check).
	MutantReseal Mutant = "reseal"
	// MutantMetaFirst makes a torn write's meta page durable before the
	// pages it points at (a commit that fsyncs in the wrong order).
	MutantMetaFirst Mutant = "meta-first"
)

// AllMutants lists every mutant.
var AllMutants = []Mutant{MutantDropRow, MutantDupRow, MutantSeqGap, MutantEpochReuse, MutantProgressRegress,
	MutantLateRow, MutantLostAck, MutantSwallowError, MutantRetryTwice, MutantAnonymousFatal, MutantReseal, MutantMetaFirst}

// mutantState tracks the run's mutant.
type mutantState struct {
	armed    bool
	applied  bool
	lostPart string // MutantLostAck: the partition whose progress is not stored
	// lastAcked is a copy of the first mutation of the last acknowledged
	// batch, with its partition and epoch (MutantLateRow).
	lastAcked                *apiv1.Mutation
	lastAckedPart            string
	lastAckedEpoch, lastColl uint64
}

// fault arms the mutant when a fault of its kind begins.
func (m *mutantState) fault(w *world, k Kind) {
	if w.mutant != MutantNone && w.cfg.MutantOn == k && !m.applied {
		m.armed = true
	}
}

// stepped arms a mutant that waits for no fault.
func (m *mutantState) stepped(w *world) {
	if w.mutant != MutantNone && w.cfg.MutantOn == "" && w.step >= 1 && !m.applied {
		m.armed = true
	}
}

// arm reports whether the mutant applies now, and marks it applied.
func (m *mutantState) arm(w *world) bool {
	if !m.armed || m.applied {
		return false
	}
	m.applied = true
	w.trace("mutant %s applied", w.mutant)
	return true
}

// restarted ends a mutant that lasts until a restart.
func (m *mutantState) restarted() { m.lostPart = "" }

// mutTap sits between the runtime and the checker's tap + bridge.
type mutTap struct {
	w    *world
	next minicdc.Callback
}

func (w *world) mutateTap(cb minicdc.Callback) minicdc.Callback {
	switch w.mutant {
	case MutantDropRow, MutantDupRow:
		return mutTap{w: w, next: cb}
	}
	return cb
}

func (t mutTap) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	if t.w.mut.arm(t.w) {
		if t.w.mutant == MutantDropRow {
			return nil
		}
		if err := t.next.OnRowChanged(ctx, ev); err != nil {
			return err
		}
	}
	return t.next.OnRowChanged(ctx, ev)
}

func (t mutTap) OnDDL(ctx context.Context, ddl minicdc.DDL) error { return t.next.OnDDL(ctx, ddl) }

func (t mutTap) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	return t.next.OnCheckpoint(ctx, cp)
}

// mutSink sits between the bridge and the checker.
type mutSink struct {
	w    *world
	next normalize.Sink
}

func (w *world) mutateSink(s normalize.Sink) normalize.Sink {
	switch w.mutant {
	case MutantSeqGap, MutantEpochReuse, MutantProgressRegress, MutantLateRow, MutantRetryTwice:
		return &mutSink{w: w, next: s}
	}
	return s
}

func (s *mutSink) PutCollectionSchema(ctx context.Context, req *apiv1.PutCollectionSchemaRequest) (*apiv1.PutCollectionSchemaResponse, error) {
	return s.next.PutCollectionSchema(ctx, req)
}

func (s *mutSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	w, m := s.w, s.w.mut
	switch w.mutant {
	case MutantSeqGap:
		if len(b.GetMutations()) > 0 && m.arm(w) {
			b = proto.Clone(b).(*apiv1.MutationBatch)
			b.FirstSeq++
			for _, mu := range b.Mutations {
				mu.Seq++
			}
		}
	case MutantEpochReuse:
		if b.GetSourceEpoch() > 1 && m.arm(w) {
			b = proto.Clone(b).(*apiv1.MutationBatch)
			b.SourceEpoch--
		}
	case MutantLateRow:
		if m.lastAcked != nil && m.lastAckedPart == b.GetSourcePartition() && m.lastAckedEpoch == b.GetSourceEpoch() &&
			w.chk.acked[m.lastAckedPart] >= m.lastAcked.GetCommitTs() && w.chk.ackedEpoch[m.lastAckedPart] == b.GetSourceEpoch() && m.arm(w) {
			b = proto.Clone(b).(*apiv1.MutationBatch)
			old := proto.Clone(m.lastAcked).(*apiv1.Mutation)
			b.Mutations = append([]*apiv1.Mutation{old}, b.Mutations...)
			for i, mu := range b.Mutations {
				mu.Seq = b.FirstSeq + uint64(i)
			}
		}
	case MutantRetryTwice:
		if m.arm(w) {
			resp, err := s.next.Ingest(ctx, b)
			if err != nil {
				return resp, err
			}
		}
	}
	resp, err := s.next.Ingest(ctx, b)
	if err == nil && len(b.GetMutations()) > 0 {
		m.lastAcked = proto.Clone(b.GetMutations()[0]).(*apiv1.Mutation)
		m.lastAckedPart, m.lastAckedEpoch = b.GetSourcePartition(), b.GetSourceEpoch()
	}
	return resp, err
}

func (s *mutSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	w, m := s.w, s.w.mut
	switch w.mutant {
	case MutantEpochReuse:
		if p.GetSourceEpoch() > 1 && m.arm(w) {
			p = proto.Clone(p).(*apiv1.PartitionProgress)
			p.SourceEpoch--
		}
	case MutantProgressRegress:
		if a := w.chk.acked[p.GetSourcePartition()]; a > 0 && m.arm(w) {
			p = proto.Clone(p).(*apiv1.PartitionProgress)
			p.ResolvedTs = a - 1
		}
	}
	return s.next.AdvancePartition(ctx, p)
}

func (s *mutSink) GetProgress(ctx context.Context, req *apiv1.GetProgressRequest) (*apiv1.GetProgressResponse, error) {
	return s.next.GetProgress(ctx, req)
}

func (s *mutSink) ListCollections(ctx context.Context, req *apiv1.ListCollectionsRequest) (*apiv1.ListCollectionsResponse, error) {
	return s.next.ListCollections(ctx, req)
}
