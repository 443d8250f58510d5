package schemastore

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// serverJob is one finished job captured from a real tidb-server.
type serverJob struct {
	name     string
	job      *model.Job
	meta     []byte // the job JSON with state rewritten to Done
	finished uint64
}

func serverJobs(t testing.TB) []serverJob {
	t.Helper()
	var out []serverJob
	for _, r := range goldenRecords(t, "tidb-server-capture.jsonl", "server_ddl_history") {
		var m map[string]any
		if err := json.Unmarshal(r["job_meta_json"], &m); err != nil {
			t.Fatal(err)
		}
		// The history row holds the Synced form; tidb_ddl_job's Done row
		// is the same job one state earlier.
		m["state"] = float64(model.JobStateDone)
		meta := mustJSON(t, m)
		j, err := model.ParseJob(meta)
		if err != nil {
			t.Fatalf("%s: %v", r.str("name"), err)
		}
		out = append(out, serverJob{name: r.str("name"), job: j, meta: meta, finished: j.FinishedTS()})
	}
	return out
}

func (e *env) deliverRaw(commitTs uint64, jobID int64, meta []byte) {
	k, v := jobRowJSON(e.t, e.jobTable, jobID, meta)
	e.consumer.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypePut, Key: k, Value: v, StartTs: commitTs - 1, CRTs: commitTs}})
}

