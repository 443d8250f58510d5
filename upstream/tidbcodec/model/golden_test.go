package model

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// goldenDir finds ../shared/golden next to the module root. Tests fail (not
// skip) when the files are missing.
func goldenDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "golden")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// goldenRecords returns the raw records of the given kinds from a golden file.
func goldenRecords(t testing.TB, file string, kinds ...string) []map[string]json.RawMessage {
	t.Helper()
	f, err := os.Open(filepath.Join(goldenDir(t), file))
	if err != nil {
		t.Fatalf("golden file missing: %v", err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("golden line: %v", err)
		}
		var kind string
		_ = json.Unmarshal(rec["kind"], &kind)
		if want[kind] {
			out = append(out, rec)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no records of kinds %v in %s", kinds, file)
	}
	return out
}

func str(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("not a string: %s", raw)
	}
	return s
}

// checkTagsAgree marshals v and checks that every key it writes that also
// appears in the original JSON has the same value: the struct tags name
// TiDB's fields exactly and the values survive a round trip.
func checkTagsAgree(t *testing.T, name string, original []byte, v any) {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	var a, b map[string]any
	if err := json.Unmarshal(original, &a); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	compareCommon(t, name, a, b)
}

func compareCommon(t *testing.T, path string, orig, ours map[string]any) {
	t.Helper()
	for k, ov := range ours {
		tv, ok := orig[k]
		if !ok {
			continue
		}
		om, ok1 := ov.(map[string]any)
		tm, ok2 := tv.(map[string]any)
		if ok1 && ok2 {
			compareCommon(t, path+"."+k, tm, om)
			continue
		}
		oa, ok1 := ov.([]any)
		ta, ok2 := tv.([]any)
		if ok1 && ok2 && len(oa) == len(ta) {
			for i := range oa {
				om, ok1 := oa[i].(map[string]any)
				tm, ok2 := ta[i].(map[string]any)
				if ok1 && ok2 {
					compareCommon(t, path+"."+k, tm, om)
				} else if !reflect.DeepEqual(oa[i], ta[i]) {
					t.Errorf("%s.%s[%d]: TiDB wrote %v, we wrote %v", path, k, i, ta[i], oa[i])
				}
			}
			continue
		}
		if !reflect.DeepEqual(ov, tv) {
			t.Errorf("%s.%s: TiDB wrote %v, we wrote %v", path, k, tv, ov)
		}
	}
}

type expectTable struct {
	handleKind HandleKind
	handle     []string
	physical   []int64 // nil: just the table id
}

