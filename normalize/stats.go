package normalize

import (
	"github.com/searchfabric/sfemu/reorder"
)

// PartitionStats is a snapshot of one partition's bridge state.
type PartitionStats struct {
	Partition  string
	Collection string
	Epoch      uint64
	// NextSeq is the seq the next emitted mutation gets.
	NextSeq uint64
	// ResolvedTs is the progress last stored with the emulator.
	ResolvedTs uint64
	// UnsealedRows and UnsealedBytes are what the reorder buffer holds
	// against its bounds; SealedRows are sealed but not yet drained.
	UnsealedRows  int
	UnsealedBytes int64
	SealedRows    int
	// RowsIn counts buffered row mutations, Ingested acknowledged ones,
	// both since Open.
	RowsIn   uint64
	Ingested uint64
	// HeldBytes are charged to the memory quota (RS1); SpilledRows are on
	// disk, not yet drained; SpilledBytes and SpillFiles are the runs not
	// yet removed (RS4).
	HeldBytes    int64
	SpilledRows  int
	SpilledBytes int64
	SpillFiles   int
	// SpillRuns counts the runs written since Open.
	SpillRuns uint64
}

// Stats returns a snapshot per partition, sorted by partition name.
func (b *Bridge) Stats() []PartitionStats {
	b.ctl.Lock()
	defer b.ctl.Unlock()
	out := make([]PartitionStats, 0, len(b.parts))
	for _, p := range b.parts {
		st := PartitionStats{Partition: p.name, Collection: p.coll.name, Epoch: p.seq.epoch, NextSeq: p.seq.next,
			ResolvedTs: p.advanced, RowsIn: p.rows.Load(), Ingested: p.ingested}
		_ = p.buf.Do(func(buf *reorder.Buffer[Mutation]) error {
			st.UnsealedRows, st.UnsealedBytes = buf.Unsealed()
			st.SealedRows = buf.Sealed()
			st.HeldBytes = buf.Held()
			sp := buf.Spilled()
			st.SpilledRows, st.SpilledBytes, st.SpillFiles, st.SpillRuns = sp.Rows, sp.Bytes, sp.Files, sp.Runs
			return nil
		})
		out = append(out, st)
	}
	return out
}
