// Package emulator is the search-fabric emulator: collections and their schema
// lineage, the strict ingest contract (ordered, idempotent mutation batches
// keyed by source partition, epoch and sequence), the document, text, vector
// and metadata modalities, applied_ts/safe_ts watermarks, bbolt persistence and
// the query API. The rules it enforces are numbered in
// specs/emulator-contract.md (E1..E92); tests cite them.
//
// One type, *Emulator, is what everything calls (gRPC in emulator/grpcapi,
// HTTP in emulator/httpapi, in-process adapters):
//
//	e, err := emulator.Open(dir, emulator.Options{}) // dir "" = in memory
//	e.PutCollectionSchema(ctx, req)  // create / change / drop (lineage, fence, policy)
//	e.Ingest(ctx, batch)             // admit + apply one MutationBatch atomically, durably
//	e.AdvancePartition(ctx, prog)    // partition resolved ts -> applied_ts / safe_ts
//	e.GetProgress(ctx, req)          // stored per-partition state (adapter resume point)
//	e.GetCollection / ListCollections / GetDocument / Search / Scan
//	e.Close()
//
// Every rejection is an *Error (contract.Error) with a Reason, the offending
// Field and Expected/Actual values. Collectors for Prometheus are registered
// on Options.Registerer or on the private Registry().
//
// Layout: contract (pure rules and the error type), docstore (versioned
// documents and tombstones), storage (bbolt), grpcapi (services); the text
// and vector indexes live in emulator/text and emulator/vector.
package emulator
