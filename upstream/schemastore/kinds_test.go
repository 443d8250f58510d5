package schemastore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// baseEnv: schema 10 "db" with table 20 "t" (2 extra columns) and
// partitioned table 30 "pt" with partitions 31, 32, 33, all in the snapshot.
func baseEnv(t testing.TB) *env {
	return newEnv(t, func(f *fakeSnapshot) {
		f.addDB(t, nil, dbInfo(10, "db"))
		f.addDB(t, nil, dbInfo(11, "other"))
		f.addTable(t, nil, 10, tbl(20, "t", 2))
		f.addTable(t, nil, 10, withParts(tbl(30, "pt", 1), 31, 32, 33))
		// system schemas are not part of the history
		f.addDB(t, nil, dbInfo(3, "information_schema"))
		f.addTable(t, nil, 3, tbl(40, "tables", 1))
	})
}

// Rules SS11 (tables from the DB hashes), SS12, SS13 (system schemas skipped),
// SS31 (partition ids map to the logical table), SS43 (MaxEventTs 0 for
// untouched tables).
func TestSnapshotContents(t *testing.T) {
	e := baseEnv(t)
	if e.info(20, snapTs).Name.O != "t" || e.info(31, snapTs).ID != 30 || e.info(33, snapTs).ID != 30 {
		t.Error("snapshot tables")
	}
	for _, id := range []int64{40, 5, 281474976710654} {
		if _, err := e.store.GetTableInfo(id, snapTs); !errors.Is(err, ErrUnknownTable) {
			t.Errorf("system table %d visible: %v", id, err)
		}
	}
	if _, err := e.store.GetTableInfo(20, snapTs-1); !errors.Is(err, ErrBelowGC) {
		t.Errorf("below snapshot ts: %v", err)
	}
	if _, err := e.store.GetTableInfo(20, snapTs+1); !errors.Is(err, ErrNotReady) {
		t.Errorf("above resolved ts: %v", err)
	}
	if st, _ := e.store.GetTableDDLEventState(20); st.ResolvedTs != snapTs || st.MaxEventTs != 0 {
		t.Errorf("state %+v", st)
	}
}

// Rule SS35 (views add no data span).
func TestCreateDropSchemaAndTables(t *testing.T) {
	e := baseEnv(t)
	cs := job(1, model.ActionCreateSchema, 12, 0, 2)
	cs.BinlogInfo.DBInfo = dbInfo(12, "newdb")
	e.apply(1100, cs)
	e.apply(1200, withTable(job(2, model.ActionCreateTable, 12, 50, 3), tbl(50, "a", 1)))
	e.apply(1300, withTable(job(3, model.ActionCreateTable, 12, 60, 4), withParts(tbl(60, "b", 1), 61, 62)))
	ct := job(4, model.ActionCreateTables, 12, 0, 5)
	ct.BinlogInfo.MultipleTableInfos = []*model.TableInfo{tbl(70, "c", 0), tbl(71, "d", 0)}
	e.apply(1400, ct)
	view := tbl(80, "v", 0)
	view.View = []byte(`{"view_select":"select 1"}`)
	e.apply(1450, withTable(job(5, model.ActionCreateView, 12, 80, 6), view))
	ds := job(6, model.ActionDropSchema, 12, 0, 7)
	ds.SchemaName = "newdb"
	e.apply(1500, ds)

	evs := e.events(snapTs)
	if len(evs) != 6 {
		t.Fatalf("%d events", len(evs))
	}
	if evs[0].SchemaName != "newdb" || evs[0].TableNameChange != nil {
		t.Errorf("create schema: %+v", evs[0])
	}
	if !reflect.DeepEqual(evs[2].NeedAddedTables, []AddedTable{{12, 61}, {12, 62}}) {
		t.Errorf("create partitioned: %v", evs[2].NeedAddedTables)
	}
	if len(evs[3].MultipleTableInfos) != 2 || !reflect.DeepEqual(evs[3].NeedAddedTables, []AddedTable{{12, 70}, {12, 71}}) ||
		len(evs[3].TableNameChange.AddName) != 2 {
		t.Errorf("create tables: %+v", evs[3])
	}
	if evs[4].NeedAddedTables != nil || e.info(80, 1450).Name.O != "v" {
		t.Errorf("create view must add no data span: %+v", evs[4].NeedAddedTables)
	}
	drop := evs[5]
	if !reflect.DeepEqual(drop.NeedDroppedTables, []int64{50, 61, 62, 70, 71}) || drop.TableNameChange.DropDatabaseName != "newdb" ||
		len(drop.TableNameChange.DropName) != 5 {
		t.Errorf("drop schema: %+v %+v", drop.NeedDroppedTables, drop.TableNameChange)
	}
	for _, id := range []int64{50, 61, 62, 70, 71, 80} {
		if _, err := e.store.GetTableInfo(id, 1500); !errors.Is(err, ErrDropped) {
			t.Errorf("table %d after drop schema: %v", id, err)
		}
		if _, err := e.store.GetTableInfo(id, 1499); err != nil {
			t.Errorf("table %d before drop schema: %v", id, err)
		}
	}
}

