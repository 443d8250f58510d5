package minicdc

import (
	"github.com/searchfabric/sfemu/upstream/schemastore"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// DDLAction is a DDL job's type in TiDB's numbering (stable across
// releases: numbers are never reused).
type DDLAction int

// The actions consumers of the runtime tell apart. Others keep their
// number and name (String).
const (
	ActionCreateSchema           = DDLAction(model.ActionCreateSchema)
	ActionDropSchema             = DDLAction(model.ActionDropSchema)
	ActionCreateTable            = DDLAction(model.ActionCreateTable)
	ActionDropTable              = DDLAction(model.ActionDropTable)
	ActionAddColumn              = DDLAction(model.ActionAddColumn)
	ActionDropColumn             = DDLAction(model.ActionDropColumn)
	ActionTruncateTable          = DDLAction(model.ActionTruncateTable)
	ActionModifyColumn           = DDLAction(model.ActionModifyColumn)
	ActionRenameTable            = DDLAction(model.ActionRenameTable)
	ActionAddTablePartition      = DDLAction(model.ActionAddTablePartition)
	ActionDropTablePartition     = DDLAction(model.ActionDropTablePartition)
	ActionTruncateTablePartition = DDLAction(model.ActionTruncateTablePartition)
	ActionDropView               = DDLAction(model.ActionDropView)
	ActionRecoverTable           = DDLAction(model.ActionRecoverTable)
	ActionExchangeTablePartition = DDLAction(model.ActionExchangeTablePartition)
	ActionRenameTables           = DDLAction(model.ActionRenameTables)
	ActionCreateTables           = DDLAction(model.ActionCreateTables)
	ActionReorganizePartition    = DDLAction(model.ActionReorganizePartition)
)

// String is TiDB's name of the action ("truncate table").
func (a DDLAction) String() string { return model.ActionType(a).String() }

// DDL is one DDL event as the runtime delivers it to OnDDL (M12): every
// field of the schema store's event, table definitions as TableInfo. The
// runtime builds a fresh value per event and never changes it afterwards,
// so the callee may keep it.
type DDL struct {
	JobID  int64
	Action DDLAction
	Query  string
	// SchemaVersion is TiDB's schema version after the job (strictly
	// increasing across DDLs).
	SchemaVersion int64
	// StartTs is the start ts of the transaction that finished the job;
	// FinishedTs its commit ts, the DDL's effective ts.
	StartTs    uint64
	FinishedTs uint64
	// SchemaID and TableID are the job's schema and table (for TRUNCATE
	// TABLE the table's id before the DDL).
	SchemaID int64
	TableID  int64
	// SchemaName and TableName are the names after the DDL; OldSchemaName
	// and OldTableName the names before a RENAME TABLE (empty otherwise).
	SchemaName, TableName       string
	OldSchemaName, OldTableName string
	// PreTable is the definition of the job's table before the DDL, as the
	// runtime last knew it (its startup probe of a configured table, then
	// each DDL of that table); nil when the runtime follows no such table.
	PreTable *TableInfo
	// Table is the definition after the DDL (nil for schema-level DDLs and
	// drops).
	Table *TableInfo
	// MultipleTables carries every table of multi-table DDLs (RENAME
	// TABLES, CREATE TABLES), post-DDL.
	MultipleTables []*TableInfo
	// DroppedTableIDs are the physical table ids the DDL removes;
	// AddedTables the physical tables it creates.
	DroppedTableIDs []int64
	AddedTables     []AddedTable
	// UpdatedSchemas lists tables that moved between schemas.
	UpdatedSchemas []SchemaMove
	// NameChange is set when the DDL adds, drops or renames table names.
	NameChange *TableNameChange
}

// AddedTable is a physical table created by a DDL.
type AddedTable struct {
	SchemaID int64
	TableID  int64
}

// SchemaMove records a table moving from one schema to another.
type SchemaMove struct {
	TableID     int64
	OldSchemaID int64
	NewSchemaID int64
}

// TableNameChange records added and dropped table names.
type TableNameChange struct {
	Added, Dropped []QualifiedName
	// DropDatabase is set by DROP DATABASE: every table of that schema is
	// gone.
	DropDatabase string
}

// QualifiedName is a schema-qualified table name.
type QualifiedName struct {
	Schema, Table string
}

// NewDDL builds the runtime's DDL from a schema store event; pre is the
// job table's definition before the DDL, or nil. ev is not retained.
func NewDDL(ev *schemastore.DDLEvent, pre *TableInfo) DDL {
	d := DDL{
		JobID: ev.JobID, Action: DDLAction(ev.Type), Query: ev.Query, SchemaVersion: ev.SchemaVersion,
		StartTs: ev.StartTs, FinishedTs: ev.FinishedTs, SchemaID: ev.SchemaID, TableID: ev.TableID,
		SchemaName: ev.SchemaName, TableName: ev.TableName,
		OldSchemaName: ev.ExtraSchemaName, OldTableName: ev.ExtraTableName,
		PreTable: pre, Table: NewTableInfo(ev.TableInfo),
		DroppedTableIDs: append([]int64(nil), ev.NeedDroppedTables...),
	}
	if ev.MultipleTableInfos != nil {
		d.MultipleTables = make([]*TableInfo, len(ev.MultipleTableInfos))
		for i, ti := range ev.MultipleTableInfos {
			d.MultipleTables[i] = NewTableInfo(ti)
		}
	}
	for _, a := range ev.NeedAddedTables {
		d.AddedTables = append(d.AddedTables, AddedTable{SchemaID: a.SchemaID, TableID: a.TableID})
	}
	for _, u := range ev.UpdatedSchemas {
		d.UpdatedSchemas = append(d.UpdatedSchemas, SchemaMove{TableID: u.TableID, OldSchemaID: u.OldSchemaID, NewSchemaID: u.NewSchemaID})
	}
	if c := ev.TableNameChange; c != nil {
		d.NameChange = &TableNameChange{DropDatabase: c.DropDatabaseName}
		for _, n := range c.AddName {
			d.NameChange.Added = append(d.NameChange.Added, QualifiedName{Schema: n.SchemaName, Table: n.TableName})
		}
		for _, n := range c.DropName {
			d.NameChange.Dropped = append(d.NameChange.Dropped, QualifiedName{Schema: n.SchemaName, Table: n.TableName})
		}
	}
	return d
}

// IsDrop reports DDLs that retire a whole table or database.
func (a DDLAction) IsDrop() bool {
	switch a {
	case ActionDropTable, ActionDropSchema, ActionDropView:
		return true
	}
	return false
}

// knownTables is the runtime's view of the definitions of the tables it
// follows, by logical id: seeded by the startup probes and carried forward
// by each emitted DDL, so PreTable needs no store lookup. Used by the
// control goroutine only (after startup).
type knownTables map[int64]*TableInfo

// ddlFor builds the DDL of ev with its PreTable and records the post-DDL
// definitions of the tables it follows.
func (k knownTables) ddlFor(ev *schemastore.DDLEvent) DDL {
	pre := k[ev.TableID]
	if pre == nil && ev.TableInfo != nil {
		pre = k[ev.TableInfo.ID]
	}
	d := NewDDL(ev, pre)
	switch {
	case d.Action.IsDrop():
		delete(k, ev.TableID)
	case d.Table != nil && pre != nil:
		if d.Table.ID != ev.TableID {
			delete(k, ev.TableID) // TRUNCATE TABLE: the table lives on under a new id
		}
		k[d.Table.ID] = d.Table
	}
	for _, t := range d.MultipleTables {
		if t != nil && k[t.ID] != nil {
			k[t.ID] = t
		}
	}
	return d
}