// TestServerDDLSequence replays every DDL a real tidb-server ran (create
// database, create tables, add/drop column, add index, rename, truncate,
// create partitioned, add partition, drop, create) through tidb_ddl_job rows
// and checks the history at boundary timestamps and the events' metadata.
//
// Rules SS16 (FinishedTs = the row's commit ts), SS30, SS32, SS36 (drop events
// carry no TableInfo), SS43, SS55 (restart reads nothing upstream).
func TestServerDDLSequence(t *testing.T) {
	jobs := serverJobs(t)
	e := newEnv(t, nil)
	ts := map[int64]uint64{}
	for _, sj := range jobs {
		e.deliverRaw(sj.finished, sj.job.ID, sj.meta)
		ts[sj.job.ID] = sj.finished
	}
	last := jobs[len(jobs)-1].finished
	e.resolve(last)

	evs := e.events(snapTs)
	if len(evs) != len(jobs) {
		t.Fatalf("%d events, want %d", len(evs), len(jobs))
	}
	for i, ev := range evs {
		if ev.JobID != jobs[i].job.ID || ev.FinishedTs != jobs[i].finished || ev.SchemaVersion != jobs[i].job.SchemaVersion() {
			t.Errorf("event %d: job %d at %d v%d, want job %d at %d", i, ev.JobID, ev.FinishedTs, ev.SchemaVersion, jobs[i].job.ID, jobs[i].finished)
		}
	}
	byJob := map[int64]DDLEvent{}
	for _, ev := range evs {
		byJob[ev.JobID] = ev
	}

	// create table t_all (116)
	if ev := byJob[117]; !reflect.DeepEqual(ev.NeedAddedTables, []AddedTable{{SchemaID: 114, TableID: 116}}) ||
		ev.TableNameChange == nil || ev.TableNameChange.AddName[0] != (SchemaTableName{"gold", "t_all"}) {
		t.Errorf("create t_all event: %+v", ev)
	}
	// add column c_new at job 120: visible at FinishedTs, not at FinishedTs-1
	if ti := e.info(116, ts[120]-1); ti.ColumnByName("c_new") != nil {
		t.Error("c_new visible before its add column finished")
	}
	if ti := e.info(116, ts[120]); ti.ColumnByName("c_new") == nil {
		t.Error("c_new missing at the add column FinishedTs")
	}
	if ti := e.info(116, ts[121]); ti.ColumnByName("c_new") != nil {
		t.Error("c_new still there after drop column")
	}
	// between two DDLs the older version holds
	if ti := e.info(116, ts[121]+(ts[122]-ts[121])/2); ti.Indices == nil || len(ti.Indices) != 1 {
		t.Errorf("between drop column and add index: %d indices, want the unique key only", len(ti.Indices))
	}
	// rename at 123
	if e.info(116, ts[123]-1).Name.O != "t_all" || e.info(116, ts[123]).Name.O != "t_renamed" {
		t.Error("rename not at its FinishedTs")
	}
	if ev := byJob[123]; ev.ExtraTableName != "t_all" || ev.TableName != "t_renamed" || ev.UpdatedSchemas != nil ||
		!reflect.DeepEqual(ev.TableNameChange, &TableNameChange{AddName: []SchemaTableName{{"gold", "t_renamed"}}, DropName: []SchemaTableName{{"gold", "t_all"}}}) {
		t.Errorf("rename event: %+v %+v", ev, ev.TableNameChange)
	}
	// truncate t_ch: 118 -> 124 at 125
	if _, err := e.store.GetTableInfo(118, ts[125]); !errors.Is(err, ErrDropped) {
		t.Errorf("old id after truncate: %v", err)
	}
	if e.info(118, ts[125]-1).Name.O != "t_ch" {
		t.Error("old id before truncate")
	}
	if _, err := e.store.GetTableInfo(124, ts[125]-1); !errors.Is(err, ErrNotYetCreated) {
		t.Errorf("new id before truncate: %v", err)
	}
	if ev := byJob[125]; !reflect.DeepEqual(ev.NeedDroppedTables, []int64{118}) || !reflect.DeepEqual(ev.NeedAddedTables, []AddedTable{{114, 124}}) {
		t.Errorf("truncate event: dropped %v added %v", ev.NeedDroppedTables, ev.NeedAddedTables)
	}
	// partitioned t_part (126) with partitions 127, 128; 130 added at 131
	if ti := e.info(127, ts[129]); ti.ID != 126 || ti.Name.O != "t_part" {
		t.Errorf("partition 127 maps to %d %s", ti.ID, ti.Name.O)
	}
	if ev := byJob[129]; !reflect.DeepEqual(ev.NeedAddedTables, []AddedTable{{114, 127}, {114, 128}}) {
		t.Errorf("create partitioned: %v", ev.NeedAddedTables)
	}
	if _, err := e.store.GetTableInfo(130, ts[131]-1); !errors.Is(err, ErrNotYetCreated) {
		t.Errorf("partition 130 before add partition: %v", err)
	}
	if e.info(130, ts[131]).ID != 126 {
		t.Error("partition 130 after add partition")
	}
	if ev := byJob[131]; !reflect.DeepEqual(ev.NeedAddedTables, []AddedTable{{114, 130}}) || ev.NeedDroppedTables != nil {
		t.Errorf("add partition: added %v dropped %v", ev.NeedAddedTables, ev.NeedDroppedTables)
	}
	// drop table t_ch (now 124) at 132
	if _, err := e.store.GetTableInfo(124, ts[132]); !errors.Is(err, ErrDropped) {
		t.Errorf("after drop: %v", err)
	}
	var le *LookupError
	if _, err := e.store.GetTableInfo(124, last); !errors.As(err, &le) || le.DroppedTs != ts[132] {
		t.Errorf("drop error does not name the drop ts: %v", err)
	}
	if ev := byJob[132]; !reflect.DeepEqual(ev.NeedDroppedTables, []int64{124}) || ev.TableInfo != nil {
		t.Errorf("drop event: %+v", ev)
	}
	st, err := e.store.GetTableDDLEventState(116)
	if err != nil || st.ResolvedTs != last || st.MaxEventTs != ts[123] {
		t.Errorf("event state of 116: %+v %v, want max event %d", st, err, ts[123])
	}

	// restart: same answers without re-reading anything upstream
	scans := e.snap.scans
	e.reopen()
	if e.snap.scans != scans {
		t.Error("restart re-read the meta snapshot")
	}
	if got := e.events(snapTs); !reflect.DeepEqual(eventSummaries(got), eventSummaries(evs)) {
		t.Errorf("events after restart differ:\n%v\n%v", eventSummaries(got), eventSummaries(evs))
	}
	if e.info(116, ts[123]).Name.O != "t_renamed" || e.info(116, ts[120]).ColumnByName("c_new") == nil {
		t.Error("history after restart differs")
	}
	subs, _ := e.store.DDLSubscriptions()
	if subs[0].StartTs != last {
		t.Errorf("resubscribe from %d, want the persisted resolved ts %d", subs[0].StartTs, last)
	}
}

