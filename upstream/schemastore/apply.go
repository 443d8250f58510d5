package schemastore

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// systemSchemas are never replicated (rule SS20).
var systemSchemas = map[string]bool{
	"mysql": true, "information_schema": true, "performance_schema": true, "metrics_schema": true,
	"sys": true, "tidb_cdc": true, "lightning_task_info": true, "workload_schema": true,
}

// IsSystemSchema reports whether a (lower-case) schema name is one the store ignores.
func IsSystemSchema(name string) bool { return systemSchemas[strings.ToLower(name)] }

// skippedActions carry no schema change a CDC consumer needs (rule SS21).
var skippedActions = map[model.ActionType]bool{
	model.ActionLockTable: true, model.ActionUnlockTable: true, model.ActionRepairTable: true,
	model.ActionSetTiFlashReplica: true, model.ActionUpdateTiFlashReplicaStatus: true,
	model.ActionCreateSequence: true, model.ActionAlterSequence: true, model.ActionDropSequence: true,
	model.ActionModifyTableAutoIDCache: true, model.ActionRebaseAutoRandomBase: true,
	model.ActionAddCheckConstraint: true, model.ActionDropCheckConstraint: true, model.ActionAlterCheckConstraint: true,
	model.ActionAlterTableAttributes: true, model.ActionAlterTablePartitionAttributes: true,
	model.ActionCreatePlacementPolicy: true, model.ActionAlterPlacementPolicy: true, model.ActionDropPlacementPolicy: true,
	model.ActionAlterTablePartitionPlacement: true, model.ActionModifySchemaDefaultPlacement: true,
	model.ActionAlterTablePlacement: true, model.ActionAlterCacheTable: true, model.ActionAlterNoCacheTable: true,
	model.ActionAlterTableStatsOptions: true, model.ActionFlashbackCluster: true, model.ActionRecoverSchema: true,
	model.ActionCreateResourceGroup: true, model.ActionAlterResourceGroup: true, model.ActionDropResourceGroup: true,
}

// alterActions change one table's definition (and possibly its physical
// partition ids); they are applied by diffing old and new TableInfo (SS30).
var alterActions = map[model.ActionType]bool{
	model.ActionAddColumn: true, model.ActionDropColumn: true, model.ActionAddIndex: true, model.ActionDropIndex: true,
	model.ActionAddForeignKey: true, model.ActionDropForeignKey: true, model.ActionModifyColumn: true,
	model.ActionRebaseAutoID: true, model.ActionSetDefaultValue: true, model.ActionShardRowID: true,
	model.ActionModifyTableComment: true, model.ActionRenameIndex: true, model.ActionModifyTableCharsetAndCollate: true,
	model.ActionAddPrimaryKey: true, model.ActionDropPrimaryKey: true, model.ActionAddColumns: true,
	model.ActionDropColumns: true, model.ActionAlterIndexVisibility: true, model.ActionDropIndexes: true,
	model.ActionMultiSchemaChange: true, model.ActionAlterTTLInfo: true, model.ActionAlterTTLRemove: true,
	model.ActionAddVectorIndex: true,
	// partition DDLs: new/removed partition ids come from the diff
	model.ActionAddTablePartition: true, model.ActionDropTablePartition: true, model.ActionTruncateTablePartition: true,
	model.ActionReorganizePartition: true, model.ActionAlterTablePartitioning: true, model.ActionRemovePartitioning: true,
}

// ActionHandled reports whether the store turns jobs of this type into
// events (as opposed to skipping them).
func ActionHandled(a model.ActionType) bool {
	switch a {
	case model.ActionCreateSchema, model.ActionDropSchema, model.ActionModifySchemaCharsetAndCollate,
		model.ActionCreateTable, model.ActionCreateView, model.ActionCreateTables, model.ActionDropTable,
		model.ActionDropView, model.ActionTruncateTable, model.ActionRenameTable, model.ActionRenameTables,
		model.ActionRecoverTable, model.ActionExchangeTablePartition:
		return true
	}
	return alterActions[a]
}

