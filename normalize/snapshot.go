package normalize

// The initial snapshot's ingest (N41-N44): the rows of a table read at
// the snapshot ts S go into the table's own source partition, through the
// same lowering as the row path, in an epoch of their own. The bridge is
// not involved: the snapshot runs before the stream's bridge opens, and
// that bridge then takes the next epoch (N4).

import (
	"context"
	"fmt"
	"sync"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
)

// SnapshotConfig configures a SnapshotPartition.
type SnapshotConfig struct {
	// Partition is the source partition (PartitionName of the physical
	// table) and Collection the collection that maps it.
	Partition, Collection string
	// Epoch is the snapshot's epoch (N42); Token the collection's
	// current generation token.
	Epoch uint64
	Token string
	// Ts is the snapshot ts S: every row's commit_ts (N41).
	Ts uint64
	// Table is the logical table's schema at S; PhysicalID the path.
	Table      *minicdc.TableInfo
	PhysicalID int64
	// Roles overrides field roles (N18), as the bridge's config does.
	Roles RoleOverrides
	// MaxBatchRows and MaxBatchBytes cut batches (N21); 0 = defaults.
	MaxBatchRows  int
	MaxBatchBytes int64
}

// SnapshotRow is one row read at S: its record key and its values by
// column offset.
type SnapshotRow struct {
	Key    []byte
	Values []minicdc.Value
}

// SnapshotChunk is rows lowered to owned mutations, ready to ingest.
type SnapshotChunk struct {
	muts []Mutation
}

// Len is the number of rows in the chunk.
func (c *SnapshotChunk) Len() int { return len(c.muts) }

// Bytes is the chunk's held size (what a memory quota charges).
func (c *SnapshotChunk) Bytes() int64 {
	var n int64
	for i := range c.muts {
		n += c.muts[i].size()
	}
	return n
}

// Release returns the chunk's slab memory (after Ingest, or instead of it).
func (c *SnapshotChunk) Release() {
	for i := range c.muts {
		c.muts[i].release()
	}
	c.muts = nil
}

// SnapshotPartition ingests one partition's snapshot rows. Lower is safe
// for concurrent use (one copier per call), Ingest serializes the
// sequence: several regions of one table are read in parallel, and their
// chunks take consecutive seqs in the order they are ingested (N42).
type SnapshotPartition struct {
	sink  Sink
	cfg   SnapshotConfig
	shape *shape

	mu    sync.Mutex
	seq   seqCounter
	run   seqRun
	alloc protoAlloc
	cuts  []int
	err   error
	rows  uint64
}

