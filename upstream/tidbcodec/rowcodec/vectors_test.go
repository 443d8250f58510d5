package rowcodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

type vectorColumn struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	Value     json.RawMessage `json:"value"`
	Precision int             `json:"precision"`
	Frac      int             `json:"frac"`
}

// vectorDatum builds the datum and column of one vector input.
func vectorInput(t *testing.T, c vectorColumn) (value.Datum, Column) {
	t.Helper()
	var ft *types.FieldType
	var d value.Datum
	var s string
	_ = json.Unmarshal(c.Value, &s)
	switch c.Type {
	case "":
		ft = types.NewFieldType(mysql.TypeLonglong)
		var n *json.Number
		if err := json.Unmarshal(c.Value, &n); err == nil && n != nil {
			i, _ := n.Int64()
			d = value.NewIntDatum(i)
		} else if s != "" {
			ft = types.NewFieldType(mysql.TypeVarchar)
			ft.SetCharset("utf8mb4")
			d = value.NewStringDatum(s)
		}
	case "BIGINT":
		ft = types.NewFieldType(mysql.TypeLonglong)
		var n int64
		if err := json.Unmarshal(c.Value, &n); err != nil {
			t.Fatal(err)
		}
		d = value.NewIntDatum(n)
	case "BIGINT UNSIGNED":
		ft = types.NewFieldType(mysql.TypeLonglong)
		ft.AddFlag(mysql.UnsignedFlag)
		var n json.Number
		if err := json.Unmarshal(c.Value, &n); err != nil {
			t.Fatal(err)
		}
		var u uint64
		fmt.Sscan(n.String(), &u)
		d = value.NewUintDatum(u)
	case "VARBINARY":
		ft = types.NewFieldType(mysql.TypeVarchar)
		ft.SetCharset("binary")
		d = value.NewBytesDatum([]byte(s))
	case "DOUBLE":
		ft = types.NewFieldType(mysql.TypeDouble)
		var f float64
		if err := json.Unmarshal(c.Value, &f); err != nil {
			t.Fatal(err)
		}
		d = value.NewFloat64Datum(f)
	case "DATETIME":
		ft = types.NewFieldType(mysql.TypeDatetime)
		tm, err := value.ParseTime(s, mysql.TypeDatetime, 0)
		if err != nil {
			t.Fatal(err)
		}
		d = value.NewTimeDatum(tm.Pack(), mysql.TypeDatetime, 0)
	case "DECIMAL":
		ft = types.NewFieldType(mysql.TypeNewDecimal)
		dec, err := value.ParseDecimal(s)
		if err != nil {
			t.Fatal(err)
		}
		if d, err = value.NewDecimalDatum(dec, c.Precision, c.Frac); err != nil {
			t.Fatal(err)
		}
	case "JSON":
		ft = types.NewFieldType(mysql.TypeJSON)
		j, err := value.ParseJSON(c.Value)
		if err != nil {
			t.Fatal(err)
		}
		d = value.NewJSONDatum(j.AppendTyped(nil))
	case "TIME":
		ft = types.NewFieldType(mysql.TypeDuration)
		du, err := value.ParseDuration(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		d = value.NewDurationDatum(du.Nanos, 0)
	default:
		t.Fatalf("vector type %q not handled", c.Type)
	}
	if string(c.Value) == "null" {
		d = value.Datum{}
	}
	return d, NewColumn(c.ID, ft)
}

// Rules R1, R10, R13: the rowcodec vectors (TiKV's encoder tests and the
// v1 vector) encode to the same bytes and decode back to the inputs.
func TestVectors(t *testing.T) {
	n := 0
	for _, r := range golden.Lines(t, "reference/tidb-vectors.jsonl") {
		if r.Kind != "rowcodec.v2.row" && r.Kind != "tablecodec.EncodeOldRow (row v1)" {
			continue
		}
		var vec struct {
			Hex   string `json:"hex"`
			Input struct {
				Columns []vectorColumn `json:"columns"`
			} `json:"input"`
		}
		r.Decode(t, &vec)
		want := unhex(t, vec.Hex)
		var ids []int64
		var ds []value.Datum
		var cols []Column
		for _, c := range vec.Input.Columns {
			d, col := vectorInput(t, c)
			ids, ds, cols = append(ids, c.ID), append(ds, d), append(cols, col)
		}
		var got []byte
		var err error
		if r.Kind == "rowcodec.v2.row" {
			got, err = EncodeV2(nil, ids, ds, nil)
		} else {
			got, err = EncodeV1(nil, ids, ds)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("line %d: encode err %v\n got %x\nwant %x", r.Line, err, got, want)
		}
		var v RowView
		if err := v.Reset(want); err != nil {
			t.Fatalf("line %d: %v", r.Line, err)
		}
		for i := range cols {
			d, found, err := v.Column(&cols[i])
			if err != nil || !found || !d.Equal(&ds[i]) {
				t.Fatalf("line %d column %d: got %v found=%v err=%v, want %v", r.Line, ids[i], d, found, err, ds[i])
			}
		}
		n++
	}
	if n != 4 {
		t.Fatalf("expected 4 row vectors, found %d", n)
	}
}

// Rule R1 (restore data): the restore blob inside a real server's unique
// index value is an ordinary v2 row keyed by column id.
func TestServerIndexRestoreData(t *testing.T) {
	found := false
	for _, r := range golden.OfKind(t, "golden/tidb-server-capture.jsonl", "server_index_kv") {
		var rec struct {
			Name     string `json:"name"`
			ValueHex string `json:"value_hex"`
			Varchar  string `json:"c_varchar"`
		}
		r.Decode(t, &rec)
		val := unhex(t, rec.ValueHex)
		if len(val) < 10 { // old layout: no restore data
			continue
		}
		tail := int(val[0])
		blob := val[1 : len(val)-tail]
		if !IsV2(blob) {
			t.Fatalf("%s: restore data %x is not a v2 row", rec.Name, blob)
		}
		var v RowView
		if err := v.Reset(blob); err != nil {
			t.Fatalf("%s: %v", rec.Name, err)
		}
		ft := types.NewFieldType(mysql.TypeVarchar)
		ft.SetCharset("utf8mb4")
		c := NewColumn(8, ft) // c_varchar of t_renamed
		d, ok, err := v.Column(&c)
		if err != nil || !ok || d.String() != rec.Varchar {
			t.Fatalf("%s: restore data column 8 = %v (found %v, err %v), want %q", rec.Name, d, ok, err, rec.Varchar)
		}
		found = true
	}
	if !found {
		t.Fatal("no index value with restore data in the capture")
	}
}
