package rowcodec

import (
	"errors"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

func colOf(id int64, tp byte, mod ...func(*types.FieldType)) Column {
	ft := types.NewFieldType(tp)
	for _, m := range mod {
		m(ft)
	}
	return NewColumn(id, ft)
}

// small builds a small-layout v2 row with the given not-null cells.
func small(ids []byte, cells ...[]byte) []byte {
	row := []byte{0x80, 0, byte(len(cells)), 0, byte(len(ids) - len(cells)), 0}
	row = append(row, ids...)
	end := 0
	for _, c := range cells {
		end += len(c)
		row = append(row, byte(end), byte(end>>8))
	}
	for _, c := range cells {
		row = append(row, c...)
	}
	return row
}

// Rules R2, R3: layout errors are reported at Reset with the offset.
func TestResetErrors(t *testing.T) {
	cases := []struct {
		name string
		row  []byte
		off  int
		want string
	}{
		{"empty", nil, 0, "empty row value"},
		{"short header", []byte{0x80, 0, 1}, 3, "truncated header"},
		{"unknown flag", []byte{0x80, 0x10, 0, 0, 0, 0}, 1, "unknown flag bits"},
		{"ids truncated", []byte{0x80, 0, 3, 0, 0, 0, 1}, 7, "truncated"},
		{"data beyond end", []byte{0x80, 0, 1, 0, 0, 0, 1, 9, 0, 1}, 9, "exceeds"},
		{"trailing bytes", append(small([]byte{1}, []byte{5}), 0), 10, "trailing bytes"},
		{"checksum missing", []byte{0x80, 0x02, 0, 0, 0, 0}, 6, "checksum tail is missing"},
		{"checksum short", []byte{0x80, 0x02, 0, 0, 0, 0, 0x02, 1, 2}, 6, "checksum tail is 3 bytes"},
		{"checksum extra short", []byte{0x80, 0x02, 0, 0, 0, 0, 0x0a, 1, 2, 3, 4}, 6, "header 0x0a says 9"},
		{"checksum unknown version", []byte{0x80, 0x02, 0, 0, 0, 0, 0x05, 1, 2, 3, 4}, 6, "unknown checksum header"},
		{"large truncated", []byte{0x80, 0x01, 1, 0, 0, 0, 1, 0, 0}, 9, "truncated"},
		{"v1 bad id flag", []byte{0x02, 0x02, 0x61}, 0, "column id must be an int datum"},
		{"v1 id without value", []byte{0x08, 0x02}, 2, "without a value"},
		{"v1 truncated value", []byte{0x08, 0x02, 0x03, 1, 2}, 2, "needs 8 payload bytes"},
		{"v1 unterminated varint id", []byte{0x08, 0x82}, 0, "bad varint"},
		{"v1 duplicate id", []byte{0x08, 0x02, 0x08, 0x02, 0x08, 0x02, 0x08, 0x04}, 6, "appears twice"},
		{"v1 unknown flag", []byte{0x08, 0x02, 0x63}, 2, "unknown flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v RowView
			err := v.Reset(c.row)
			var de *DecodeError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want DecodeError containing %q", err, c.want)
			}
			if de.Offset != c.off {
				t.Fatalf("offset %d, want %d (%v)", de.Offset, c.off, err)
			}
			if !errors.Is(err, ErrBadRow) {
				t.Fatal("not ErrBadRow")
			}
			if v.Format() != FormatUnknown {
				t.Fatal("view not emptied after a failed Reset")
			}
			if _, _, _, err := v.Find(1); err == nil {
				t.Fatal("Find on a failed view succeeded")
			}
		})
	}
}

