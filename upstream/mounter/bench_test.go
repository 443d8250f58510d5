package mounter

import (
	"encoding/json"
	"runtime"
	"strconv"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

// benchTable builds the bench-rows schema (int handle + stored columns) and
// the entry TiDB wrote for it.
func benchTable(tb testing.TB, name string) (*model.TableInfo, *kvevent.RawKVEntry) {
	for _, r := range golden.OfKind(tb, "reference/bench-rows.jsonl", "bench_row") {
		var br struct {
			Name     string      `json:"name"`
			TableID  json.Number `json:"table_id"`
			KeyHex   string      `json:"key_hex"`
			ValueHex string      `json:"value_v2_hex"`
			Columns  []struct {
				ColID     json.Number     `json:"col_id"`
				FieldType types.FieldType `json:"field_type_json"`
				IsHandle  bool            `json:"is_int_handle"`
			} `json:"columns"`
		}
		r.Decode(tb, &br)
		if br.Name != name {
			continue
		}
		id, _ := strconv.ParseInt(br.TableID.String(), 10, 64)
		ti := &model.TableInfo{ID: id, Name: model.NewCIStr(name), State: model.StatePublic}
		for i, c := range br.Columns {
			cid, _ := strconv.ParseInt(c.ColID.String(), 10, 64)
			ci := &model.ColumnInfo{ID: cid, Name: model.NewCIStr("c" + c.ColID.String()), Offset: i, State: model.StatePublic, FieldType: c.FieldType}
			if c.IsHandle {
				ti.PKIsHandle = true
				ci.FieldType.AddFlag(mysql.PriKeyFlag)
			}
			ti.Columns = append(ti.Columns, ci)
		}
		return ti, &kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: unhex(tb, br.KeyHex), Value: unhex(tb, br.ValueHex)}
	}
	tb.Fatalf("bench row %s not found", name)
	return nil, nil
}

// TestBenchRowsThroughMounter checks the benchmark workload decodes (handle
// included) and that the mounter's per-row path stays within one
// allocation (rule MT14).
func TestBenchRowsThroughMounter(t *testing.T) {
	for _, name := range []string{"row10", "row44"} {
		ti, e := benchTable(t, name)
		m := New(Config{})
		var rc RowChange
		if err := m.Decode(e, ti, &rc); err != nil {
			t.Fatal(err)
		}
		if got := colText(t, rc.Row, 1); got != "123456789" {
			t.Fatalf("%s handle %q", name, got)
		}
		dst, err := rc.Row.Datums(nil)
		if err != nil || len(dst) != len(ti.Columns) {
			t.Fatalf("%s Datums: %v", name, err)
		}
		n := testing.AllocsPerRun(200, func() {
			if err := m.Decode(e, ti, &rc); err != nil {
				t.Fatal(err)
			}
			if dst, err = rc.Row.Datums(dst); err != nil {
				t.Fatal(err)
			}
		})
		if n > 1 {
			t.Fatalf("%s: %v allocs per row through the mounter, want <= 1", name, n)
		}
	}
}

func benchMounter(b *testing.B, name string, full bool) {
	ti, e := benchTable(b, name)
	m := New(Config{RequireOldValue: true})
	var rc RowChange
	var dst []value.Datum
	b.ReportAllocs()
	b.ResetTimer()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPUNanos()
	for i := 0; i < b.N; i++ {
		if err := m.Decode(e, ti, &rc); err != nil {
			b.Fatal(err)
		}
		if full {
			var err error
			if dst, err = rc.Row.Datums(dst); err != nil {
				b.Fatal(err)
			}
		}
	}
	if cpu1 := threadCPUNanos(); cpu0 >= 0 && cpu1 >= 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// Decode alone: classification, key and handle, header parse, key copy —
// the mounter's overhead on top of the row decode.
func BenchmarkMounterOverheadRow10(b *testing.B) { benchMounter(b, "row10", false) }
func BenchmarkMounterOverheadRow44(b *testing.B) { benchMounter(b, "row44", false) }

// Decode plus every column (handle included) into reused datums.
func BenchmarkMounterFullRow10(b *testing.B) { benchMounter(b, "row10", true) }
func BenchmarkMounterFullRow44(b *testing.B) { benchMounter(b, "row44", true) }
