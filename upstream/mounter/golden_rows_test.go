package mounter

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

const goldenFile = "golden/tidb-golden.jsonl"

type goldenRowColumn struct {
	ColID   int64   `json:"col_id"`
	Name    string  `json:"col_name"`
	Text    *string `json:"text"`
	Float64 string  `json:"float64_bits"`
}

// goldenText is the golden file's human-readable form of d: BIT as its
// unsigned value, floats as their float64 bits, TIMESTAMP in the row's loc.
func goldenText(t *testing.T, loc string, ft byte, d value.Datum, c *goldenRowColumn) (got, want string) {
	want = "NULL"
	if c.Text != nil {
		want = *c.Text
	}
	switch d.Kind() {
	case value.KindBit:
		return strconv.FormatUint(d.GetUint64(), 10), want
	case value.KindFloat32, value.KindFloat64:
		return fmt.Sprintf("%016x", math.Float64bits(d.GetFloat64())), c.Float64
	case value.KindTime:
		if ft == mysql.TypeTimestamp && loc != "UTC" {
			l, err := time.LoadLocation(loc)
			if err != nil {
				t.Fatal(err)
			}
			gt, err := d.GetTime().GoTime(time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			return value.TimeFromGo(gt.In(l), mysql.TypeTimestamp, d.Fsp()).String(), want
		}
	}
	return d.String(), want
}

// Rules MT1, MT7, MT10, MT11: every golden row of the t_all (int handle) and
// t_ch (clustered) tables, in every stored variant (what TiDB's table layer
// writes, with every column, with checksum, v1), decodes through the mounter
// with TiDB's own TableInfo to the values TiDB was given: skipped NULL
// columns come back as NULL, skipped handle columns from the key.
func TestGoldenRowsThroughMounter(t *testing.T) {
	tables := map[string]*model.TableInfo{}
	for _, r := range golden.OfKind(t, goldenFile, "model_table_info") {
		var rec struct {
			JSON json.RawMessage `json:"json"`
		}
		r.Decode(t, &rec)
		ti, err := model.ParseTableInfo(rec.JSON)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		tables[r.Name] = ti
	}
	m := New(Config{})
	checked := 0
	for _, r := range golden.OfKind(t, goldenFile, "row") {
		var g struct {
			Name    string            `json:"name"`
			Table   string            `json:"table"`
			Loc     string            `json:"loc"`
			Handle  string            `json:"handle"`
			KeyHex  string            `json:"key_hex"`
			Columns []goldenRowColumn `json:"columns"`
			V2      string            `json:"value_v2_hex"`
			V2All   string            `json:"value_v2_all_columns_hex"`
			V2Sum   string            `json:"value_v2_checksum_hex"`
			V1      string            `json:"value_v1_hex"`
			V1All   string            `json:"value_v1_all_columns_hex"`
		}
		r.Decode(t, &g)
		ti := tables[g.Table]
		if ti == nil {
			if g.Table == "t_wide" { // no TableInfo in the golden file; rowcodec tests cover it
				continue
			}
			t.Fatalf("%s: no model_table_info for %s", g.Name, g.Table)
		}
		for vi, hexv := range []string{g.V2, g.V2All, g.V2Sum, g.V1, g.V1All} {
			t.Run(fmt.Sprintf("%s/%d", g.Name, vi), func(t *testing.T) {
				e := &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: unhex(t, g.KeyHex), Value: unhex(t, hexv)}
				var rc RowChange
				if err := m.Decode(e, ti, &rc); err != nil {
					t.Fatalf("Decode: %v", err)
				}
				byID := map[int64]*goldenRowColumn{}
				for i := range g.Columns {
					byID[g.Columns[i].ColID] = &g.Columns[i]
				}
				ds, err := rc.Row.Datums(nil)
				if err != nil {
					t.Fatalf("Datums: %v", err)
				}
				for off, ci := range ti.Columns {
					d, err := rc.Row.Column(ci.ID)
					if err != nil {
						t.Fatalf("column %d %q: %v", ci.ID, ci.Name.O, err)
					}
					if !d.Equal(&ds[off]) {
						t.Fatalf("column %d: Column %v, Datums %v", ci.ID, d, ds[off])
					}
					gc := byID[ci.ID]
					if gc == nil {
						// The int handle column is not among the golden columns.
						if d.String() != g.Handle {
							t.Errorf("handle column %d %q: %s, want %s", ci.ID, ci.Name.O, d, g.Handle)
						}
						continue
					}
					got, want := goldenText(t, g.Loc, ci.FieldType.GetType(), d, gc)
					if got != want {
						t.Errorf("column %d %q: %q, want %q", ci.ID, ci.Name.O, got, want)
					}
				}
				checked++
			})
		}
	}
	if checked < 45 {
		t.Fatalf("only %d golden row variants checked", checked)
	}
}

// Rule MT16: with VerifyChecksum, TiDB's checksummed rows (int and common
// handles) pass and a flipped bit in the row, the tail or the key fails.
func TestGoldenChecksumVerify(t *testing.T) {
	tables := map[string]*model.TableInfo{}
	for _, r := range golden.OfKind(t, goldenFile, "model_table_info") {
		var rec struct {
			JSON json.RawMessage `json:"json"`
		}
		r.Decode(t, &rec)
		ti, err := model.ParseTableInfo(rec.JSON)
		if err != nil {
			t.Fatal(err)
		}
		tables[r.Name] = ti
	}
	m := New(Config{VerifyChecksum: true})
	n := 0
	for _, r := range golden.OfKind(t, goldenFile, "row") {
		var g struct {
			Name   string `json:"name"`
			Table  string `json:"table"`
			KeyHex string `json:"key_hex"`
			V2Sum  string `json:"value_v2_checksum_hex"`
		}
		r.Decode(t, &g)
		ti := tables[g.Table]
		if ti == nil {
			continue
		}
		key, val := unhex(t, g.KeyHex), unhex(t, g.V2Sum)
		var rc RowChange
		for _, e := range []*kvevent.RawKVEntry{
			{OpType: kvevent.OpTypePut, Key: key, Value: val},
			{OpType: kvevent.OpTypePut, Key: key, Value: val, OldValue: val},
			{OpType: kvevent.OpTypeDelete, Key: key, OldValue: val},
		} {
			if err := m.Decode(e, ti, &rc); err != nil {
				t.Fatalf("%s: %v", g.Name, err)
			}
		}
		bad := append([]byte(nil), val...)
		bad[len(bad)-1] ^= 1
		if err := m.Decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: bad}, ti, &rc); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("%s: corrupt tail: %v", g.Name, err)
		}
		if err := m.Decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypeDelete, Key: key, OldValue: bad}, ti, &rc); err == nil {
			t.Fatalf("%s: corrupt old value accepted", g.Name)
		}
		// Same bytes under another handle of the same table.
		other := append([]byte(nil), key...)
		other[len(other)-1] ^= 1
		if err := m.Decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: other, Value: val}, ti, &rc); err == nil {
			t.Fatalf("%s: row verified under another key", g.Name)
		}
		// Without the option the tail is not checked.
		if err := New(Config{}).Decode(&kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: bad}, ti, &rc); err != nil {
			t.Fatalf("%s: unverified decode: %v", g.Name, err)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d checksummed rows", n)
	}
}
