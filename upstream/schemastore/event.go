package schemastore

import "github.com/searchfabric/sfemu/upstream/tidbcodec/model"

// DDLEvent is one finished DDL as the runtime emits it, with every
// influenced-table detail kept (nothing is flattened away). Values returned
// by the store are shared and read-only.
type DDLEvent struct {
	JobID         int64
	Type          int // TiDB ActionType number
	SchemaID      int64
	TableID       int64
	SchemaName    string
	TableName     string
	Query         string
	SchemaVersion int64
	// FinishedTs is the commit ts of the job's Done row: the DDL's effective ts.
	FinishedTs uint64
	// TableInfo is the post-DDL table (nil for schema-level DDLs and drops).
	TableInfo *model.TableInfo
	// MultipleTableInfos carries every table of multi-table DDLs
	// (rename tables, create tables).
	MultipleTableInfos []*model.TableInfo
	// NeedDroppedTables lists physical table ids this DDL removes.
	NeedDroppedTables []int64
	// NeedAddedTables lists physical tables this DDL creates.
	NeedAddedTables []AddedTable
	// UpdatedSchemas lists tables that moved between schemas.
	UpdatedSchemas []SchemaIDChange
	// TableNameChange is set when the DDL adds, drops or renames table names
	// (create, create tables, drop, rename, rename tables, drop schema,
	// recover, truncate).
	TableNameChange *TableNameChange
	// ExtraSchemaName and ExtraTableName are the old names of a renamed
	// table (RENAME TABLE), empty otherwise.
	ExtraSchemaName string
	ExtraTableName  string
	// StartTs is the start ts of the transaction that wrote the job's Done row.
	StartTs uint64
}

// AddedTable is a physical table created by a DDL.
type AddedTable struct {
	SchemaID int64
	TableID  int64
}

// SchemaIDChange records a table moving from one schema to another.
type SchemaIDChange struct {
	TableID     int64
	OldSchemaID int64
	NewSchemaID int64
}

// TableNameChange records renamed and dropped table names.
type TableNameChange struct {
	AddName  []SchemaTableName
	DropName []SchemaTableName
	// DropDatabaseName is set by DROP DATABASE: every table of that schema
	// is gone.
	DropDatabaseName string
}

// SchemaTableName is a qualified table name.
type SchemaTableName struct {
	SchemaName string
	TableName  string
}

// DDLEventState is the store's progress for one table: ResolvedTs is how far
// the DDL history is known complete; MaxEventTs is the FinishedTs of the
// newest DDL that touched the table.
type DDLEventState struct {
	ResolvedTs uint64
	MaxEventTs uint64
}
