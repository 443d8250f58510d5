// Package normalize bridges Mini-CDC callbacks (per table path) to the
// emulator's canonical contract (per collection): source partition naming,
// epochs, sequence numbers assigned after the reorder buffer, batch cutting,
// and DDL to PutCollectionSchemaRequest mapping. The rules are in
// specs/normalization.md (N1-N38).
//
// Use:
//
//	res, _ := normalize.ResumePoint(ctx, sink, partitions, nowTs) // where to restart Mini-CDC
//	b, _ := normalize.New(normalize.Config{ClientID: ..., StartTs: res.StartTs, Tables: ...}, sink)
//	b.Open(ctx)             // epoch, bootstrap of new collections (zero-state tuple)
//	minicdc.Start(..., b)   // b implements minicdc.Callback
//
// The sink is the in-process *emulator.Emulator or grpcsink.New(conn).
//
// Row path: OnRowChanged copies the row into slab memory owned by its
// partition and adds it to that partition's reorder buffer (bounded; a full
// buffer waits for a seal up to the backpressure window, then fails with
// ErrReorderOverflow). Checkpoint and DDL paths seal, drain in
// (commit_ts, arrival) order, assign seqs, cut batches, ingest, and only
// then move progress or send the schema request.
package normalize
