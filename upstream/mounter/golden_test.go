package mounter

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

const captureFile = "golden/tidb-server-capture.jsonl"

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

type serverRow struct {
	Name     string             `json:"name"`
	TableID  int64              `json:"table_id"`
	KeyHex   string             `json:"key_hex"`
	ValueHex string             `json:"value_hex"`
	SQL      map[string]*string `json:"sql_values_text"`
	CommitTs uint64             `json:"commit_ts"`
}

// serverTables parses every server_table_info of the capture by table id.
func serverTables(t *testing.T) map[int64]*model.TableInfo {
	out := map[int64]*model.TableInfo{}
	for _, r := range golden.OfKind(t, captureFile, "server_table_info") {
		var rec struct {
			TableID json.Number     `json:"table_id"`
			Meta    json.RawMessage `json:"meta_value_json"`
		}
		r.Decode(t, &rec)
		ti, err := model.ParseTableInfo(rec.Meta)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		id, _ := strconv.ParseInt(rec.TableID.String(), 10, 64)
		out[id] = ti
	}
	return out
}

// Rules MT1, MT6, MT7: every row a real tidb-server stored decodes, through
// the mounter with the server's own TableInfo, to what SQL returned, handle
// columns included (int handle and clustered common handle).
func TestServerRowsMatchSQL(t *testing.T) {
	tables := serverTables(t)
	m := New(Config{RequireOldValue: true})
	n := 0
	for _, r := range golden.OfKind(t, captureFile, "server_row") {
		var sr serverRow
		r.Decode(t, &sr)
		ti := tables[sr.TableID]
		if ti == nil {
			t.Fatalf("%s: no server_table_info for table %d", sr.Name, sr.TableID)
		}
		t.Run(sr.Name, func(t *testing.T) {
			entry := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: unhex(t, sr.KeyHex), Value: unhex(t, sr.ValueHex), CRTs: sr.CommitTs}
			var rc RowChange
			if err := m.Decode(entry, ti, &rc); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if rc.RowType != RowTypeInsert || !rc.PreRow.IsEmpty() || rc.Row.IsEmpty() || rc.HandleOnly {
				t.Fatalf("classification %+v", rc)
			}
			if string(rc.RowKey) != string(entry.Key) || rc.TableID != sr.TableID {
				t.Fatalf("row key %x table %d, want %x %d", rc.RowKey, rc.TableID, entry.Key, sr.TableID)
			}
			seen := 0
			for _, ci := range ti.Columns {
				want, ok := sr.SQL[ci.Name.O]
				if !ok {
					t.Fatalf("column %q missing from sql_values_text", ci.Name.O)
				}
				d, err := rc.Row.Column(ci.ID)
				if err != nil {
					t.Fatalf("column %d %q: %v", ci.ID, ci.Name.O, err)
				}
				checkSQL(t, ci, d, want)
				seen++
			}
			if seen != len(sr.SQL) {
				t.Fatalf("checked %d columns, SQL returned %d", seen, len(sr.SQL))
			}
			// ForEach and Datums agree with per-column access.
			count := 0
			err := rc.Row.ForEach(func(ci *model.ColumnInfo, d value.Datum) error {
				checkSQL(t, ci, d, sr.SQL[ci.Name.O])
				count++
				return nil
			})
			if err != nil || count != len(ti.Columns) {
				t.Fatalf("ForEach: %d columns, err %v", count, err)
			}
			ds, err := rc.Row.Datums(nil)
			if err != nil {
				t.Fatalf("Datums: %v", err)
			}
			for off, ci := range ti.Columns {
				checkSQL(t, ci, ds[off], sr.SQL[ci.Name.O])
			}
		})
		n++
	}
	if n < 6 {
		t.Fatalf("only %d server rows", n)
	}
}

func checkSQL(t *testing.T, ci *model.ColumnInfo, d value.Datum, want *string) {
	t.Helper()
	if want == nil {
		if !d.IsNull() {
			t.Errorf("column %q: got %s, SQL returned NULL", ci.Name.O, d)
		}
		return
	}
	if got := d.String(); got != *want {
		t.Errorf("column %q: got %q, SQL returned %q", ci.Name.O, got, *want)
	}
}
