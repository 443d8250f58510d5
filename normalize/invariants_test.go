//go:build invariants

package normalize

import (
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// TestN6SeqContiguityInvariant (rule N6, N21): under -tags invariants a
// batch whose seqs do not continue its (partition, epoch) run stops the
// bridge before it is sent.
func TestN6SeqContiguityInvariant(t *testing.T) {
	h, part := oneTable(t, Config{})
	h.upsert(42, 110, row(1, "a", 0))
	h.checkpoint(map[int64]uint64{42: 120})
	require.Len(t, h.sink.mutationsOf(part), 1)
	// A seq counter that skips (a bug) must not reach the emulator.
	p, _ := h.b.partByID(42)
	p.seq.next++
	h.upsert(42, 130, row(2, "b", 0))
	err := h.b.Checkpoint(h.ctx, map[int64]uint64{42: 140})
	require.ErrorContains(t, err, "invariant N6 broken")
	require.Len(t, h.sink.mutationsOf(part), 1, "the bad batch was not sent")
}

// TestN29SeqRunRestartsAfterDrop (rule N29): after DROP and re-creation
// the partition's seqs restart at 1 in the same epoch, which the
// invariant accepts.
func TestN29SeqRunRestartsAfterDrop(t *testing.T) {
	var r seqRun
	require.NoError(t, r.check("table:42", batchOf(1, 1, 2)))
	require.Error(t, r.check("table:42", batchOf(1, 1)), "a repeated seq")
	r.restart()
	require.NoError(t, r.check("table:42", batchOf(1, 1)))
	require.NoError(t, r.check("table:42", batchOf(1, 2, 3)))
	require.Error(t, r.check("table:42", batchOf(2, 4)), "an epoch change inside a run")
}

func batchOf(epoch uint64, seqs ...uint64) *apiv1.MutationBatch {
	b := &apiv1.MutationBatch{SourcePartition: "table:42", SourceEpoch: epoch, FirstSeq: seqs[0]}
	for _, s := range seqs {
		b.Mutations = append(b.Mutations, &apiv1.Mutation{Seq: s})
	}
	return b
}
