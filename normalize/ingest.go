package normalize

import (
	"context"
	"fmt"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/reorder"
)

// ingestDrained sequences and ingests the rows drained into p.drained
// (N6, N21). Caller holds b.ctl.
func (b *Bridge) ingestDrained(ctx context.Context, p *partition) error {
	defer func() {
		clear(p.drained) // release slab memory
		p.drained = p.drained[:0]
		if cap(p.drained) > 4*b.cfg.MaxBatchRows {
			p.drained = nil // a backlog's drain: do not keep its array
		}
	}()
	if len(p.drained) == 0 {
		return nil
	}
	coll := p.coll
	if !coll.active || p.retired {
		return fmt.Errorf("normalize: %s: %d sealed rows (first commit_ts=%d) for collection %q that is dropped or no longer maps the partition",
			p.name, len(p.drained), p.drained[0].CommitTs, coll.name)
	}
	items := p.drained
	p.cuts = cutPoints(len(items), b.cfg.MaxBatchRows, b.cfg.MaxBatchBytes,
		func(i int) int64 { return items[i].Value.wireSize() }, func(int) string { return coll.token }, p.cuts)
	_, positional := b.sink.(RowSink)
	bb := &batchBuilder{partition: p.name, collection: coll.name, token: coll.token, seq: &p.seq, alloc: &p.alloc, positional: positional}
	if len(p.cuts) == 1 {
		batch, rows := bb.build(items)
		return b.ingestBatch(ctx, p, batch, rows)
	}
	return b.ingestPipelined(ctx, p, bb, items, p.cuts)
}

// ingestPipelined builds the batches of a drained run on a helper
// goroutine, at most two ahead, while the caller ingests them strictly in
// seq order, each after the previous one was acknowledged (N21, N22):
// building batch i+1 overlaps the emulator's commit of batch i. On the
// first failure the builder stops and the bridge is stopped (N7). The
// builder owns p.seq, p.alloc and items until it has exited, which this
// function waits for before returning.
func (b *Bridge) ingestPipelined(ctx context.Context, p *partition, bb *batchBuilder, items []reorder.Item[Mutation], cuts []int) error {
	type built struct {
		batch *apiv1.MutationBatch
		rows  *contract.Rows
	}
	ready := make(chan built, 1)
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer close(ready)
		start := 0
		defer func() {
			for i := start; i < len(items); i++ {
				items[i].Value.release() // not built: recycle the slab memory
			}
		}()
		for _, end := range cuts {
			batch, rows := bb.build(items[start:end])
			start = end
			select {
			case ready <- built{batch, rows}:
			case <-quit:
				return
			}
		}
	}()
	var err error
	for bt := range ready {
		if err = b.ingestBatch(ctx, p, bt.batch, bt.rows); err != nil {
			break
		}
	}
	close(quit)
	<-exited
	return err
}

// ingestBatch sends one batch and checks its acknowledgement; a failure
// stops the bridge (N7).
func (b *Bridge) ingestBatch(ctx context.Context, p *partition, batch *apiv1.MutationBatch, rows *contract.Rows) error {
	if err := p.seqRun.check(p.name, batch); err != nil {
		return b.stop(err)
	}
	resp, err := sinkIngest(ctx, b.sink, batch, rows)
	if err != nil {
		return b.stop(fmt.Errorf("normalize: ingest %s epoch %d seq %d..%d: %w", p.name, batch.GetSourceEpoch(),
			batch.GetFirstSeq(), batch.GetFirstSeq()+uint64(len(batch.GetMutations()))-1, err))
	}
	last := batch.GetFirstSeq() + uint64(len(batch.GetMutations())) - 1
	if resp.GetLastSeq() != last {
		return b.stop(fmt.Errorf("normalize: ingest %s: emulator acknowledged last seq %d, sent %d..%d (outcome %s)",
			p.name, resp.GetLastSeq(), batch.GetFirstSeq(), last, resp.GetOutcome()))
	}
	p.stateInSink = true
	p.ingested += uint64(len(batch.GetMutations()))
	return nil
}