// Rule SS33.
func TestRenameAcrossSchemasAndRenameTables(t *testing.T) {
	e := baseEnv(t)
	// RENAME TABLE db.t TO other.t2: schema_id is the new schema
	r := withTable(job(1, model.ActionRenameTable, 11, 20, 2), tbl(20, "t2", 2))
	e.apply(1100, r)
	ev := e.events(snapTs)[0]
	if !reflect.DeepEqual(ev.UpdatedSchemas, []SchemaIDChange{{TableID: 20, OldSchemaID: 10, NewSchemaID: 11}}) ||
		ev.ExtraSchemaName != "db" || ev.ExtraTableName != "t" || ev.SchemaName != "other" {
		t.Errorf("rename event %+v", ev)
	}
	// RENAME TABLES other.t2 TO db.x, db.pt TO db.y (job v1 raw args)
	rt := job(2, model.ActionRenameTables, 10, 0, 3)
	rt.Version = model.JobVersion1
	rt.RawArgs = []byte(`[[11,10],[10,10],[{"O":"x","L":"x"},{"O":"y","L":"y"}],[20,30],[{"O":"other","L":"other"},{"O":"db","L":"db"}]]`)
	rt.BinlogInfo.MultipleTableInfos = []*model.TableInfo{tbl(20, "x", 2), withParts(tbl(30, "y", 1), 31, 32, 33)}
	e.apply(1200, rt)
	ev = e.events(1100)[0]
	if len(ev.MultipleTableInfos) != 2 || !reflect.DeepEqual(ev.UpdatedSchemas, []SchemaIDChange{{20, 11, 10}}) {
		t.Errorf("rename tables: %+v", ev)
	}
	want := &TableNameChange{
		AddName:  []SchemaTableName{{"db", "x"}, {"db", "y"}},
		DropName: []SchemaTableName{{"other", "t2"}, {"db", "pt"}},
	}
	if !reflect.DeepEqual(ev.TableNameChange, want) {
		t.Errorf("rename tables names: %+v", ev.TableNameChange)
	}
	if e.info(32, 1200).Name.O != "y" || e.info(32, 1199).Name.O != "pt" {
		t.Error("partition lookups across rename tables")
	}
	// RENAME TABLES with no raw args: involving_schema_info pairs name the target
	rt2 := job(3, model.ActionRenameTables, 10, 0, 4)
	rt2.InvolvingSchemaInfo = []model.InvolvingSchemaInfo{{Database: "db", Table: "x"}, {Database: "other", Table: "z"}}
	rt2.BinlogInfo.MultipleTableInfos = []*model.TableInfo{tbl(20, "z", 2)}
	e.apply(1300, rt2)
	if ev := e.events(1200)[0]; !reflect.DeepEqual(ev.UpdatedSchemas, []SchemaIDChange{{20, 10, 11}}) {
		t.Errorf("rename tables from involving info: %+v", ev.UpdatedSchemas)
	}
}

