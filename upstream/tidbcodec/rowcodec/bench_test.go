package rowcodec

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

type benchRow struct {
	Name         string      `json:"name"`
	SingleColumn json.Number `json:"single_column_id"`
	ValueHex     string      `json:"value_v2_hex"`
	KeyHex       string      `json:"key_hex"`
	Columns      []struct {
		ColID     int64           `json:"col_id"`
		FieldType types.FieldType `json:"field_type_json"`
		ValueText *string         `json:"value_text"`
		IsHandle  bool            `json:"is_int_handle"`
	} `json:"columns"`
}

func loadBenchRow(tb testing.TB, name string) (row []byte, stored []Column, single Column) {
	for _, r := range golden.OfKind(tb, "reference/bench-rows.jsonl", "bench_row") {
		var br benchRow
		r.Decode(tb, &br)
		if br.Name != name {
			continue
		}
		row = unhex(tb, br.ValueHex)
		sid, err := strconv.ParseInt(br.SingleColumn.String(), 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range br.Columns {
			col := NewColumn(c.ColID, &c.FieldType)
			if c.ColID == sid {
				single = col
			}
			if !c.IsHandle {
				stored = append(stored, col)
			}
		}
		stored, _ = sortedColumns(stored)
		return row, stored, single
	}
	tb.Fatalf("bench row %q not found", name)
	return nil, nil, Column{}
}

// TestBenchRowsDecode pins that the benchmark rows decode to the values
// TiDB encoded (so the benchmarks measure correct work).
func TestBenchRowsDecode(t *testing.T) {
	for _, r := range golden.OfKind(t, "reference/bench-rows.jsonl", "bench_row") {
		var br benchRow
		r.Decode(t, &br)
		var v RowView
		if err := v.Reset(unhex(t, br.ValueHex)); err != nil {
			t.Fatalf("%s: %v", br.Name, err)
		}
		for _, c := range br.Columns {
			col := NewColumn(c.ColID, &c.FieldType)
			d, found, err := v.Column(&col)
			if err != nil {
				t.Fatalf("%s column %d: %v", br.Name, c.ColID, err)
			}
			if c.IsHandle {
				if found {
					t.Fatalf("%s: int handle column %d stored in the row", br.Name, c.ColID)
				}
				continue
			}
			want := "NULL"
			if c.ValueText != nil {
				want = *c.ValueText
			}
			got := d.String()
			switch d.Kind() {
			case value.KindBytes:
				// The file holds binary values as JSON text (Go's encoder
				// turns each invalid UTF-8 byte into U+FFFD).
				got = jsonText(d.GetBytes())
			case value.KindFloat64, value.KindFloat32:
				if f, err := strconv.ParseFloat(want, 64); err == nil && f == d.GetFloat64() {
					got = want
				}
			}
			if !found || got != want {
				t.Errorf("%s column %d: found=%v got %q want %q", br.Name, c.ColID, found, d.String(), want)
			}
		}
	}
}

func benchFull(b *testing.B, name string) {
	row, cols, _ := loadBenchRow(b, name)
	out := make([]value.Datum, len(cols))
	states := make([]CellState, len(cols))
	var v RowView
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := startCPU(b)
	for i := 0; i < b.N; i++ {
		if err := v.Reset(row); err != nil {
			b.Fatal(err)
		}
		if err := v.DecodeColumns(cols, out, states); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// startCPU pins the benchmark goroutine to its thread and returns the
// thread's CPU time; reportCPU reports the CPU nanoseconds per op.
func startCPU(b *testing.B) int64 {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	return threadCPUNanos()
}

func reportCPU(b *testing.B, cpu0 int64) {
	if cpu0 < 0 {
		return
	}
	if cpu1 := threadCPUNanos(); cpu1 >= 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

func benchSingle(b *testing.B, name string) {
	row, _, single := loadBenchRow(b, name)
	var v RowView
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := startCPU(b)
	for i := 0; i < b.N; i++ {
		if err := v.Reset(row); err != nil {
			b.Fatal(err)
		}
		if _, _, err := v.Column(&single); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkRow10FullDecode(b *testing.B)   { benchFull(b, "row10") }
func BenchmarkRow44FullDecode(b *testing.B)   { benchFull(b, "row44") }
func BenchmarkRow10SingleColumn(b *testing.B) { benchSingle(b, "row10") }
func BenchmarkRow44SingleColumn(b *testing.B) { benchSingle(b, "row44") }

func jsonText(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// BenchmarkRow44EncodeV2 re-encodes the row44 datums with a reused Encoder
// (the fake upstream's write path).
func BenchmarkRow44EncodeV2(b *testing.B) {
	row, cols, _ := loadBenchRow(b, "row44")
	var v RowView
	if err := v.Reset(row); err != nil {
		b.Fatal(err)
	}
	ds := make([]value.Datum, len(cols))
	st := make([]CellState, len(cols))
	if err := v.DecodeColumns(cols, ds, st); err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, len(cols))
	for i := range cols {
		ids[i] = cols[i].ID
	}
	var enc Encoder
	buf := make([]byte, 0, 2*len(row))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := startCPU(b)
	for i := 0; i < b.N; i++ {
		out, err := enc.EncodeV2(buf[:0], ids, ds, nil)
		if err != nil || len(out) != len(row) {
			b.Fatalf("%v %d", err, len(out))
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