// Rules R5-R9: cell values that do not fit their column are errors naming
// the column id and the cell offset.
func TestCellErrors(t *testing.T) {
	unsigned := func(ft *types.FieldType) { ft.AddFlag(mysql.UnsignedFlag) }
	withElems := func(e ...string) func(*types.FieldType) { return func(ft *types.FieldType) { ft.SetElems(e) } }
	flen := func(n int) func(*types.FieldType) { return func(ft *types.FieldType) { ft.SetFlen(n) } }
	packed := func(y, mo, d, h, mi, s, us uint64) []byte {
		p := ((((y*13+mo)<<5|d)<<17 | h<<12 | mi<<6 | s) << 24) | us
		return []byte{byte(p), byte(p >> 8), byte(p >> 16), byte(p >> 24), byte(p >> 32), byte(p >> 40), byte(p >> 48), byte(p >> 56)}
	}
	cases := []struct {
		name string
		col  Column
		cell []byte
		want string
	}{
		{"int 3 bytes", colOf(7, mysql.TypeLong), []byte{1, 2, 3}, "integer cell of 3 bytes"},
		{"tinyint out of range", colOf(7, mysql.TypeTiny), []byte{0x2c, 0x01}, "out of range [-128, 127]"},
		{"unsigned tinyint out of range", colOf(7, mysql.TypeTiny, unsigned), []byte{0x2c, 0x01}, "out of range [0, 255]"},
		{"int24 out of range", colOf(7, mysql.TypeInt24), []byte{0, 0, 0, 1}, "out of range"},
		{"year out of range", colOf(7, mysql.TypeYear), []byte{0x6c, 0x07}, "YEAR value 1900"},
		{"float 4 bytes", colOf(7, mysql.TypeDouble), []byte{1, 2, 3, 4}, "float cell of 4 bytes"},
		{"float NaN", colOf(7, mysql.TypeDouble), []byte{0xff, 0xf8, 0, 0, 0, 0, 0, 1}, "not storable"},
		{"float32 overflow", colOf(7, mysql.TypeFloat), []byte{0xc7, 0xf0, 0, 0, 0, 0, 0, 0}, "FLOAT range"},
		{"decimal no header", colOf(7, mysql.TypeNewDecimal), []byte{5}, "shorter than its precision/frac"},
		{"decimal bad shape", colOf(7, mysql.TypeNewDecimal), []byte{70, 2, 0x80}, "precision 70"},
		{"decimal bad size", colOf(7, mysql.TypeNewDecimal), []byte{5, 2, 0x80, 0}, "bin is 2 bytes, want 3"},
		{"datetime hour 25", colOf(7, mysql.TypeDatetime), packed(2020, 1, 1, 25, 0, 0, 0), "hour 25"},
		{"datetime micro", colOf(7, mysql.TypeDatetime), packed(2020, 1, 1, 1, 0, 0, 1000000), "microsecond"},
		{"date with time", colOf(7, mysql.TypeDate), packed(2020, 1, 1, 1, 0, 0, 0), "time-of-day part"},
		{"time 3 bytes", colOf(7, mysql.TypeDatetime), []byte{1, 2, 3}, "cell of 3 bytes"},
		{"duration out of range", colOf(7, mysql.TypeDuration), []byte{0, 0, 0, 0, 0, 0, 0, 0x10}, "outside ±838:59:59"},
		{"enum beyond", colOf(7, mysql.TypeEnum, withElems("a", "b")), []byte{3}, "ENUM index 3 beyond its 2 members"},
		{"set beyond", colOf(7, mysql.TypeSet, withElems("a", "b")), []byte{4}, "SET bitmask 0x4"},
		{"bit too wide", colOf(7, mysql.TypeBit, flen(4)), []byte{0x10}, "does not fit BIT(4)"},
		{"json bad code", colOf(7, mysql.TypeJSON), []byte{0x99}, "unknown type code"},
		{"json trailing", colOf(7, mysql.TypeJSON), []byte{0x04, 0x01, 0x00}, "header says 2"},
		{"vector short", colOf(7, mysql.TypeTiDBVectorFloat32), []byte{1, 0}, "shorter than its count"},
		{"vector count", colOf(7, mysql.TypeTiDBVectorFloat32), []byte{2, 0, 0, 0, 1, 2, 3, 4}, "needs 12 bytes"},
		{"unsupported type", colOf(7, mysql.TypeGeometry), []byte{1}, "not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := small([]byte{3, 7}, []byte{1, 2}, c.cell)
			var v RowView
			if err := v.Reset(row); err != nil {
				t.Fatal(err)
			}
			_, _, err := v.Column(&c.col)
			var de *DecodeError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want containing %q", err, c.want)
			}
			if de.ColumnID != 7 || de.Offset != 6+2+4+2 {
				t.Fatalf("column %d offset %d, want 7 and %d: %v", de.ColumnID, de.Offset, 6+2+4+2, err)
			}
			// The full walk reports the same error.
			out := make([]value.Datum, 1)
			st := make([]CellState, 1)
			if err2 := v.DecodeColumns([]Column{c.col}, out, st); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("DecodeColumns: %v, Column: %v", err2, err)
			}
		})
	}
}

// Rule R3: cell offsets that run backwards and ids out of order are errors.
func TestLayoutCorruption(t *testing.T) {
	c1, c2 := colOf(1, mysql.TypeLong), colOf(2, mysql.TypeLong)
	// offsets 4 then 2: cell 2 spans [4, 2).
	row := []byte{0x80, 0, 2, 0, 0, 0, 1, 2, 4, 0, 2, 0, 1, 0}
	var v RowView
	if err := v.Reset(row); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Column{c1, c2} {
		if _, _, err := v.Column(&c); err == nil || !strings.Contains(err.Error(), "outside") {
			t.Fatalf("backwards offsets, column %d: %v", c.ID, err)
		}
	}
	// ids 2, 1.
	row = small([]byte{2, 1}, []byte{1}, []byte{2})
	if err := v.Reset(row); err != nil {
		t.Fatal(err)
	}
	err := v.DecodeColumns([]Column{c1, c2}, make([]value.Datum, 2), make([]CellState, 2))
	if err == nil || !strings.Contains(err.Error(), "not strictly ascending") {
		t.Fatalf("unsorted ids: %v", err)
	}
	// v1: a datum flag that does not fit the column.
	if err := v.Reset([]byte{0x08, 0x02, 0x05, 0x80, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Column(&c1); err == nil || !strings.Contains(err.Error(), "datum flag 5 does not fit") {
		t.Fatalf("v1 flag mismatch: %v", err)
	}
}