func checkTable(t *testing.T, name string, raw []byte, ti *TableInfo, exp *expectTable) {
	t.Helper()
	// Re-derive from the generic JSON what the helpers must report.
	var g struct {
		ID         int64 `json:"id"`
		PKIsHandle bool  `json:"pk_is_handle"`
		IsCommon   bool  `json:"is_common_handle"`
		Cols       []struct {
			ID   int64 `json:"id"`
			Name struct{ O string }
			Type struct {
				Tp   byte
				Flag uint
			} `json:"type"`
			Gen    string `json:"generated_expr_string"`
			Stored bool   `json:"generated_stored"`
		} `json:"cols"`
		Index []struct {
			Primary bool                                `json:"is_primary"`
			Cols    []struct{ Name struct{ O string } } `json:"idx_cols"`
		} `json:"index_info"`
		Partition *struct {
			Defs []struct {
				ID int64 `json:"id"`
			} `json:"definitions"`
		} `json:"partition"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if ti.ID != g.ID || len(ti.Columns) != len(g.Cols) {
		t.Fatalf("%s: id %d cols %d, want id %d cols %d", name, ti.ID, len(ti.Columns), g.ID, len(g.Cols))
	}
	for i, gc := range g.Cols {
		c := ti.ColumnByID(gc.ID)
		if c == nil || c != ti.Columns[i] || c.Name.O != gc.Name.O {
			t.Errorf("%s: ColumnByID(%d) = %v, want column %q at offset %d", name, gc.ID, c, gc.Name.O, i)
			continue
		}
		if c.FieldType.GetType() != gc.Type.Tp || c.FieldType.GetFlag() != gc.Type.Flag {
			t.Errorf("%s: column %q type %d flag %d, want %d %d", name, gc.Name.O, c.FieldType.GetType(), c.FieldType.GetFlag(), gc.Type.Tp, gc.Type.Flag)
		}
		if c.IsVirtualGenerated() != (gc.Gen != "" && !gc.Stored) {
			t.Errorf("%s: column %q IsVirtualGenerated wrong", name, gc.Name.O)
		}
	}
	if ti.ColumnByID(9999) != nil || ti.ColumnByID(-5) != nil {
		t.Errorf("%s: ColumnByID of absent id returned a column", name)
	}
	h, err := ti.HandleColumns()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var wantHandle []string
	wantKind := HandleRowID
	switch {
	case g.PKIsHandle:
		wantKind = HandleInt
		for _, c := range g.Cols {
			if c.Type.Flag&2 != 0 {
				wantHandle = append(wantHandle, c.Name.O)
			}
		}
	case g.IsCommon:
		wantKind = HandleCommon
		for _, idx := range g.Index {
			if idx.Primary {
				for _, c := range idx.Cols {
					wantHandle = append(wantHandle, c.Name.O)
				}
			}
		}
	default:
		wantHandle = []string{ExtraHandleName}
	}
	var gotHandle []string
	for _, hc := range h.Columns {
		gotHandle = append(gotHandle, hc.Column.Name.O)
	}
	if h.Kind != wantKind || !reflect.DeepEqual(gotHandle, wantHandle) {
		t.Errorf("%s: handle %s %v, want %s %v", name, h.Kind, gotHandle, wantKind, wantHandle)
	}
	wantPhys := []int64{g.ID}
	if g.Partition != nil && len(g.Partition.Defs) > 0 {
		wantPhys = nil
		for _, d := range g.Partition.Defs {
			wantPhys = append(wantPhys, d.ID)
		}
	}
	if !reflect.DeepEqual(ti.PhysicalIDs(), wantPhys) {
		t.Errorf("%s: PhysicalIDs %v, want %v", name, ti.PhysicalIDs(), wantPhys)
	}
	if exp != nil {
		if h.Kind != exp.handleKind || !reflect.DeepEqual(gotHandle, exp.handle) {
			t.Errorf("%s: handle %s %v, expected %s %v", name, h.Kind, gotHandle, exp.handleKind, exp.handle)
		}
		if exp.physical != nil && !reflect.DeepEqual(ti.PhysicalIDs(), exp.physical) {
			t.Errorf("%s: PhysicalIDs %v, expected %v", name, ti.PhysicalIDs(), exp.physical)
		}
	}
	checkTagsAgree(t, name, raw, ti)
	if string(ti.Raw) != string(raw) {
		t.Errorf("%s: Raw does not hold the parsed input", name)
	}
}

// Independent expectations from the SQL that made each golden table.
var knownTables = map[string]*expectTable{
	"t_all":  {handleKind: HandleInt, handle: []string{"id"}},
	"t_part": {handleKind: HandleInt, handle: []string{"id"}, physical: []int64{110, 111, 112}},
	"t_ch":   {handleKind: HandleCommon, handle: []string{"k", "n"}},
	// server capture
	"gold.t_renamed":         {handleKind: HandleInt, handle: []string{"id"}},
	"gold.t_ch2":             {handleKind: HandleCommon, handle: []string{"k", "n"}},
	"gold.t_part":            {handleKind: HandleInt, handle: []string{"id"}, physical: []int64{127, 128, 130}},
	"mysql.tidb_ddl_job":     {handleKind: HandleInt, handle: []string{"job_id"}},
	"mysql.tidb_ddl_history": {handleKind: HandleInt, handle: []string{"job_id"}},
}

// Rules SM1 (checkTagsAgree), SM2 (Raw keeps the input), SM4 (handle columns),
// SM6 (PhysicalIDs), SM7 (IsVirtualGenerated), all through checkTable.
func TestGoldenModelTableInfo(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-golden.jsonl", "model_table_info") {
		name := str(t, rec["name"])
		ti, err := ParseTableInfo(rec["json"])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		exp := knownTables[name]
		if exp == nil {
			t.Errorf("golden table %q has no independent expectation in this test", name)
		}
		checkTable(t, name, rec["json"], ti, exp)
	}
}

// Rules SM1, SM2, SM4, SM6, SM7 on the real server's TableInfos (checkTable).
func TestGoldenServerTableInfo(t *testing.T) {
	sawJobTable := false
	for _, rec := range goldenRecords(t, "tidb-server-capture.jsonl", "server_table_info") {
		name := str(t, rec["name"])
		value, err := hex.DecodeString(str(t, rec["meta_value_hex"]))
		if err != nil {
			t.Fatal(err)
		}
		ti, err := ParseTableInfo(value)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var tableID int64
		_ = json.Unmarshal(rec["table_id"], &tableID)
		if ti.ID != tableID {
			t.Errorf("%s: id %d, record says %d", name, ti.ID, tableID)
		}
		exp := knownTables[name]
		if exp == nil {
			t.Errorf("server table %q has no independent expectation in this test", name)
		}
		checkTable(t, name, value, ti, exp)
		if name == "mysql.tidb_ddl_job" || name == "mysql.tidb_ddl_history" {
			sawJobTable = true
			c := ti.ColumnByName("JOB_META")
			if c == nil || ti.ColumnByID(c.ID) != c {
				t.Errorf("%s: job_meta column not found by name", name)
			}
		}
	}
	if !sawJobTable {
		t.Error("server capture lacks the tidb_ddl_job layout")
	}
}

// Rule SM1.
func TestGoldenDBInfo(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-golden.jsonl", "model_db_info") {
		d, err := ParseDBInfo(rec["json"])
		if err != nil {
			t.Fatal(err)
		}
		if d.Name.O != "test" || d.State != StatePublic {
			t.Errorf("db %+v", d)
		}
		checkTagsAgree(t, "db", rec["json"], d)
	}
	for _, rec := range goldenRecords(t, "tidb-server-capture.jsonl", "server_db_info") {
		value, _ := hex.DecodeString(str(t, rec["meta_value_hex"]))
		d, err := ParseDBInfo(value)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		_ = json.Unmarshal(rec["db_id"], &id)
		if d.ID != id || d.Name.O != str(t, rec["name"]) {
			t.Errorf("server db %+v, want id %d name %s", d, id, rec["name"])
		}
		checkTagsAgree(t, "server db", value, d)
	}
}

func TestGoldenFieldTypes(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-golden.jsonl", "model_field_type") {
		name := str(t, rec["name"])
		var c ColumnInfo
		if err := json.Unmarshal(rec["column_info_json"], &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ft struct {
			Tp      byte
			Flag    uint
			Flen    int
			Decimal int
			Charset string
			Collate string
			Elems   []string
		}
		if err := json.Unmarshal(rec["field_type_json"], &ft); err != nil {
			t.Fatal(err)
		}
		f := &c.FieldType
		if f.GetType() != ft.Tp || f.GetFlag() != ft.Flag || f.GetFlen() != ft.Flen || f.GetDecimal() != ft.Decimal ||
			f.GetCharset() != ft.Charset || f.GetCollate() != ft.Collate || !reflect.DeepEqual(f.GetElems(), ft.Elems) {
			t.Errorf("%s: field type %v, want %+v", name, f, ft)
		}
		checkTagsAgree(t, name, rec["column_info_json"], &c)
	}
}

// Rule SM1.
func TestGoldenModelJobs(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-golden.jsonl", "model_job") {
		name := str(t, rec["name"])
		var code int
		_ = json.Unmarshal(rec["action_code"], &code)
		var version int64
		_ = json.Unmarshal(rec["job_version"], &version)
		for _, form := range []string{"queued_json", "history_json"} {
			j, err := ParseJob(rec[form])
			if err != nil {
				t.Fatalf("%s %s: %v", name, form, err)
			}
			if int(j.Type) != code || int64(j.Version) != version || j.Type.String() != str(t, rec["action"]) {
				t.Errorf("%s %s: type %d %q version %d, want %d %q %d", name, form, j.Type, j.Type, j.Version, code, str(t, rec["action"]), version)
			}
			checkTagsAgree(t, name+" "+form, rec[form], j)
		}
		// The history form has the binlog block filled.
		j, _ := ParseJob(rec["history_json"])
		var g struct {
			Binlog struct {
				SchemaVersion int64
				FinishedTS    uint64
				TableInfo     *struct {
					ID int64 `json:"id"`
				}
				DBInfo *struct {
					ID int64 `json:"id"`
				}
			} `json:"binlog"`
		}
		_ = json.Unmarshal(rec["history_json"], &g)
		if j.BinlogInfo == nil || j.SchemaVersion() != g.Binlog.SchemaVersion || j.FinishedTS() != g.Binlog.FinishedTS || j.SchemaVersion() == 0 {
			t.Errorf("%s: binlog %+v, want version %d finished %d", name, j.BinlogInfo, g.Binlog.SchemaVersion, g.Binlog.FinishedTS)
		}
		if (g.Binlog.TableInfo == nil) != (j.BinlogInfo.TableInfo == nil) || (g.Binlog.TableInfo != nil && g.Binlog.TableInfo.ID != j.BinlogInfo.TableInfo.ID) {
			t.Errorf("%s: binlog table info mismatch", name)
		}
		if (g.Binlog.DBInfo == nil) != (j.BinlogInfo.DBInfo == nil) {
			t.Errorf("%s: binlog db info mismatch", name)
		}
		if j.State != JobStateSynced || !j.IsDone() {
			t.Errorf("%s: history state %s", name, j.State)
		}
	}
}

// Rules SM1, SM4, SM6.
func TestGoldenServerDDLHistory(t *testing.T) {
	for _, rec := range goldenRecords(t, "tidb-server-capture.jsonl", "server_ddl_history") {
		name := str(t, rec["name"])
		j, err := ParseJob(rec["job_meta_json"])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var jobID int64
		var code int
		_ = json.Unmarshal(rec["job_id"], &jobID)
		_ = json.Unmarshal(rec["action_code"], &code)
		if j.ID != jobID || int(j.Type) != code || j.Query != str(t, rec["query"]) {
			t.Errorf("%s: job %v, want id %d type %d", name, j, jobID, code)
		}
		if j.BinlogInfo == nil || j.SchemaVersion() <= 0 || j.FinishedTS() == 0 {
			t.Errorf("%s: binlog block missing or empty: %+v", name, j.BinlogInfo)
		}
		switch j.Type {
		case ActionCreateSchema:
			if j.BinlogInfo.DBInfo == nil || j.BinlogInfo.DBInfo.ID != j.SchemaID {
				t.Errorf("%s: create schema without its DBInfo", name)
			}
		case ActionTruncateTable:
			if j.BinlogInfo.TableInfo == nil || j.BinlogInfo.TableInfo.ID == j.TableID {
				t.Errorf("%s: truncate must carry the new table id", name)
			}
		default:
			ti := j.BinlogInfo.TableInfo
			if ti == nil {
				t.Fatalf("%s: no TableInfo", name)
			}
			if _, err := ti.HandleColumns(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if j.Type == ActionAddTablePartition && !reflect.DeepEqual(ti.PhysicalIDs(), []int64{127, 128, 130}) {
				t.Errorf("%s: partitions %v", name, ti.PhysicalIDs())
			}
		}
		checkTagsAgree(t, name, rec["job_meta_json"], j)
	}
}
