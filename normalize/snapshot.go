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

// SnapshotPartition ingests one partition's snapshot rows. Lower and the
// building half of Ingest are safe for concurrent use (one copier and one
// batch builder per call, outside the partition's lock); the sending half
// serializes the sequence: several regions of one table are read in
// parallel, and their chunks take consecutive seqs in the order they are
// sent (N42). Chunks that wait while a batch is in flight are sent
// together as one batch (group commit, N46).
type SnapshotPartition struct {
	sink   Sink
	cfg    SnapshotConfig
	shape  *shape
	allocs sync.Pool // *protoAlloc

	qmu   sync.Mutex
	queue []snapPiece // built, waiting to be sent, in arrival order

	mu   sync.Mutex // the sender's: seq, run, err, rows, waiters' results
	seq  seqCounter
	run  seqRun
	err  error
	rows uint64
}

// snapPiece is one built batch of a chunk, its seqs not yet assigned.
type snapPiece struct {
	b     *apiv1.MutationBatch
	rows  *contract.Rows
	bytes int64 // wire size estimate (N21's byte bound)
	w     *snapWaiter
}

// snapWaiter is one Ingest call's result, set by whichever call sends its
// pieces (under the partition's mu).
type snapWaiter struct {
	done bool
	err  error
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

// Ingest sends the chunk with the next seqs of the snapshot's epoch (N42)
// and releases it. The chunk's batches (cut by N21's bounds) are built
// outside the partition's lock; a call that finds the partition's lock
// free sends every batch waiting by then, its own and those of calls that
// queued while the previous send was in flight, merged into as few
// batches as N21's bounds allow (group commit, N46), in arrival order. It
// returns after its rows were acknowledged; a failed or mis-acknowledged
// batch is fatal for the partition's snapshot (every later call returns
// the error, N7), and every call whose rows it held returns it.
func (p *SnapshotPartition) Ingest(ctx context.Context, ch *SnapshotChunk) error {
	w := &snapWaiter{}
	pieces := p.buildPieces(ch, w)
	ch.Release()
	if len(pieces) > 0 {
		p.qmu.Lock()
		p.queue = append(p.queue, pieces...)
		p.qmu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.done {
		p.qmu.Lock()
		q := p.queue
		p.queue = nil
		p.qmu.Unlock()
		p.send(ctx, q)
		if !w.done { // no rows of its own
			w.err = p.err
		}
	}
	return w.err
}

// buildPieces turns the chunk into batches cut by N21's bounds; the
// protobufs hold copies of every byte (as batchBuilder.build), so the
// chunk may be released once it returns. Seqs are assigned when sent.
func (p *SnapshotPartition) buildPieces(ch *SnapshotChunk, w *snapWaiter) []snapPiece {
	muts := ch.muts
	if len(muts) == 0 {
		return nil
	}
	a, _ := p.allocs.Get().(*protoAlloc)
	if a == nil {
		a = &protoAlloc{}
	}
	defer p.allocs.Put(a)
	_, positional := p.sink.(RowSink)
	cuts := cutPoints(len(muts), p.cfg.MaxBatchRows, p.cfg.MaxBatchBytes,
		func(i int) int64 { return muts[i].wireSize() }, func(int) string { return p.cfg.Token }, nil)
	out := make([]snapPiece, 0, len(cuts))
	start := 0
	for _, end := range cuts {
		part := muts[start:end]
		var bytes int64
		for i := range part {
			bytes += part[i].wireSize()
		}
		b := &apiv1.MutationBatch{
			SourcePartition: p.cfg.Partition, SourceEpoch: p.cfg.Epoch,
			SchemaGenerationToken: p.cfg.Token, Collection: p.cfg.Collection,
		}
		rows := a.assembleRows(b, len(part), func(i int) *Mutation { return &part[i] }, positional)
		out = append(out, snapPiece{b: b, rows: rows, bytes: bytes, w: w})
		start = end
	}
	return out
}

// send sends q's pieces in order, consecutive ones merged while N21's
// bounds allow (N46), each merged batch with the next seqs, and sets the
// result of every waiter in q. Called with p.mu held.
func (p *SnapshotPartition) send(ctx context.Context, q []snapPiece) {
	for start := 0; start < len(q); {
		end, rows, bytes := start+1, len(q[start].b.GetMutations()), q[start].bytes
		for end < len(q) && mergeable(q[start], q[end]) &&
			rows+len(q[end].b.GetMutations()) <= p.cfg.MaxBatchRows && bytes+q[end].bytes <= p.cfg.MaxBatchBytes {
			rows += len(q[end].b.GetMutations())
			bytes += q[end].bytes
			end++
		}
		if p.err == nil {
			p.err = p.sendGroup(ctx, q[start:end], rows)
		}
		for _, pc := range q[start:end] {
			if pc.w.err == nil {
				pc.w.err = p.err
			}
			pc.w.done = true
		}
		start = end
	}
}

// mergeable reports whether two pieces can travel in one batch: both in
// the map form, or both positional in one layout.
func mergeable(a, b snapPiece) bool {
	if (a.rows == nil) != (b.rows == nil) {
		return false
	}
	return a.rows == nil || a.rows.Layout == b.rows.Layout
}

// sendGroup sends group (rows mutations in all) as one batch with the
// next seqs.
func (p *SnapshotPartition) sendGroup(ctx context.Context, group []snapPiece, n int) error {
	batch, rows := group[0].b, group[0].rows
	if len(group) > 1 {
		first := group[0].b
		batch = &apiv1.MutationBatch{
			SourcePartition: first.GetSourcePartition(), SourceEpoch: first.GetSourceEpoch(),
			SchemaGenerationToken: first.GetSchemaGenerationToken(), Collection: first.GetCollection(),
			Mutations: make([]*apiv1.Mutation, 0, n),
		}
		if rows != nil {
			if rows.Enc != nil { // E96
				rows = &contract.Rows{Layout: rows.Layout, Enc: make([][]byte, 0, n)}
			} else {
				rows = &contract.Rows{Layout: rows.Layout, Vals: make([][]*apiv1.Value, 0, n)}
			}
		}
		for _, pc := range group {
			batch.Mutations = append(batch.Mutations, pc.b.GetMutations()...)
			if rows != nil {
				rows.Vals = append(rows.Vals, pc.rows.Vals...)
				rows.Enc = append(rows.Enc, pc.rows.Enc...)
			}
		}
	}
	batch.FirstSeq = p.seq.assign(n)
	for i, m := range batch.Mutations {
		m.Seq = batch.FirstSeq + uint64(i)
	}
	if err := p.run.check(p.cfg.Partition, batch); err != nil {
		return err
	}
	last := batch.GetFirstSeq() + uint64(n) - 1
	resp, err := sinkIngest(ctx, p.sink, batch, rows)
	if err == nil && resp.GetLastSeq() != last {
		err = fmt.Errorf("emulator acknowledged last seq %d, sent %d..%d (outcome %s)", resp.GetLastSeq(), batch.GetFirstSeq(), last, resp.GetOutcome())
	}
	if err != nil {
		return fmt.Errorf("normalize: snapshot ingest %s epoch %d seq %d..%d: %w", p.cfg.Partition, p.cfg.Epoch, batch.GetFirstSeq(), last, err)
	}
	p.rows += uint64(n)
	return nil
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
