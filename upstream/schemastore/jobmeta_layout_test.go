package schemastore

import (
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// TestJobMetaLocatedByName (rule SS14): the job_meta column is found by name
// in the job table's layout of the snapshot, so a layout that gives it
// another column id still decodes every job; the layout is persisted, so a
// restart without a snapshot decodes with it too.
func TestJobMetaLocatedByName(t *testing.T) {
	real := serverTable(t, "mysql.tidb_ddl_job")
	layout := real.Clone()
	layout.Raw = nil
	var moved bool
	for _, c := range layout.Columns {
		if c.Name.L == "job_meta" {
			c.ID += 100
			moved = true
		}
	}
	if !moved {
		t.Fatal("the captured job table has no job_meta column")
	}
	var maxID int64
	for _, c := range layout.Columns {
		maxID = max(maxID, c.ID)
	}
	layout.MaxColumnID = maxID
	f := newFakeSnapshot()
	f.addDB(t, nil, &model.DBInfo{ID: 1, Name: model.NewCIStr("mysql"), State: model.StatePublic})
	f.addTable(t, nil, 1, layout)
	f.addTable(t, nil, 1, serverTable(t, "mysql.tidb_ddl_history"))
	f.addDB(t, nil, dbInfo(10, "db"))
	f.addTable(t, nil, 10, tbl(20, "t", 2))
	e := &env{t: t, dir: t.TempDir(), snap: f, jobTable: layout}
	e.cfg = Config{Dir: e.dir, Snapshot: f, InitialTs: snapTs}
	e.open()

	if real.ColumnByName("job_meta").ID == layout.ColumnByName("job_meta").ID {
		t.Fatal("the test layout must move job_meta to another column id")
	}
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	if err := e.store.Err(); err != nil {
		t.Fatal(err)
	}
	if got := colNames(e.info(20, 1100)); got != "id,c1,c2,c3" {
		t.Fatalf("after the job: %s", got)
	}
	e.cfg.Snapshot = nil
	e.reopen()
	e.apply(1200, withTable(job(2, model.ActionAddColumn, 10, 20, 3), tbl(20, "t", 4)))
	if got := colNames(e.info(20, 1200)); got != "id,c1,c2,c3,c4" {
		t.Fatalf("after restart: %s", got)
	}
}
