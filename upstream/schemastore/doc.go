// Package schemastore is the durable, multi-version schema history the
// Mini-CDC runtime decodes rows with and takes DDL events from.
//
// It starts from a meta snapshot (the `DBs` / `DB:<id>` hashes read through
// a kvevent.SnapshotReader) and follows the record span of
// mysql.tidb_ddl_job: finished jobs (state Done, FinishedTS := the row's
// commit ts) are cached and applied in (commit ts, schema version) order once
// the span's resolved ts passes them. Each physical table id keeps a list of
// versions, so GetTableInfo(table, ts) answers for any ts between the GC ts
// and the resolved ts, and every applied DDL becomes a DDLEvent carrying its
// full influenced-table metadata.
//
// The history lives in a bbolt file per keyspace, written with fsync,
// checksummed and counted per record, verified at open; a restart resumes
// from the persisted resolved ts.
//
// The runtime API mirrors TiCDC's schema store names: RegisterKeyspace,
// GetTableDDLEventState, RegisterTable, GetTableInfo (never blocks),
// FetchTableTriggerDDLEvents. Rules, divergences from TiCDC and the on-disk
// layout are in specs/schemastore.md (SS1-SS60); the code cites them.
package schemastore
