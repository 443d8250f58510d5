package model

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestParseJobErrorsNameJobAndPlace(t *testing.T) {
	cases := []struct {
		name, in string
		jobID    int64
		want     []string
	}{
		{"mistyped field keeps job id", `{"id": 42, "type": "create table"}`, 42, []string{"job id 42", "type", "at byte"}},
		{"mistyped binlog", `{"id": 7, "binlog": {"SchemaVersion": "x"}}`, 7, []string{"job id 7", "binlog.SchemaVersion"}},
		{"syntax error", `{"id": 9, "type": 3,`, 0, []string{"at byte"}},
		{"empty", ``, 0, []string{"empty input"}},
		{"not an object", `[1,2]`, 0, []string{"parse job"}},
	}
	for _, c := range cases {
		_, err := ParseJob([]byte(c.in))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: error %v is not a *ParseError", c.name, err)
		}
		if pe.JobID != c.jobID {
			t.Errorf("%s: job id %d, want %d (%v)", c.name, pe.JobID, c.jobID, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestParseTableInfoErrors(t *testing.T) {
	_, err := ParseTableInfo([]byte(`{"id": 1, "cols": [{"id": "x"}]}`))
	if err == nil || !strings.Contains(err.Error(), "cols.id") || !strings.Contains(err.Error(), "table info") {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseDBInfo([]byte(`{"id": true}`)); err == nil {
		t.Fatal("mistyped db id accepted")
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	ti, err := ParseTableInfo([]byte(`{"id": 5, "future_field": {"x": [1]}, "cols": [], "name": {"O":"A","L":"a"}}`))
	if err != nil || ti.ID != 5 || ti.Name.L != "a" || !strings.Contains(string(ti.Raw), "future_field") {
		t.Fatalf("%v %+v", err, ti)
	}
	j, err := ParseJob([]byte(`{"id": 1, "type": 250, "new_thing": 1}`))
	if err != nil || j.Type.IsKnown() || j.Type.String() != "action(250)" {
		t.Fatalf("%v %v", err, j)
	}
}

func TestColumnByIDSparseAndDense(t *testing.T) {
	dense := &TableInfo{Columns: []*ColumnInfo{{ID: 1}, {ID: 2}, {ID: 4}}}
	sparse := &TableInfo{Columns: []*ColumnInfo{{ID: 1}, {ID: 1 << 40}, {ID: 3}}}
	for _, ti := range []*TableInfo{dense, sparse} {
		for _, c := range ti.Columns {
			if ti.ColumnByID(c.ID) != c {
				t.Errorf("ColumnByID(%d) wrong", c.ID)
			}
		}
		for _, id := range []int64{0, -1, 5, 1<<40 + 1} {
			if ti.ColumnByID(id) != nil {
				t.Errorf("ColumnByID(%d) found a column", id)
			}
		}
	}
	if sparse.colIndex.sparse == nil || dense.colIndex.dense == nil {
		t.Error("index representation not chosen by density")
	}
}

func TestColumnByIDConcurrent(t *testing.T) {
	ti := &TableInfo{}
	for i := 1; i <= 50; i++ {
		ti.Columns = append(ti.Columns, &ColumnInfo{ID: int64(i)})
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 50; i++ {
				if ti.ColumnByID(int64(i)).ID != int64(i) {
					t.Error("wrong column")
				}
			}
		}()
	}
	wg.Wait()
}

func TestCloneSharesNothing(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-golden.jsonl", "model_table_info") {
		ti, err := ParseTableInfo(rec["json"])
		if err != nil {
			t.Fatal(err)
		}
		_ = ti.ColumnByID(1)
		c := ti.Clone()
		c.Columns[0].Name.O = "changed"
		c.Columns[0].FieldType.SetFlen(1)
		c.Raw[0] = 'X'
		if c.Partition != nil {
			c.Partition.Definitions[0].ID = -1
		}
		if ti.Columns[0].Name.O == "changed" || ti.Columns[0].FieldType.GetFlen() == 1 || ti.Raw[0] == 'X' ||
			(ti.Partition != nil && ti.Partition.Definitions[0].ID == -1) {
			t.Fatal("clone shares memory with the original")
		}
		if c.ColumnByID(1) != c.Columns[0] {
			t.Fatal("clone's column index points at the original")
		}
	}
}

func TestHandleColumnsErrors(t *testing.T) {
	ti := &TableInfo{ID: 3, PKIsHandle: true, Columns: []*ColumnInfo{{ID: 1}}}
	if _, err := ti.HandleColumns(); err == nil {
		t.Error("pk_is_handle without pk column accepted")
	}
	ti = &TableInfo{ID: 3, IsCommonHandle: true, Columns: []*ColumnInfo{{ID: 1}},
		Indices: []*IndexInfo{{Primary: true, Columns: []*IndexColumn{{Offset: 4}}}}}
	if _, err := ti.HandleColumns(); err == nil || !strings.Contains(err.Error(), "offset 4") {
		t.Errorf("bad offset: %v", err)
	}
	h, err := (&TableInfo{ID: 1}).HandleColumns()
	if err != nil || h.Kind != HandleRowID || h.Columns[0].Column.ID != ExtraHandleID {
		t.Errorf("rowid handle: %+v %v", h, err)
	}
}

func TestEnumNames(t *testing.T) {
	if ActionCreateTable.String() != "create table" || ActionMultiSchemaChange.String() != "alter table multi-schema change" {
		t.Error("action names")
	}
	if JobStateDone.String() != "done" || JobStateSynced.String() != "synced" || JobState(99).String() != "job state(99)" {
		t.Error("job state names")
	}
	if StatePublic.String() != "public" || SchemaState(9).String() != "schema state(9)" {
		t.Error("schema state names")
	}
}