// Rules SS31 (partition DDLs by diffing physical ids), SS34 (exchange partition).
func TestPartitionDDLs(t *testing.T) {
	e := baseEnv(t)
	// drop partition 32
	e.apply(1100, withTable(job(1, model.ActionDropTablePartition, 10, 30, 2), withParts(tbl(30, "pt", 1), 31, 33)))
	// truncate partition 33 -> 34
	e.apply(1200, withTable(job(2, model.ActionTruncateTablePartition, 10, 30, 3), withParts(tbl(30, "pt", 1), 31, 34)))
	// reorganize 31,34 -> 35,36,37
	e.apply(1300, withTable(job(3, model.ActionReorganizePartition, 10, 30, 4), withParts(tbl(30, "pt", 1), 35, 36, 37)))
	// exchange partition 36 with table 20: 20's data becomes partition id 20, 36 becomes the table
	ex := withTable(job(4, model.ActionExchangeTablePartition, 10, 20, 5), withParts(tbl(30, "pt", 1), 35, 20, 37))
	e.apply(1400, ex)
	// remove partitioning: new table id 38 holds all rows
	e.apply(1500, withTable(job(5, model.ActionRemovePartitioning, 10, 30, 6), tbl(38, "pt", 1)))

	evs := e.events(snapTs)
	check := func(i int, dropped []int64, added ...int64) {
		t.Helper()
		var add []AddedTable
		for _, a := range added {
			add = append(add, AddedTable{SchemaID: 10, TableID: a})
		}
		if !reflect.DeepEqual(evs[i].NeedDroppedTables, dropped) || !reflect.DeepEqual(evs[i].NeedAddedTables, add) {
			t.Errorf("event %d (%s): dropped %v added %v, want %v %v", i, model.ActionType(evs[i].Type), evs[i].NeedDroppedTables, evs[i].NeedAddedTables, dropped, add)
		}
	}
	check(0, []int64{32})
	check(1, []int64{33}, 34)
	check(2, []int64{31, 34}, 35, 36, 37)
	check(3, nil)
	check(4, []int64{35, 20, 37}, 38)

	if _, err := e.store.GetTableInfo(32, 1100); !errors.Is(err, ErrDropped) {
		t.Errorf("dropped partition: %v", err)
	}
	if e.info(32, 1099).ID != 30 {
		t.Error("partition before drop")
	}
	// exchange: id 20 is a partition of pt from 1400; id 36 is the table "t"
	if ti := e.info(20, 1399); ti.Name.O != "t" || ti.ID != 20 {
		t.Errorf("20 before exchange: %d %s", ti.ID, ti.Name.O)
	}
	if ti := e.info(20, 1400); ti.ID != 30 {
		t.Errorf("20 after exchange belongs to %d", ti.ID)
	}
	if ti := e.info(36, 1400); ti.ID != 36 || ti.Name.O != "t" || colNames(ti) != "id,c1,c2" {
		t.Errorf("36 after exchange: %d %s %s", ti.ID, ti.Name.O, colNames(ti))
	}
	if ev := evs[3]; len(ev.MultipleTableInfos) != 2 || ev.MultipleTableInfos[1].ID != 36 || ev.TableInfo.ID != 30 {
		t.Errorf("exchange event infos: %+v", ev.MultipleTableInfos)
	}
	// the normal table keeps its new id through later DDLs
	e.apply(1600, withTable(job(6, model.ActionAddColumn, 10, 36, 7), tbl(36, "t", 3)))
	if colNames(e.info(36, 1600)) != "id,c1,c2,c3" {
		t.Error("alter after exchange")
	}
	if ti := e.info(38, 1500); ti.IsPartitioned() {
		t.Error("remove partitioning left partitions")
	}
}