// hasRows reports whether a table's physical ids carry record data (views
// and sequences do not, so they never appear in NeedAdded/NeedDropped).
func hasRows(ti *model.TableInfo) bool { return !ti.IsView() && !ti.IsSequence() }

func (h *history) schemaName(id int64) string {
	if d := h.dbs[id]; d != nil {
		return d.Name.O
	}
	return ""
}

// jobSchemaName is the schema a job belongs to, for the system-schema rule.
func (h *history) jobSchemaName(job *model.Job) string {
	if job.SchemaName != "" {
		return job.SchemaName
	}
	if n := h.schemaName(job.SchemaID); n != "" {
		return n
	}
	if job.BinlogInfo != nil && job.BinlogInfo.DBInfo != nil {
		return job.BinlogInfo.DBInfo.Name.O
	}
	return ""
}

func baseEvent(job *model.Job, h *history) DDLEvent {
	ev := DDLEvent{
		JobID:         job.ID,
		Type:          int(job.Type),
		SchemaID:      job.SchemaID,
		TableID:       job.TableID,
		SchemaName:    job.SchemaName,
		TableName:     job.TableName,
		Query:         job.Query,
		SchemaVersion: job.BinlogInfo.SchemaVersion,
		FinishedTs:    job.BinlogInfo.FinishedTS,
		StartTs:       job.StartTS,
	}
	if ev.SchemaName == "" {
		ev.SchemaName = h.schemaName(job.SchemaID)
	}
	return ev
}

// applyJob applies one finished job (FinishedTS and SchemaVersion set) to
// the history. It returns the event, or a non-empty skip reason when a rule
// says the job carries nothing to apply, or an error when the job
// contradicts the history.
func (h *history) applyJob(job *model.Job, ch *changeSet) (*DDLEvent, string, error) {
	if job.BinlogInfo == nil {
		return nil, "", inconsistent("job has no binlog block")
	}
	if IsSystemSchema(h.jobSchemaName(job)) {
		return nil, "system schema " + h.jobSchemaName(job), nil
	}
	if skippedActions[job.Type] {
		return nil, "action carries no schema change for CDC", nil
	}
	ts, ver := job.BinlogInfo.FinishedTS, job.BinlogInfo.SchemaVersion
	ev := baseEvent(job, h)
	var err error
	skip := ""
	switch job.Type {
	case model.ActionCreateSchema:
		skip, err = h.applyCreateSchema(job, &ev, ch)
	case model.ActionModifySchemaCharsetAndCollate:
		skip, err = h.applyModifySchema(job, &ev, ch)
	case model.ActionDropSchema:
		skip, err = h.applyDropSchema(job, &ev, ts, ver, ch)
	case model.ActionCreateTable, model.ActionCreateView, model.ActionRecoverTable:
		skip, err = h.applyCreateTable(job, &ev, ts, ver, ch)
	case model.ActionCreateTables:
		skip, err = h.applyCreateTables(job, &ev, ts, ver, ch)
	case model.ActionDropTable, model.ActionDropView:
		skip, err = h.applyDropTable(job, &ev, ts, ver, ch)
	case model.ActionTruncateTable:
		skip, err = h.applyTruncate(job, &ev, ts, ver, ch)
	case model.ActionRenameTable:
		skip, err = h.applyRename(job, &ev, ts, ver, ch)
	case model.ActionRenameTables:
		skip, err = h.applyRenameTables(job, &ev, ts, ver, ch)
	case model.ActionExchangeTablePartition:
		skip, err = h.applyExchange(job, &ev, ts, ver, ch)
	default:
		if !alterActions[job.Type] {
			return nil, fmt.Sprintf("unknown action type %d", job.Type), nil
		}
		skip, err = h.applyAlter(job, &ev, ts, ver, ch)
	}
	if err != nil || skip != "" {
		return nil, skip, err
	}
	return &ev, "", nil
}

