package model

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// Rule SM3: the error names the job id, the byte offset and the field path.
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

// Rule SM3.
func TestParseTableInfoErrors(t *testing.T) {
	_, err := ParseTableInfo([]byte(`{"id": 1, "cols": [{"id": "x"}]}`))
	if err == nil || !strings.Contains(err.Error(), "cols.id") || !strings.Contains(err.Error(), "table info") {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseDBInfo([]byte(`{"id": true}`)); err == nil {
		t.Fatal("mistyped db id accepted")
	}
}

// Rule SM2: unknown keys are ignored and kept in Raw.
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

// Rule SM5.
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

// Rule SM5: the lazily built index is published atomically (-race).
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

// Rule SM4: inconsistent TableInfos are errors; no handle column means _tidb_rowid.
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

// TestCloneIsDeep fills every exported field of a TableInfo (through
// reflection, so a field added later without Clone support fails here) and
// checks the clone is equal and shares no mutable memory.
//
// Rule SM5: Clone shares no mutable memory, field by field.
func TestCloneIsDeep(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-golden.jsonl", "model_table_info") {
		ti, err := ParseTableInfo(rec["json"])
		if err != nil {
			t.Fatal(err)
		}
		fillZeroFields(reflect.ValueOf(ti).Elem())
		ti.Columns[0].OriginDefaultValue = map[string]any{"a": []any{"x"}}
		c := ti.Clone()
		a, _ := json.Marshal(ti)
		b, _ := json.Marshal(c)
		if string(a) != string(b) || string(c.Raw) != string(ti.Raw) {
			t.Fatalf("clone differs:\n%s\n%s", a, b)
		}
		assertNoSharing(t, "TableInfo", reflect.ValueOf(ti).Elem(), reflect.ValueOf(c).Elem())
	}
}

// fillZeroFields sets zero exported scalar/bytes/pointer fields so the
// equality check covers them.
func fillZeroFields(v reflect.Value) {
	ty := v.Type()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !ty.Field(i).IsExported() || !f.IsZero() {
			continue
		}
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(3)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(3)
		case reflect.String:
			f.SetString("s")
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Uint8 {
				f.SetBytes([]byte(`{"k":1}`))
			}
		case reflect.Ptr:
			if f.Type().Elem().Kind() == reflect.Struct {
				n := reflect.New(f.Type().Elem())
				fillZeroFields(n.Elem())
				f.Set(n)
			}
		}
	}
}

// assertNoSharing walks two values and fails when a slice, map or pointer
// of the clone aliases the original's memory.
func assertNoSharing(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.Ptr:
		if a.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: pointer shared", path)
			return
		}
		assertNoSharing(t, path, a.Elem(), b.Elem())
	case reflect.Interface:
		if !a.IsNil() {
			assertNoSharing(t, path, a.Elem(), b.Elem())
		}
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: slice shared", path)
			return
		}
		for i := 0; i < a.Len() && i < b.Len(); i++ {
			assertNoSharing(t, path+"[]", a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: map shared", path)
			return
		}
		for _, k := range a.MapKeys() {
			assertNoSharing(t, path+"{}", a.MapIndex(k), b.MapIndex(k))
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).IsExported() {
				assertNoSharing(t, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
			}
		}
	}
}
