// Package emulator is the search-fabric emulator: collections and their schema
// lineage, the strict ingest contract (ordered, idempotent mutation batches
// keyed by source partition, epoch and sequence), the document, text, vector
// and metadata modalities, applied_ts/safe_ts watermarks, bbolt persistence and
// the query API.
package emulator
