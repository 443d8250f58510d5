package rowcodec

import (
	"encoding/binary"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Datum flags that can appear in a v1 row value (tidb-data-formats §1.1).
const (
	flagNil          byte = 0
	flagBytes        byte = 1
	flagCompactBytes byte = 2
	flagInt          byte = 3
	flagUint         byte = 4
	flagFloat        byte = 5
	flagDecimal      byte = 6
	flagDuration     byte = 7
	flagVarint       byte = 8
	flagUvarint      byte = 9
	flagJSON         byte = 10
	flagVectorF32    byte = 20
)

// resetV1 indexes the (column id, value) pairs of a v1 row. A lone NilFlag
// byte is the empty row.
func (v *RowView) resetV1() error {
	row := v.row
	if len(row) == 1 && row[0] == flagNil {
		return nil
	}
	off := 0
	for off < len(row) {
		idOff := off
		var id int64
		switch row[off] {
		case flagVarint:
			x, n := binary.Varint(row[off+1:])
			if n <= 0 {
				return headerErr(FormatV1, idOff, "bad varint column id")
			}
			id, off = x, off+1+n
		case flagInt:
			if len(row)-off < 9 {
				return headerErr(FormatV1, idOff, "truncated column id: need 9 bytes, have %d", len(row)-off)
			}
			id, off = int64(binary.BigEndian.Uint64(row[off+1:])^(1<<63)), off+9
		default:
			return headerErr(FormatV1, idOff, "column id must be an int datum (flag 8 or 3), found flag %d", row[off])
		}
		if off >= len(row) {
			return colErr(FormatV1, id, off, "truncated: column id without a value")
		}
		n, err := peekDatum(row[off:])
		if err != nil {
			return colErr(FormatV1, id, off, "%v", err)
		}
		if int64(off)+int64(n) > int64(len(row)) || len(row) > 1<<31-1 {
			return colErr(FormatV1, id, off, "value datum of %d bytes exceeds the %d bytes left", n, len(row)-off)
		}
		v.v1 = append(v.v1, v1Entry{id: id, start: int32(off), end: int32(off + n)})
		off += n
	}
	// TiDB writes v1 pairs in column offset order; sort by id for lookup.
	e := v.v1
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && e[j].id < e[j-1].id; j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
	for i := 1; i < len(e); i++ {
		if e[i].id == e[i-1].id {
			return colErr(FormatV1, e[i].id, int(e[i].start), "column id appears twice")
		}
	}
	return nil
}

// peekDatum returns the encoded length of the datum at the start of b, flag
// included (the datum codec's peek rule).
func peekDatum(b []byte) (int, error) {
	return codec.PeekLength(b)
}

// jsonSize returns the length of a typed binary JSON value (type code +
// value) at the start of b, using only its top-level header.
func jsonSize(b []byte) (int, error) {
	if len(b) < 1 {
		return 0, errf("truncated JSON: missing type code")
	}
	n, err := value.JSONValueLen(b[0], b[1:])
	if err != nil {
		return 0, err
	}
	return 1 + n, nil
}

func flagName(f byte) string {
	switch f {
	case flagInt:
		return "int"
	case flagUint:
		return "uint"
	case flagFloat:
		return "float"
	case flagDuration:
		return "duration"
	case flagVarint:
		return "varint"
	case flagUvarint:
		return "uvarint"
	}
	return "datum"
}
