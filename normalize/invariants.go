package normalize

import (
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/internal/invariants"
)

// seqRun is the seq-contiguity invariant of one partition (N6, N21),
// checked on every batch the bridge sends when built with -tags
// invariants: within a (partition, epoch) the batches carry seqs 1, 2,
// 3, ... without gap or repeat, and each batch numbers its mutations
// first_seq, first_seq+1, .... A DROP restarts the run at 1 (N29). It is
// kept apart from seqCounter so a bug there cannot hide itself.
type seqRun struct {
	epoch uint64
	next  uint64 // 0: no batch sent in this run yet
}

// restart expects the next batch to start a new run at seq 1 (N29).
func (r *seqRun) restart() { r.next = 0 }

// check verifies batch against the run and advances it. Without the
// invariants tag it does nothing.
func (r *seqRun) check(partition string, b *apiv1.MutationBatch) error {
	if !invariants.Enabled {
		return nil
	}
	if r.next == 0 {
		r.epoch, r.next = b.GetSourceEpoch(), 1
	}
	if b.GetSourceEpoch() != r.epoch {
		return fmt.Errorf("normalize: invariant N6 broken: %s batch of epoch %d inside the run of epoch %d", partition, b.GetSourceEpoch(), r.epoch)
	}
	if b.GetFirstSeq() != r.next {
		return fmt.Errorf("normalize: invariant N6 broken: %s epoch %d batch starts at seq %d, want %d", partition, r.epoch, b.GetFirstSeq(), r.next)
	}
	for i, m := range b.GetMutations() {
		if want := b.GetFirstSeq() + uint64(i); m.GetSeq() != want {
			return fmt.Errorf("normalize: invariant N21 broken: %s epoch %d mutation %d of the batch has seq %d, want %d", partition, r.epoch, i, m.GetSeq(), want)
		}
	}
	r.next += uint64(len(b.GetMutations()))
	return nil
}