// TestServerHistoryRowsFollowHistory feeds the real tidb_ddl_history row
// bytes (row format v2 written by TiDB) to the history-span consumer: only
// CreateTable/CreateTables in state Synced are taken from it.
//
// Rules SS3, SS15 (from the history span only CreateTable/CreateTables).
func TestServerHistoryRowsFollowHistory(t *testing.T) {
	f := newFakeSnapshot()
	f.withSystemTables(t, nil)
	cfg := Config{Dir: t.TempDir(), Snapshot: f, InitialTs: snapTs, FollowHistory: true}
	e2 := &env{t: t, dir: cfg.Dir, snap: f, jobTable: serverTable(t, "mysql.tidb_ddl_job"), cfg: cfg}
	e2.open()
	subs, err := e2.store.DDLSubscriptions()
	if err != nil || len(subs) != 2 || subs[1].Name != "mysql.tidb_ddl_history" {
		t.Fatalf("subscriptions %+v %v", subs, err)
	}
	hist := subs[1].Consumer
	jobs := serverJobs(t)
	// create schema must come through the job span (it is not taken from history)
	e2.deliverRaw(jobs[0].finished, jobs[0].job.ID, jobs[0].meta)
	var last uint64
	for _, r := range goldenRecords(t, "tidb-server-capture.jsonl", "server_ddl_history") {
		var fin struct {
			Binlog struct{ FinishedTS uint64 } `json:"binlog"`
		}
		_ = json.Unmarshal(r["job_meta_json"], &fin)
		hist.ConsumeKV([]kvevent.RawKVEntry{{OpType: kvevent.OpTypePut, Key: r.hex(t, "row_key_hex"), Value: r.hex(t, "row_value_hex"), CRTs: fin.Binlog.FinishedTS}})
		last = fin.Binlog.FinishedTS
	}
	hist.AdvanceResolvedTs(last)
	e2.resolve(last)
	if err := e2.store.Err(); err != nil {
		t.Fatal(err)
	}
	var creates []int64
	for _, ev := range e2.events(snapTs) {
		if ev.Type != int(model.ActionCreateSchema) && ev.Type != int(model.ActionCreateTable) {
			t.Errorf("event of type %d taken from history", ev.Type)
		}
		if ev.Type == int(model.ActionCreateTable) {
			creates = append(creates, ev.TableID)
		}
	}
	if !reflect.DeepEqual(creates, []int64{116, 118, 126, 133}) {
		t.Errorf("creates from history: %v", creates)
	}
	// the same create arriving again on the job span is a duplicate
	for _, sj := range jobs {
		if sj.job.ID == 134 {
			e2.deliverRaw(last+10, sj.job.ID, sj.meta)
		}
	}
	hist.AdvanceResolvedTs(last + 20)
	e2.resolve(last + 20)
	if n := len(e2.events(snapTs)); n != 5 {
		t.Errorf("%d events after duplicate create, want 5", n)
	}
}

type evSummary struct {
	Job     int64
	Ts      uint64
	Ver     int64
	Dropped []int64
	Added   []AddedTable
	Table   int64
}

func eventSummaries(evs []DDLEvent) []evSummary {
	var out []evSummary
	for _, ev := range evs {
		s := evSummary{Job: ev.JobID, Ts: ev.FinishedTs, Ver: ev.SchemaVersion, Dropped: ev.NeedDroppedTables, Added: ev.NeedAddedTables}
		if ev.TableInfo != nil {
			s.Table = ev.TableInfo.ID
		}
		out = append(out, s)
	}
	return out
}