// NewSnapshotPartition checks cfg and lowers the table's shape once.
func NewSnapshotPartition(sink Sink, cfg SnapshotConfig) (*SnapshotPartition, error) {
	switch {
	case cfg.Partition == "" || cfg.Collection == "":
		return nil, fmt.Errorf("normalize: snapshot: partition and collection are required")
	case cfg.Epoch == 0:
		return nil, fmt.Errorf("normalize: snapshot of %s: epoch must be >= 1", cfg.Partition)
	case cfg.Ts == 0:
		return nil, fmt.Errorf("normalize: snapshot of %s: ts must be > 0", cfg.Partition)
	case cfg.Table == nil:
		return nil, fmt.Errorf("normalize: snapshot of %s: no table info", cfg.Partition)
	case cfg.Token == "" || cfg.Token == apiv1.InitialGenerationToken:
		return nil, fmt.Errorf("normalize: snapshot of %s: collection %q has no generation yet", cfg.Partition, cfg.Collection)
	}
	if cfg.MaxBatchRows <= 0 {
		cfg.MaxBatchRows = DefaultMaxBatchRows
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	s, err := ddlmap.BuildShape(cfg.Table, cfg.Roles)
	if err != nil {
		return nil, fmt.Errorf("normalize: snapshot of %s: %w", cfg.Partition, err)
	}
	return &SnapshotPartition{sink: sink, cfg: cfg, shape: s, seq: seqCounter{epoch: cfg.Epoch, next: 1}}, nil
}

// Lower copies n rows (row(i) returns the i-th; its values are borrowed
// for the call) into owned upserts at commit_ts S (N41), through the row
// path's conversion (N15-N19). A row that does not lower is an error
// naming the partition and the key; nothing of the chunk is kept then.
func (p *SnapshotPartition) Lower(n int, row func(i int) (SnapshotRow, error)) (*SnapshotChunk, error) {
	var c rowCopier
	defer func() {
		if c.slab.cur != nil {
			c.slab.cur.release()
		}
	}()
	out := &SnapshotChunk{muts: make([]Mutation, 0, n)}
	for i := 0; i < n; i++ {
		r, err := row(i)
		if err == nil {
			err = c.copyImage(p.shape, p.cfg.Table, valueRow(r.Values), r.Key, p.cfg.PhysicalID, p.cfg.Ts, false)
		}
		if err == nil {
			err = c.buildKey(p.shape)
		}
		if err != nil {
			out.Release()
			return nil, fmt.Errorf("normalize: snapshot of %s (collection %q) at ts %d, row %x: %w", p.cfg.Partition, p.cfg.Collection, p.cfg.Ts, r.Key, err)
		}
		out.muts = append(out.muts, c.own(p.shape, p.cfg.Ts, apiv1.MutationKind_MUTATION_KIND_UPSERT, true))
	}
	return out, nil
}

// Ingest sends the chunk as batches (N21) with the next seqs of the
// snapshot's epoch (N42) and releases it. It returns after every batch
// was acknowledged; a failed or mis-acknowledged batch is fatal for the
// partition's snapshot (every later call returns the error, N7).
func (p *SnapshotPartition) Ingest(ctx context.Context, ch *SnapshotChunk) error {
	defer ch.Release()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	muts := ch.muts
	p.cuts = cutPoints(len(muts), p.cfg.MaxBatchRows, p.cfg.MaxBatchBytes,
		func(i int) int64 { return muts[i].wireSize() }, func(int) string { return p.cfg.Token }, p.cuts)
	start := 0
	for _, end := range p.cuts {
		batch, rows := p.build(muts[start:end])
		start = end
		if err := p.run.check(p.cfg.Partition, batch); err != nil {
			p.err = err
			return err
		}
		resp, err := sinkIngest(ctx, p.sink, batch, rows)
		last := batch.GetFirstSeq() + uint64(len(batch.GetMutations())) - 1
		if err == nil && resp.GetLastSeq() != last {
			err = fmt.Errorf("emulator acknowledged last seq %d, sent %d..%d (outcome %s)", resp.GetLastSeq(), batch.GetFirstSeq(), last, resp.GetOutcome())
		}
		if err != nil {
			p.err = fmt.Errorf("normalize: snapshot ingest %s epoch %d seq %d..%d: %w", p.cfg.Partition, p.cfg.Epoch, batch.GetFirstSeq(), last, err)
			return p.err
		}
		p.rows += uint64(len(batch.GetMutations()))
	}
	return nil
}

// build turns muts into the batch of the next seqs; the protobufs hold
// copies of every byte (as batchBuilder.build).
func (p *SnapshotPartition) build(muts []Mutation) (*apiv1.MutationBatch, *contract.Rows) {
	b := &apiv1.MutationBatch{
		SourcePartition: p.cfg.Partition, SourceEpoch: p.cfg.Epoch, FirstSeq: p.seq.assign(len(muts)),
		SchemaGenerationToken: p.cfg.Token, Collection: p.cfg.Collection,
	}
	_, positional := p.sink.(RowSink)
	return b, p.alloc.assemble(b, len(muts), func(i int) *Mutation { return &muts[i] }, positional)
}

// NextSeq is the next seq of the snapshot's epoch (1 + the seqs used).
func (p *SnapshotPartition) NextSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq.next
}

// Rows is the number of rows acknowledged so far.
func (p *SnapshotPartition) Rows() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rows
}

// Finish stores the partition's progress at S in the snapshot's epoch
// (N43): every row at or below S was acknowledged. Call it once every
// range of the partition was ingested.
func (p *SnapshotPartition) Finish(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if _, err := p.sink.AdvancePartition(ctx, &apiv1.PartitionProgress{SourcePartition: p.cfg.Partition, SourceEpoch: p.cfg.Epoch, ResolvedTs: p.cfg.Ts}); err != nil {
		p.err = fmt.Errorf("normalize: snapshot of %s: storing progress %d in epoch %d: %w", p.cfg.Partition, p.cfg.Ts, p.cfg.Epoch, err)
		return p.err
	}
	return nil
}