func (h *history) applyCreateSchema(job *model.Job, ev *DDLEvent, ch *changeSet) (string, error) {
	db := job.BinlogInfo.DBInfo
	if db == nil {
		return "", inconsistent("create schema %d without binlog.DBInfo", job.SchemaID)
	}
	if _, ok := h.dbs[db.ID]; ok {
		return "schema already exists", nil
	}
	h.dbs[db.ID] = db.Clone()
	ch.putDB(h.dbs[db.ID])
	ev.SchemaID, ev.SchemaName = db.ID, db.Name.O
	return "", nil
}

func (h *history) applyModifySchema(job *model.Job, ev *DDLEvent, ch *changeSet) (string, error) {
	db := job.BinlogInfo.DBInfo
	if db == nil {
		return "no binlog.DBInfo", nil
	}
	if _, ok := h.dbs[db.ID]; !ok {
		return "", inconsistent("modify unknown schema %d", db.ID)
	}
	h.dbs[db.ID] = db.Clone()
	ch.putDB(h.dbs[db.ID])
	ev.SchemaName = db.Name.O
	return "", nil
}

func (h *history) applyDropSchema(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	db := h.dbs[job.SchemaID]
	if db == nil {
		return "", inconsistent("drop unknown schema %d", job.SchemaID)
	}
	ev.SchemaName = db.Name.O
	names := &TableNameChange{DropDatabaseName: db.Name.O}
	for _, id := range h.liveTablesOf(db.ID) {
		t := h.tables[id]
		if hasRows(t.info) {
			ev.NeedDroppedTables = append(ev.NeedDroppedTables, t.info.PhysicalIDs()...)
		}
		h.tombstone(id, t, ts, ver, ch)
		names.DropName = append(names.DropName, SchemaTableName{SchemaName: db.Name.O, TableName: t.info.Name.O})
	}
	ev.TableNameChange = names
	delete(h.dbs, db.ID)
	ch.delDB(db.ID)
	return "", nil
}

// tombstone marks every physical id of a live logical table dropped at ts
// and forgets the logical table.
func (h *history) tombstone(id int64, t *tableState, ts uint64, ver int64, ch *changeSet) {
	for _, p := range t.info.PhysicalIDs() {
		h.addVersion(p, tableVersion{ts: ts, ver: ver, logicalID: id, schemaID: t.schemaID, fromDDL: true}, ch)
	}
	delete(h.tables, id)
	ch.delTable(id)
}

// putTable records ti (owned by the caller, becomes the public version) as
// the live state of its logical table and adds a version for each physical
// id in phys.
func (h *history) putTable(schemaID int64, ti *model.TableInfo, phys []int64, ts uint64, ver int64, fromDDL bool, ch *changeSet) {
	priv := ti.Clone()
	st := &tableState{schemaID: schemaID, info: priv}
	h.tables[ti.ID] = st
	ch.putTable(ti.ID, st)
	for _, p := range phys {
		h.addVersion(p, tableVersion{ts: ts, ver: ver, logicalID: ti.ID, schemaID: schemaID, info: ti, fromDDL: fromDDL}, ch)
	}
}