// Rules SS32 (truncate), SS30, SS35 (recover adds), SS43 (MaxEventTs).
func TestTruncateRecoverAndAlters(t *testing.T) {
	e := baseEnv(t)
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.apply(1200, withTable(job(2, model.ActionMultiSchemaChange, 10, 20, 3), tbl(20, "t", 5)))
	e.apply(1300, withTable(job(3, model.ActionDropTable, 10, 20, 4), tbl(20, "t", 5)))
	e.apply(1400, withTable(job(4, model.ActionRecoverTable, 10, 20, 5), tbl(20, "t", 5)))
	e.apply(1500, withTable(job(5, model.ActionTruncateTable, 10, 30, 6), withParts(tbl(90, "pt", 1), 91, 92)))
	for ts, want := range map[uint64]string{1000: "id,c1,c2", 1099: "id,c1,c2", 1100: "id,c1,c2,c3", 1150: "id,c1,c2,c3", 1200: "id,c1,c2,c3,c4,c5", 1400: "id,c1,c2,c3,c4,c5"} {
		if got := colNames(e.info(20, ts)); got != want {
			t.Errorf("columns at %d: %s, want %s", ts, got, want)
		}
	}
	if _, err := e.store.GetTableInfo(20, 1300); !errors.Is(err, ErrDropped) {
		t.Errorf("dropped window: %v", err)
	}
	evs := e.events(snapTs)
	if ev := evs[3]; !reflect.DeepEqual(ev.NeedAddedTables, []AddedTable{{10, 20}}) || ev.TableNameChange.AddName[0].TableName != "t" {
		t.Errorf("recover: %+v", ev)
	}
	if ev := evs[4]; !reflect.DeepEqual(ev.NeedDroppedTables, []int64{31, 32, 33}) || !reflect.DeepEqual(ev.NeedAddedTables, []AddedTable{{10, 91}, {10, 92}}) {
		t.Errorf("truncate partitioned: %+v %+v", ev.NeedDroppedTables, ev.NeedAddedTables)
	}
	if st, _ := e.store.GetTableDDLEventState(20); st.MaxEventTs != 1400 {
		t.Errorf("max event ts %d", st.MaxEventTs)
	}
}

// TestSkipRules: schema version 0, non-Done states, deletes, system schemas,
// no-op action types, unknown types and duplicate creates produce no event.
//
// Rules SS15 (only Put, only Done), SS16 (schema version 0 skipped), SS20, SS21.
func TestSkipRules(t *testing.T) {
	e := baseEnv(t)
	v0 := withTable(job(1, model.ActionAddColumn, 10, 20, 0), tbl(20, "t", 9))
	running := withTable(job(2, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 9))
	running.State = model.JobStateRunning
	synced := withTable(job(3, model.ActionAddColumn, 10, 20, 3), tbl(20, "t", 9))
	synced.State = model.JobStateSynced
	rolledBack := withTable(job(4, model.ActionAddColumn, 10, 20, 4), tbl(20, "t", 9))
	rolledBack.State = model.JobStateRollbackDone
	sys := withTable(job(5, model.ActionCreateTable, 1, 99, 5), tbl(99, "stats", 0))
	sys.SchemaName = "mysql"
	lock := withTable(job(6, model.ActionLockTable, 10, 20, 6), tbl(20, "t", 9))
	unknown := withTable(job(7, model.ActionType(200), 10, 20, 7), tbl(20, "t", 9))
	dup := withTable(job(8, model.ActionCreateTable, 10, 20, 8), tbl(20, "t", 9))
	e.deliver(1100, v0, running, synced, rolledBack, sys, lock, unknown, dup)
	// a delete of a job row (the job moved to history) is ignored
	k, v := jobRow(t, e.jobTable, withTable(job(9, model.ActionAddColumn, 10, 20, 9), tbl(20, "t", 9)))
	e.consumer.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypeDelete, Key: k, OldValue: v, CRTs: 1100}})
	e.consumer.ConsumeKV(nil)
	e.resolve(1100)
	if evs := e.events(snapTs); len(evs) != 0 {
		t.Fatalf("skipped jobs produced events: %+v", evs)
	}
	if colNames(e.info(20, 1100)) != "id,c1,c2" {
		t.Error("a skipped job changed the table")
	}
	if _, err := e.store.GetTableInfo(99, 1100); !errors.Is(err, ErrUnknownTable) {
		t.Error("system schema table created")
	}
}

