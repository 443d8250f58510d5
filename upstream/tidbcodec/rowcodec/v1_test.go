package rowcodec

import (
	"encoding/binary"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Rule R14: v1 values in their alternative (fixed-width, other-signedness)
// datum forms decode for the column; R1: "00" is the empty row.
func TestV1AlternativeForms(t *testing.T) {
	be := func(flag byte, u uint64) []byte {
		return []byte{flag, byte(u >> 56), byte(u >> 48), byte(u >> 40), byte(u >> 32), byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}
	}
	unsigned := func(ft *types.FieldType) { ft.AddFlag(mysql.UnsignedFlag) }
	cases := []struct {
		name  string
		col   Column
		datum []byte
		want  string
	}{
		{"int as comparable int", colOf(1, mysql.TypeLong), be(0x03, uint64(5)^1<<63), "5"},
		{"signed from uvarint", colOf(1, mysql.TypeLong), []byte{0x09, 0x07}, "7"},
		{"unsigned from varint", colOf(1, mysql.TypeLong, unsigned), []byte{0x08, 0x0e}, "7"},
		{"unsigned from comparable uint", colOf(1, mysql.TypeLonglong, unsigned), be(0x04, 1<<63), "9223372036854775808"},
		{"datetime as fixed uint", colOf(1, mysql.TypeDatetime), be(0x04, 1840446893366133311>>24<<24), "2011-11-10 11:11:11"},
		{"time as duration flag", colOf(1, mysql.TypeDuration), be(0x07, uint64(14400000000000)^1<<63), "04:00:00"},
		{"time as varint", colOf(1, mysql.TypeDuration), binary.AppendVarint([]byte{0x08}, 14400000000000), "04:00:00"},
		{"enum as uvarint", colOf(1, mysql.TypeEnum, func(ft *types.FieldType) { ft.SetElems([]string{"a", "b"}) }), []byte{0x09, 0x02}, "b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := append([]byte{0x08, 0x02}, c.datum...)
			var v RowView
			if err := v.Reset(row); err != nil {
				t.Fatal(err)
			}
			d, found, err := v.Column(&c.col)
			if err != nil || !found || d.String() != c.want {
				t.Fatalf("got %v found=%v err=%v, want %s", d, found, err, c.want)
			}
		})
	}
	var v RowView
	if err := v.Reset([]byte{0x00}); err != nil || v.NumStored() != 0 || v.Format() != FormatV1 {
		t.Fatalf("empty v1 row: %v %d", err, v.NumStored())
	}
	c := colOf(1, mysql.TypeLong)
	if _, found, err := v.Column(&c); found || err != nil {
		t.Fatalf("column in empty row: %v %v", found, err)
	}
	// Negative into an unsigned column is an error.
	if err := v.Reset([]byte{0x08, 0x02, 0x08, 0x01}); err != nil {
		t.Fatal(err)
	}
	u := colOf(1, mysql.TypeLong, unsigned)
	if _, _, err := v.Column(&u); err == nil {
		t.Fatal("negative value accepted for an unsigned column")
	}
}

// Rule R16: lazy access to fixed-size kinds and the full walk over the
// benchmark rows do not allocate; a reused view re-indexes v1 rows without
// allocating.
func TestNoAllocs(t *testing.T) {
	row, cols, single := loadBenchRow(t, "row10")
	var v RowView
	out := make([]value.Datum, len(cols))
	st := make([]CellState, len(cols))
	if n := testing.AllocsPerRun(100, func() {
		_ = v.Reset(row)
		_, _, _ = v.Column(&single)
	}); n != 0 {
		t.Fatalf("lazy single column: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		_ = v.Reset(row)
		_ = v.DecodeColumns(cols, out, st)
	}); n != 0 {
		t.Fatalf("full decode: %v allocs", n)
	}
	ids := []int64{3, 1, 2}
	v1, err := EncodeV1(nil, ids, []value.Datum{value.NewIntDatum(1), value.NewStringDatum("x"), value.NewFloat64Datum(2)})
	if err != nil {
		t.Fatal(err)
	}
	c := colOf(3, mysql.TypeLong)
	_ = v.Reset(v1)
	if n := testing.AllocsPerRun(100, func() {
		_ = v.Reset(v1)
		_, _, _ = v.Column(&c)
	}); n != 0 {
		t.Fatalf("v1 reuse: %v allocs", n)
	}
	var enc Encoder
	ds := []value.Datum{value.NewIntDatum(1), value.NewStringDatum("x"), value.NewFloat64Datum(2)}
	buf := make([]byte, 0, 256)
	_, _ = enc.EncodeV2(buf, ids, ds, nil)
	if n := testing.AllocsPerRun(100, func() {
		_, _ = enc.EncodeV2(buf[:0], ids, ds, nil)
	}); n != 0 {
		t.Fatalf("reused encoder: %v allocs", n)
	}
}
