package mounter

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

// Rules MT1, MT7: the rows of mysql.tidb_ddl_history a real tidb-server
// wrote decode with that table's own TableInfo: the job id from the key, the
// job_meta blob to the job JSON the server reported, and the text columns.
func TestServerDDLHistoryRows(t *testing.T) {
	tables := serverTables(t)
	m := New(Config{})
	n := 0
	for _, r := range golden.OfKind(t, captureFile, "server_ddl_history") {
		var h struct {
			Name      string          `json:"name"`
			TableID   json.Number     `json:"history_table_id"`
			JobID     json.Number     `json:"job_id"`
			JobMeta   json.RawMessage `json:"job_meta_json"`
			DBName    string          `json:"db_name"`
			TableName string          `json:"table_name"`
			SchemaIDs string          `json:"schema_ids"`
			TableIDs  string          `json:"table_ids"`
			Created   string          `json:"create_time"`
			KeyHex    string          `json:"row_key_hex"`
			ValueHex  string          `json:"row_value_hex"`
		}
		r.Decode(t, &h)
		id, _ := h.TableID.Int64()
		ti := tables[id]
		if ti == nil {
			t.Fatalf("%s: no TableInfo for history table %d", h.Name, id)
		}
		e := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: unhex(t, h.KeyHex), Value: unhex(t, h.ValueHex)}
		var rc RowChange
		if err := m.Decode(e, ti, &rc); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		get := func(name string) string {
			ci := ti.ColumnByName(name)
			if ci == nil {
				t.Fatalf("%s: no column %q", h.Name, name)
			}
			d, err := rc.Row.Column(ci.ID)
			if err != nil {
				t.Fatalf("%s column %s: %v", h.Name, name, err)
			}
			if name == "job_meta" {
				return string(d.GetBytes())
			}
			return d.String()
		}
		for name, want := range map[string]string{"job_id": h.JobID.String(), "db_name": h.DBName, "table_name": h.TableName,
			"schema_ids": h.SchemaIDs, "table_ids": h.TableIDs, "create_time": h.Created} {
			if got := get(name); got != want {
				t.Errorf("%s column %s: %q, want %q", h.Name, name, got, want)
			}
		}
		var got, want any
		if err := json.Unmarshal([]byte(get("job_meta")), &got); err != nil {
			t.Fatalf("%s: job_meta is not JSON: %v", h.Name, err)
		}
		if err := json.Unmarshal(h.JobMeta, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: job_meta differs from the server's job JSON", h.Name)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d history rows", n)
	}
}
