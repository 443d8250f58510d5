package wire_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// A mutant is a deliberate bug put into one run, to show that the checks
// of that run are not vacuous (W11). Sink mutants sit between the bridge
// and the checker (bridge -> mutant -> checker -> emulator): the checker
// and the emulator see exactly the mutated stream. Tap mutants sit between
// the runtime and the checker's tap and only feed the checker (the
// runtime's output to the bridge cannot be changed from a tap).
//
// A mutant does nothing until the test arms it (when the fault begins),
// then applies once, at the first delivery it can apply to. Each names
// the check that must report it.
type mutant struct {
	mode string
	// want is the problem kind the checker must report, or wantDiff when
	// CheckConsistency must report a difference.
	want string

	armed   atomic.Bool
	applied atomic.Bool

	mu   sync.Mutex
	next map[string]uint64 // "partition/epoch" -> next seq sent downstream
	held *apiv1.MutationBatch

	prevCp  *minicdc.Checkpoint
	lastRow *minicdc.RowChanged
}

const wantDiff = "consistency-diff"

// Mutant modes.
const (
	// Sink mutants.
	mutDropRow  = "drop-row"         // the marker row's upsert is not sent (a lost row)
	mutDupRow   = "dup-row"          // the marker row's upsert is sent twice (duplicate suppression off)
	mutSwap     = "swap"             // two mutations of one batch with different commit ts change places
	mutSkipSeq  = "skip-seq"         // one seq is skipped (a gap)
	mutDelayRow = "delay-row"        // the marker row is held back until after its partition's progress passed it
	mutRegress  = "regress-progress" // an AdvancePartition below the last one
	// Tap mutants.
	mutCheckpoint = "regress-checkpoint" // a stale checkpoint re-delivered after a newer one
	mutReplayRow  = "replay-row"         // a row re-delivered after a checkpoint passed it
)

func newMutant(mode string) *mutant {
	want := map[string]string{
		mutDropRow: wantDiff, mutDupRow: kindDup, mutSwap: kindOrder, mutSkipSeq: kindSeq,
		mutDelayRow: kindLate, mutRegress: kindProgress, mutCheckpoint: kindCheckpoint, mutReplayRow: kindRowBehind,
	}[mode]
	if want == "" {
		panic("unknown mutant " + mode)
	}
	return &mutant{mode: mode, want: want, next: map[string]uint64{}}
}

func (m *mutant) wrapSink(s normalize.Sink) normalize.Sink { return &mutantSink{Sink: s, m: m} }

func (m *mutant) wrapTap(c minicdc.Callback) minicdc.Callback { return &mutantTap{next: c, m: m} }

// active reports whether the mutant should act now (armed, not yet
// applied).
func (m *mutant) active() bool { return m.armed.Load() && !m.applied.Load() }

type mutantSink struct {
	normalize.Sink // the checker
	m              *mutant
}

// isMarker reports whether mutation x is the marker row's upsert.
func isMarker(x *apiv1.Mutation) bool {
	return x.GetKind() == apiv1.MutationKind_MUTATION_KIND_UPSERT && x.GetFields()["id"].GetInt64Value() == markerID
}

func (s *mutantSink) Ingest(ctx context.Context, b *apiv1.MutationBatch) (*apiv1.IngestResponse, error) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	out := proto.Clone(b).(*apiv1.MutationBatch)
	origLast := b.GetFirstSeq() + uint64(len(b.GetMutations())) - 1
	pe := fmt.Sprintf("%s/%d", b.GetSourcePartition(), b.GetSourceEpoch())
	if _, ok := m.next[pe]; !ok {
		m.next[pe] = b.GetFirstSeq()
	}
	if m.active() {
		m.mutate(out, pe)
	}
	if len(out.Mutations) == 0 {
		// Everything was taken out: the bridge is told its batch landed.
		return &apiv1.IngestResponse{Outcome: apiv1.IngestOutcome_INGEST_OUTCOME_APPLIED, SourceEpoch: b.GetSourceEpoch(), LastSeq: origLast}, nil
	}
	m.renumber(out, pe)
	resp, err := s.Sink.Ingest(ctx, out)
	if err != nil {
		return resp, err
	}
	// The bridge checks the acknowledged last seq against its own
	// numbering.
	r := proto.Clone(resp).(*apiv1.IngestResponse)
	r.LastSeq = origLast
	return r, nil
}

// renumber gives out the next seqs of its (partition, epoch).
func (m *mutant) renumber(out *apiv1.MutationBatch, pe string) {
	n := m.next[pe]
	out.FirstSeq = n
	for i, x := range out.Mutations {
		x.Seq = n + uint64(i)
	}
	m.next[pe] = n + uint64(len(out.Mutations))
}

