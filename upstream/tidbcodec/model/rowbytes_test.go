package model_test

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// TestServerHistoryRowBytes parses the job JSON exactly as TiDB stored it:
// the job_meta cell of each real mysql.tidb_ddl_history row (row format v2),
// located by name in the captured table layout.
func TestServerHistoryRowBytes(t *testing.T) {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found")
		}
		dir = filepath.Dir(dir)
	}
	f, err := os.Open(filepath.Join(dir, "..", "shared", "golden", "tidb-server-capture.jsonl"))
	if err != nil {
		t.Fatalf("golden file missing: %v", err)
	}
	defer f.Close()
	type rec struct {
		Kind       string          `json:"kind"`
		Name       string          `json:"name"`
		MetaValue  string          `json:"meta_value_hex"`
		RowKey     string          `json:"row_key_hex"`
		RowValue   string          `json:"row_value_hex"`
		JobID      int64           `json:"job_id"`
		JobMetaRaw json.RawMessage `json:"job_meta_json"`
	}
	var hist *model.TableInfo
	var rows []rec
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Kind == "server_table_info" && r.Name == "mysql.tidb_ddl_history":
			b, _ := hex.DecodeString(r.MetaValue)
			if hist, err = model.ParseTableInfo(b); err != nil {
				t.Fatal(err)
			}
		case r.Kind == "server_ddl_history":
			rows = append(rows, r)
		}
	}
	if hist == nil || len(rows) == 0 {
		t.Fatal("golden capture lacks the history layout or rows")
	}
	meta := hist.ColumnByName("job_meta")
	if meta == nil {
		t.Fatal("no job_meta column")
	}
	col := rowcodec.NewColumn(meta.ID, &meta.FieldType)
	var view rowcodec.RowView
	for _, r := range rows {
		key, _ := hex.DecodeString(r.RowKey)
		tid, h, err := tablecodec.DecodeRecordKey(key)
		if err != nil || tid != hist.ID || h.IntValue() != r.JobID {
			t.Fatalf("%s: key %x: table %d handle %v %v", r.Name, key, tid, h, err)
		}
		val, _ := hex.DecodeString(r.RowValue)
		if err := view.Reset(val); err != nil {
			t.Fatal(err)
		}
		d, found, err := view.Column(&col)
		if err != nil || !found {
			t.Fatalf("%s: job_meta cell: found=%v %v", r.Name, found, err)
		}
		j, err := model.ParseJob(d.GetBytes())
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		var want struct {
			Binlog struct {
				SchemaVersion int64
				FinishedTS    uint64
			} `json:"binlog"`
		}
		_ = json.Unmarshal(r.JobMetaRaw, &want)
		if j.ID != r.JobID || j.BinlogInfo == nil || j.SchemaVersion() != want.Binlog.SchemaVersion || j.FinishedTS() != want.Binlog.FinishedTS {
			t.Errorf("%s: job %d binlog %+v, want id %d %+v", r.Name, j.ID, j.BinlogInfo, r.JobID, want.Binlog)
		}
		if j.State != model.JobStateSynced {
			t.Errorf("%s: state %s", r.Name, j.State)
		}
	}
}