func (h *history) createOne(schemaID int64, ti *model.TableInfo, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (bool, error) {
	if _, live := h.tables[ti.ID]; live {
		return false, nil
	}
	db := h.dbs[schemaID]
	if db == nil {
		return false, inconsistent("create table %d %q in unknown schema %d", ti.ID, ti.Name.O, schemaID)
	}
	phys := ti.PhysicalIDs()
	h.putTable(schemaID, ti, phys, ts, ver, true, ch)
	if hasRows(ti) {
		for _, p := range phys {
			ev.NeedAddedTables = append(ev.NeedAddedTables, AddedTable{SchemaID: schemaID, TableID: p})
		}
	}
	if ev.TableNameChange == nil {
		ev.TableNameChange = &TableNameChange{}
	}
	ev.TableNameChange.AddName = append(ev.TableNameChange.AddName, SchemaTableName{SchemaName: db.Name.O, TableName: ti.Name.O})
	return true, nil
}

func (h *history) applyCreateTable(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	ti := job.BinlogInfo.TableInfo
	if ti == nil {
		return "", inconsistent("%s without binlog.TableInfo", job.Type)
	}
	ok, err := h.createOne(job.SchemaID, ti, ev, ts, ver, ch)
	if err != nil || !ok {
		return "table already exists", err
	}
	ev.TableID, ev.TableName, ev.TableInfo = ti.ID, ti.Name.O, ti
	return "", nil
}

func (h *history) applyCreateTables(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	infos := job.BinlogInfo.MultipleTableInfos
	if len(infos) == 0 {
		return "", inconsistent("create tables without binlog.MultipleTableInfos")
	}
	for _, ti := range infos {
		if ti == nil {
			return "", inconsistent("create tables: null entry in binlog.MultipleTableInfos")
		}
		ok, err := h.createOne(job.SchemaID, ti, ev, ts, ver, ch)
		if err != nil {
			return "", err
		}
		if ok {
			ev.MultipleTableInfos = append(ev.MultipleTableInfos, ti)
		}
	}
	if len(ev.MultipleTableInfos) == 0 {
		return "all tables already exist", nil
	}
	return "", nil
}

func (h *history) applyDropTable(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	t := h.tables[job.TableID]
	if t == nil {
		return "", inconsistent("drop unknown table %d", job.TableID)
	}
	ev.TableName = t.info.Name.O
	ev.SchemaID = t.schemaID
	ev.SchemaName = h.schemaName(t.schemaID)
	if hasRows(t.info) {
		ev.NeedDroppedTables = t.info.PhysicalIDs()
	}
	ev.TableNameChange = &TableNameChange{DropName: []SchemaTableName{{SchemaName: ev.SchemaName, TableName: t.info.Name.O}}}
	h.tombstone(job.TableID, t, ts, ver, ch)
	return "", nil
}

func (h *history) applyTruncate(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	t := h.tables[job.TableID]
	if t == nil {
		return "", inconsistent("truncate unknown table %d", job.TableID)
	}
	ti := job.BinlogInfo.TableInfo
	if ti == nil || ti.ID == job.TableID {
		return "", inconsistent("truncate table %d without a new table id in binlog.TableInfo", job.TableID)
	}
	if _, live := h.tables[ti.ID]; live {
		return "", inconsistent("truncate table %d: new id %d already in use", job.TableID, ti.ID)
	}
	if hasRows(t.info) {
		ev.NeedDroppedTables = t.info.PhysicalIDs()
	}
	schemaID := t.schemaID
	h.tombstone(job.TableID, t, ts, ver, ch)
	phys := ti.PhysicalIDs()
	h.putTable(schemaID, ti, phys, ts, ver, true, ch)
	for _, p := range phys {
		ev.NeedAddedTables = append(ev.NeedAddedTables, AddedTable{SchemaID: schemaID, TableID: p})
	}
	ev.TableInfo, ev.TableName = ti, ti.Name.O
	return "", nil
}

// renameOne moves live table id to newSchemaID with the post-rename info.
func (h *history) renameOne(id, newSchemaID int64, ti *model.TableInfo, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) error {
	t := h.tables[id]
	if t == nil {
		return inconsistent("rename unknown table %d", id)
	}
	if ti.ID != id {
		return inconsistent("rename table %d: binlog table info has id %d", id, ti.ID)
	}
	newDB := h.dbs[newSchemaID]
	if newDB == nil {
		return inconsistent("rename table %d into unknown schema %d", id, newSchemaID)
	}
	oldSchema, oldName := h.schemaName(t.schemaID), t.info.Name.O
	phys := ti.PhysicalIDs()
	if t.schemaID != newSchemaID {
		for _, p := range phys {
			ev.UpdatedSchemas = append(ev.UpdatedSchemas, SchemaIDChange{TableID: p, OldSchemaID: t.schemaID, NewSchemaID: newSchemaID})
		}
	}
	if ev.TableNameChange == nil {
		ev.TableNameChange = &TableNameChange{}
	}
	ev.TableNameChange.DropName = append(ev.TableNameChange.DropName, SchemaTableName{SchemaName: oldSchema, TableName: oldName})
	ev.TableNameChange.AddName = append(ev.TableNameChange.AddName, SchemaTableName{SchemaName: newDB.Name.O, TableName: ti.Name.O})
	if ev.ExtraTableName == "" {
		ev.ExtraSchemaName, ev.ExtraTableName = oldSchema, oldName
	}
	h.putTable(newSchemaID, ti, phys, ts, ver, true, ch)
	return nil
}

func (h *history) applyRename(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	ti := job.BinlogInfo.TableInfo
	if ti == nil {
		return "", inconsistent("rename table %d without binlog.TableInfo", job.TableID)
	}
	if err := h.renameOne(job.TableID, job.SchemaID, ti, ev, ts, ver, ch); err != nil {
		return "", err
	}
	ev.TableInfo, ev.TableName, ev.SchemaName = ti, ti.Name.O, h.schemaName(job.SchemaID)
	return "", nil
}

func (h *history) applyRenameTables(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	infos := job.BinlogInfo.MultipleTableInfos
	if len(infos) == 0 {
		return "", inconsistent("rename tables without binlog.MultipleTableInfos")
	}
	targets := h.renameTablesTargets(job, infos)
	for _, ti := range infos {
		if ti == nil {
			return "", inconsistent("rename tables: null entry in binlog.MultipleTableInfos")
		}
		t := h.tables[ti.ID]
		if t == nil {
			return "", inconsistent("rename tables: unknown table %d", ti.ID)
		}
		newSchema, ok := targets[ti.ID]
		if !ok {
			newSchema = t.schemaID
		}
		if err := h.renameOne(ti.ID, newSchema, ti, ev, ts, ver, ch); err != nil {
			return "", err
		}
		ev.MultipleTableInfos = append(ev.MultipleTableInfos, ti)
	}
	ev.ExtraSchemaName, ev.ExtraTableName = "", ""
	return "", nil
}

// renameTablesTargets finds each table's new schema id. Sources, in order:
// job version 1 raw_args (positional: old schema ids, new schema ids, new
// names, table ids, ...), version 2 raw_args (rename_table_infos), and
// involving_schema_info (old, new) name pairs (rule SS33).
func (h *history) renameTablesTargets(job *model.Job, infos []*model.TableInfo) map[int64]int64 {
	out := map[int64]int64{}
	if len(job.RawArgs) > 0 {
		var arr []json.RawMessage
		if json.Unmarshal(job.RawArgs, &arr) == nil && len(arr) >= 4 {
			var newIDs, tableIDs []int64
			if json.Unmarshal(arr[1], &newIDs) == nil && json.Unmarshal(arr[3], &tableIDs) == nil && len(newIDs) == len(tableIDs) {
				for i, id := range tableIDs {
					out[id] = newIDs[i]
				}
				return out
			}
		}
		var obj struct {
			Infos []struct {
				NewSchemaID int64 `json:"new_schema_id"`
				TableID     int64 `json:"table_id"`
			} `json:"rename_table_infos"`
		}
		if json.Unmarshal(job.RawArgs, &obj) == nil && len(obj.Infos) > 0 {
			for _, in := range obj.Infos {
				if in.TableID != 0 && in.NewSchemaID != 0 {
					out[in.TableID] = in.NewSchemaID
				}
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	inv := job.InvolvingSchemaInfo
	if len(inv) == 2*len(infos) {
		byName := map[string]int64{}
		for id, d := range h.dbs {
			byName[d.Name.L] = id
		}
		for i, ti := range infos {
			if ti == nil {
				continue
			}
			newEntry := inv[2*i+1]
			if !strings.EqualFold(newEntry.Table, ti.Name.O) {
				continue
			}
			if id, ok := byName[strings.ToLower(newEntry.Database)]; ok {
				out[ti.ID] = id
			}
		}
	}
	return out
}

// applyExchange handles EXCHANGE PARTITION: the partition's id and the
// normal table's id swap owners (data is not copied), so no subscription
// changes, but both physical ids get a new version (rule SS34).
func (h *history) applyExchange(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	ptNew := job.BinlogInfo.TableInfo
	if ptNew == nil || !ptNew.IsPartitioned() {
		return "", inconsistent("exchange partition without the partitioned table in binlog.TableInfo")
	}
	nt := h.tables[job.TableID]
	pt := h.tables[ptNew.ID]
	if nt == nil || pt == nil {
		return "", inconsistent("exchange partition between unknown tables %d and %d", job.TableID, ptNew.ID)
	}
	removed := diffIDs(pt.info.PhysicalIDs(), ptNew.PhysicalIDs())
	added := diffIDs(ptNew.PhysicalIDs(), pt.info.PhysicalIDs())
	if len(removed) != 1 || len(added) != 1 || added[0] != job.TableID {
		return "", inconsistent("exchange partition of table %d with %d: partition ids changed from %v to %v",
			ptNew.ID, job.TableID, pt.info.PhysicalIDs(), ptNew.PhysicalIDs())
	}
	partID := removed[0]
	ntNew := nt.info.Clone()
	ntNew.ID = partID
	ntNew.Raw = nil // changed in code: Raw would describe the old id
	ntSchema := nt.schemaID
	delete(h.tables, job.TableID)
	ch.delTable(job.TableID)
	h.putTable(pt.schemaID, ptNew, ptNew.PhysicalIDs(), ts, ver, true, ch)
	h.putTable(ntSchema, ntNew, []int64{partID}, ts, ver, true, ch)
	ev.TableInfo = ptNew
	ev.MultipleTableInfos = []*model.TableInfo{ptNew, ntNew}
	return "", nil
}

// applyAlter handles every DDL that changes one table's definition,
// including partition DDLs: new and removed physical ids come from
// diffing the old and new partition definitions (rule SS30).
func (h *history) applyAlter(job *model.Job, ev *DDLEvent, ts uint64, ver int64, ch *changeSet) (string, error) {
	ti := job.BinlogInfo.TableInfo
	if ti == nil {
		return "no binlog.TableInfo", nil
	}
	oldID := job.TableID
	t := h.tables[oldID]
	if t == nil {
		if t = h.tables[ti.ID]; t == nil {
			return "", inconsistent("%s on unknown table %d", job.Type, job.TableID)
		}
		oldID = ti.ID
	}
	oldPhys, newPhys := t.info.PhysicalIDs(), ti.PhysicalIDs()
	dropped, added := diffIDs(oldPhys, newPhys), diffIDs(newPhys, oldPhys)
	for _, p := range dropped {
		h.addVersion(p, tableVersion{ts: ts, ver: ver, logicalID: oldID, schemaID: t.schemaID, fromDDL: true}, ch)
	}
	if ti.ID != oldID {
		delete(h.tables, oldID)
		ch.delTable(oldID)
	}
	h.putTable(t.schemaID, ti, newPhys, ts, ver, true, ch)
	if hasRows(ti) {
		ev.NeedDroppedTables = dropped
		for _, p := range added {
			ev.NeedAddedTables = append(ev.NeedAddedTables, AddedTable{SchemaID: t.schemaID, TableID: p})
		}
	}
	ev.SchemaID, ev.SchemaName = t.schemaID, h.schemaName(t.schemaID)
	ev.TableInfo, ev.TableName = ti, ti.Name.O
	return "", nil
}

// diffIDs returns the ids of a not in b, in a's order.
func diffIDs(a, b []int64) []int64 {
	in := make(map[int64]bool, len(b))
	for _, id := range b {
		in[id] = true
	}
	var out []int64
	for _, id := range a {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

// sortInt64s sorts in place and returns s.
func sortInt64s(s []int64) []int64 {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}