func (m *mutant) mutate(out *apiv1.MutationBatch, pe string) {
	ms := out.Mutations
	switch m.mode {
	case mutDropRow, mutDupRow, mutDelayRow:
		for i, x := range ms {
			if !isMarker(x) {
				continue
			}
			switch m.mode {
			case mutDropRow:
				out.Mutations = append(ms[:i:i], ms[i+1:]...)
			case mutDupRow:
				out.Mutations = append(ms[:i+1:i+1], append([]*apiv1.Mutation{proto.Clone(x).(*apiv1.Mutation)}, ms[i+1:]...)...)
			case mutDelayRow:
				h := proto.Clone(out).(*apiv1.MutationBatch)
				h.Mutations = []*apiv1.Mutation{proto.Clone(x).(*apiv1.Mutation)}
				m.held = h
				out.Mutations = append(ms[:i:i], ms[i+1:]...)
			}
			m.applied.Store(true)
			return
		}
	case mutSwap:
		if len(ms) >= 2 && ms[0].GetCommitTs() < ms[len(ms)-1].GetCommitTs() {
			ms[0], ms[len(ms)-1] = ms[len(ms)-1], ms[0]
			m.applied.Store(true)
		}
	case mutSkipSeq:
		m.next[pe]++
		m.applied.Store(true)
	}
}

func (s *mutantSink) AdvancePartition(ctx context.Context, p *apiv1.PartitionProgress) (*apiv1.AdvancePartitionResponse, error) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	resp, err := s.Sink.AdvancePartition(ctx, p)
	if err != nil {
		return resp, err
	}
	if m.mode == mutRegress && m.active() && p.GetResolvedTs() > 1 {
		m.applied.Store(true)
		// The emulator refuses it (PROGRESS_REGRESSION); the checker must
		// have seen it anyway.
		_, _ = s.Sink.AdvancePartition(ctx, &apiv1.PartitionProgress{
			SourcePartition: p.GetSourcePartition(), SourceEpoch: p.GetSourceEpoch(), ResolvedTs: p.GetResolvedTs() - 1,
		})
	}
	if h := m.held; h != nil && h.GetSourcePartition() == p.GetSourcePartition() && p.GetResolvedTs() >= h.Mutations[0].GetCommitTs() {
		m.held = nil
		pe := fmt.Sprintf("%s/%d", h.GetSourcePartition(), h.GetSourceEpoch())
		m.renumber(h, pe)
		// The emulator refuses a late mutation (E43, LATE_MUTATION): the
		// run stops, as it should.
		if _, err := s.Sink.Ingest(ctx, h); err != nil {
			return resp, fmt.Errorf("delayed marker row: %w", err)
		}
	}
	return resp, nil
}

type mutantTap struct {
	next minicdc.Callback // the checker's tap
	m    *mutant
}

func (t *mutantTap) OnRowChanged(ctx context.Context, ev minicdc.RowChanged) error {
	if t.m.mode == mutReplayRow {
		t.m.mu.Lock()
		cp := ev
		cp.RowKey = append([]byte(nil), ev.RowKey...)
		cp.Row, cp.PreRow, cp.TableInfo = minicdc.Row{}, minicdc.Row{}, nil
		t.m.lastRow = &cp
		t.m.mu.Unlock()
	}
	return t.next.OnRowChanged(ctx, ev)
}

func (t *mutantTap) OnDDL(ctx context.Context, ev minicdc.DDL) error {
	return t.next.OnDDL(ctx, ev)
}

func (t *mutantTap) OnCheckpoint(ctx context.Context, cp minicdc.Checkpoint) error {
	m := t.m
	if err := t.next.OnCheckpoint(ctx, cp); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.mode {
	case mutCheckpoint:
		if m.active() && m.prevCp != nil && m.prevCp.GlobalResolvedTs < cp.GlobalResolvedTs {
			m.applied.Store(true)
			return t.next.OnCheckpoint(ctx, *m.prevCp)
		}
		prev := minicdc.Checkpoint{GlobalResolvedTs: cp.GlobalResolvedTs, TableResolvedTs: map[int64]uint64{}}
		for id, ts := range cp.TableResolvedTs {
			prev.TableResolvedTs[id] = ts
		}
		m.prevCp = &prev
	case mutReplayRow:
		if row := m.lastRow; m.active() && row != nil && cp.TableResolvedTs[row.TableID] >= row.CommitTs {
			m.applied.Store(true)
			return t.next.OnRowChanged(ctx, *row)
		}
	}
	return nil
}
