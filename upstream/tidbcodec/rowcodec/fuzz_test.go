package rowcodec

import (
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// exercise runs every read path on row; none may panic, whatever the bytes.
func exercise(cols []Column, sorted []Column, row []byte) {
	var v RowView
	if err := v.Reset(row); err != nil {
		return
	}
	_, _ = v.Checksum()
	_ = v.VerifyChecksum([]byte{1, 2, 3})
	var buf []byte
	for i := range cols {
		d, _, err := v.Column(&cols[i])
		if err == nil {
			buf, _ = d.AppendText(buf[:0])
		}
	}
	out := make([]value.Datum, len(sorted))
	st := make([]CellState, len(sorted))
	if err := v.DecodeColumns(sorted, out, st); err == nil {
		for i := range out {
			buf, _ = out[i].AppendText(buf[:0])
		}
	}
}

// FuzzRowV2 (rules R2-R9): arbitrary bytes after the v2 version byte.
func FuzzRowV2(f *testing.F) {
	for _, g := range loadGoldenRowsF(f) {
		for _, h := range []string{g.V2Hex, g.V2AllHex, g.V2ChecksumHex} {
			f.Add(unhex(f, h)[1:])
		}
	}
	cols := fuzzColumnsF(f)
	sorted, _ := sortedColumns(cols)
	f.Fuzz(func(t *testing.T, body []byte) {
		exercise(cols, sorted, append([]byte{CodecVerV2}, body...))
	})
}

// FuzzRowV1 (rules R2, R14): arbitrary v1 rows.
func FuzzRowV1(f *testing.F) {
	for _, g := range loadGoldenRowsF(f) {
		for _, h := range []string{g.V1Hex, g.V1AllHex} {
			f.Add(unhex(f, h))
		}
	}
	cols := fuzzColumnsF(f)
	sorted, _ := sortedColumns(cols)
	f.Fuzz(func(t *testing.T, row []byte) {
		if len(row) > 0 && row[0] == CodecVerV2 {
			row = row[1:]
		}
		exercise(cols, sorted, row)
	})
}

func loadGoldenRowsF(f *testing.F) []goldenRow {
	var rows []goldenRow
	for _, r := range goldenRecords(f) {
		var g goldenRow
		r.Decode(f, &g)
		rows = append(rows, g)
	}
	return rows
}

func fuzzColumnsF(f *testing.F) []Column {
	rows := loadGoldenRowsF(f)
	var cols []Column
	for i := range rows[0].Columns {
		c := &rows[0].Columns[i]
		cols = append(cols, NewColumn(c.ColID, &c.FieldType))
	}
	return append(cols, NewColumn(256, types.NewFieldType(mysql.TypeLonglong)), NewColumn(70000, types.NewFieldType(mysql.TypeVarchar)))
}

// FuzzDecodeCell (rule R15): the exported single-datum decoder never panics,
// whatever the bytes and column.
func FuzzDecodeCell(f *testing.F) {
	f.Add(byte(6), []byte{0x06})
	f.Add(byte(3), []byte{0x03, 0x80})
	f.Add(byte(1), []byte{0x0a, 0x04})
	cols := fuzzColumnsF(f)
	f.Fuzz(func(t *testing.T, which byte, cell []byte) {
		c := &cols[int(which)%len(cols)]
		for _, fm := range []Format{FormatV1, FormatV2, FormatKeyDatum} {
			if d, err := DecodeCell(fm, cell, c, 0); err == nil {
				_, _ = d.AppendText(nil)
			}
		}
	})
}