// TestDuplicateAndOutOfOrderDelivery: the same job delivered twice before
// and after it is applied yields one event; jobs delivered out of commit
// order are applied in (commit ts, schema version) order.
//
// Rules SS17, SS18 (re-delivery of an applied job is skipped).
func TestDuplicateAndOutOfOrderDelivery(t *testing.T) {
	e := baseEnv(t)
	a := withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3))
	b := withTable(job(2, model.ActionAddColumn, 10, 20, 3), tbl(20, "t", 4))
	c := withTable(job(3, model.ActionAddColumn, 10, 20, 4), tbl(20, "t", 5))
	e.deliver(1300, c)
	e.deliver(1100, a)
	e.deliver(1100, a)
	e.deliver(1200, b)
	e.resolve(1150)
	if n := len(e.events(snapTs)); n != 1 {
		t.Fatalf("%d events at 1150", n)
	}
	// re-delivery of an applied job after the resolved ts passed it (a
	// region re-scan) is skipped, not fatal
	e.deliver(1100, a)
	e.resolve(1400)
	evs := e.events(snapTs)
	if len(evs) != 3 || evs[0].JobID != 1 || evs[1].JobID != 2 || evs[2].JobID != 3 {
		t.Fatalf("events %+v", eventSummaries(evs))
	}
}

// TestSameTsOrderedBySchemaVersion: jobs sharing a commit ts apply in
// schema version order whatever the delivery order.
//
// Rules SS17, SS18 (the divergence: two jobs at one commit ts both apply).
func TestSameTsOrderedBySchemaVersion(t *testing.T) {
	e := baseEnv(t)
	first := withTable(job(7, model.ActionAddColumn, 10, 20, 5), tbl(20, "t", 3))
	second := withTable(job(6, model.ActionAddColumn, 10, 20, 6), tbl(20, "t", 4))
	e.deliver(1100, second, first)
	e.resolve(1100)
	evs := e.events(snapTs)
	if len(evs) != 2 || evs[0].SchemaVersion != 5 || evs[1].SchemaVersion != 6 {
		t.Fatalf("order %+v", eventSummaries(evs))
	}
	if colNames(e.info(20, 1100)) != "id,c1,c2,c3,c4" {
		t.Errorf("state at the shared ts: %s", colNames(e.info(20, 1100)))
	}
}

// TestLateUnappliedJobIsFatal: a Done job at or below the resolved ts that
// was never applied means the DDL stream lost an entry: the store stops.
//
// Rules SS18 (a lost job is fatal), SS19 (every later call returns the error).
func TestLateUnappliedJobIsFatal(t *testing.T) {
	e := baseEnv(t)
	e.resolve(1200)
	e.deliver(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	err := e.store.Err()
	if err == nil {
		t.Fatal("late job accepted")
	}
	if _, err2 := e.store.GetTableInfo(20, 1100); err2 != err {
		t.Errorf("API after failure returned %v, want the failure %v", err2, err)
	}
}

// TestInconsistentJobIsFatal: a DDL on a table the history does not know
// stops the store with an error naming the job.
//
// Rule SS19: the error names the job; the resolved ts does not move past it.
func TestInconsistentJobIsFatal(t *testing.T) {
	e := baseEnv(t)
	e.deliver(1100, withTable(job(77, model.ActionAddColumn, 10, 555, 2), tbl(555, "ghost", 1)))
	e.consumer.AdvanceResolvedTs(1100)
	var je *JobError
	if err := e.store.Err(); !errors.As(err, &je) || je.JobID != 77 || !errors.Is(err, ErrInconsistent) {
		t.Fatalf("got %v", err)
	}
	if e.store.ResolvedTs() != snapTs {
		t.Error("resolved ts advanced past a failed job")
	}
}

// TestMalformedJobRow: undecodable job JSON stops the store with the job id.
//
// Rule SS19.
func TestMalformedJobRow(t *testing.T) {
	e := baseEnv(t)
	k, v := jobRowJSON(t, e.jobTable, 4242, []byte(`{"id": 4242, "type": "x"}`))
	e.consumer.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypePut, Key: k, Value: v, CRTs: 1100}})
	err := e.store.Err()
	if err == nil || !strings.Contains(err.Error(), "job id 4242") || !strings.Contains(err.Error(), "1100") {
		t.Fatalf("got %v", err)
	}
	e2 := baseEnv(t)
	e2.consumer.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypePut, Key: []byte("t\x80bad"), Value: v, CRTs: 1100}})
	if e2.store.Err() == nil {
		t.Fatal("bad key accepted")
	}
}
