package rowcodec

import (
	"encoding/binary"

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
// included, as it appears in a row value.
func peekDatum(b []byte) (int, error) {
	switch b[0] {
	case flagNil:
		return 1, nil
	case flagInt, flagUint, flagFloat, flagDuration:
		if len(b) < 9 {
			return 0, errf("truncated %s datum: need 9 bytes, have %d", flagName(b[0]), len(b))
		}
		return 9, nil
	case flagVarint, flagUvarint:
		for i := 1; i < len(b) && i <= binary.MaxVarintLen64; i++ {
			if b[i] < 0x80 {
				return i + 1, nil
			}
		}
		return 0, errf("unterminated %s datum", flagName(b[0]))
	case flagCompactBytes:
		l, n := binary.Varint(b[1:])
		if n <= 0 {
			return 0, errf("bad compact-bytes length varint")
		}
		if l < 0 || l > int64(len(b)-1-n) {
			return 0, errf("compact bytes of length %d exceed the %d bytes left", l, len(b)-1-n)
		}
		return 1 + n + int(l), nil
	case flagDecimal:
		if len(b) < 3 {
			return 0, errf("truncated decimal datum header")
		}
		size, err := value.DecimalBinSize(int(b[1]), int(b[2]))
		if err != nil {
			return 0, errf("decimal datum: %v", err)
		}
		return 3 + size, nil
	case flagJSON:
		n, err := jsonSize(b[1:])
		if err != nil {
			return 0, err
		}
		return 1 + n, nil
	case flagVectorF32:
		if len(b) < 5 {
			return 0, errf("truncated vector datum header")
		}
		cnt := uint64(binary.LittleEndian.Uint32(b[1:]))
		return int(5 + 4*cnt), nil
	case flagBytes:
		return 0, errf("memcomparable bytes (flag 1) are a key form, not valid in a row value")
	}
	return 0, errf("unknown datum flag %d", b[0])
}

// jsonSize returns the length of a typed binary JSON value (type code +
// value) at the start of b, using only its top-level header.
func jsonSize(b []byte) (int, error) {
	if len(b) < 1 {
		return 0, errf("truncated JSON: missing type code")
	}
	switch b[0] {
	case 0x04: // literal
		return 2, nil
	case 0x09, 0x0a, 0x0b, 0x0e, 0x0f, 0x10: // int64, uint64, float64, date, datetime, timestamp
		return 9, nil
	case 0x11: // duration: ns + fsp
		return 13, nil
	case 0x0c: // string: uvarint length + bytes
		l, n := binary.Uvarint(b[1:])
		if n <= 0 {
			return 0, errf("bad JSON string length")
		}
		if l > uint64(len(b)-1-n) {
			return 0, errf("JSON string of %d bytes exceeds the %d bytes left", l, len(b)-1-n)
		}
		return 1 + n + int(l), nil
	case 0x0d: // opaque: type byte + uvarint length + bytes
		if len(b) < 2 {
			return 0, errf("truncated JSON opaque")
		}
		l, n := binary.Uvarint(b[2:])
		if n <= 0 {
			return 0, errf("bad JSON opaque length")
		}
		if l > uint64(len(b)-2-n) {
			return 0, errf("JSON opaque of %d bytes exceeds the %d bytes left", l, len(b)-2-n)
		}
		return 2 + n + int(l), nil
	case 0x01, 0x03: // object, array: uint32 count, uint32 total size
		if len(b) < 9 {
			return 0, errf("truncated JSON container header")
		}
		return 1 + int(binary.LittleEndian.Uint32(b[5:])), nil
	}
	return 0, errf("unknown JSON type code 0x%02x", b[0])
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
