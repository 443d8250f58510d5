package rowcodec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Column decodes column c from the row: NULL when the row stores NULL, and
// found=false (with a NULL datum) when the row does not mention the column.
func (v *RowView) Column(c *Column) (d value.Datum, found bool, err error) {
	if v.format == FormatV2 && !v.large && uint64(c.ID) <= 255 {
		// Fast path for the common small layout.
		row := v.row
		nn := v.nNotNull
		if i := searchSmall(row[headerSize:headerSize+nn], byte(c.ID), 0); i >= 0 {
			start := 0
			if i > 0 {
				start = int(binary.LittleEndian.Uint16(row[v.offsOff+2*i-2:]))
			}
			end := int(binary.LittleEndian.Uint16(row[v.offsOff+2*i:]))
			if start > end || end > v.dataEnd-v.dataOff {
				_, _, err := v.cellV2(i, c.ID)
				return value.Datum{}, false, err
			}
			err = decodeCellV2Into(&d, row[v.dataOff+start:v.dataOff+end], c, v.dataOff+start)
			return d, true, err
		}
		if v.nNull > 0 && searchSmall(row[headerSize+nn:headerSize+nn+v.nNull], byte(c.ID), 0) >= 0 {
			return value.Datum{}, true, nil
		}
		return value.Datum{}, false, nil
	}
	st, cell, off, err := v.Find(c.ID)
	if err != nil || st == CellAbsent {
		return value.Datum{}, false, err
	}
	if st == CellNull {
		return value.Datum{}, true, nil
	}
	if v.format == FormatV2 {
		d, err = decodeCellV2(cell, c, off)
	} else {
		d, err = decodeDatumV1(cell, c, off)
	}
	return d, true, err
}

// DecodeCell decodes the bytes Find returned for column c in a row of format
// f; off is their offset in the row, used in errors. With FormatKeyDatum it
// decodes one key-form datum (flag byte first, as in a common handle) for
// the column; memcomparable strings (flag 1) must be decoded by the caller,
// which owns a buffer for them.
func DecodeCell(f Format, cell []byte, c *Column, off int) (value.Datum, error) {
	if f == FormatV2 {
		return decodeCellV2(cell, c, off)
	}
	if len(cell) == 0 {
		return value.Datum{}, colErr(f, c.ID, off, "empty datum")
	}
	n, err := peekDatum(cell)
	if err != nil {
		return value.Datum{}, colErr(f, c.ID, off, "%v", err)
	}
	if n != len(cell) {
		return value.Datum{}, colErr(f, c.ID, off, "datum is %d bytes, %d given", n, len(cell))
	}
	return decodeDatum(f, cell, c, off)
}

// cellErr builds the error for a cell that does not fit its column.
func cellErr(f Format, c *Column, off int, format string, args ...any) error {
	return colErr(f, c.ID, off, format, args...)
}

// compactSigned reads a v2 integer cell: 1, 2, 4 or 8 bytes little-endian.
func compactSigned(b []byte) (int64, bool) {
	switch len(b) {
	case 1:
		return int64(int8(b[0])), true
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(b))), true
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(b))), true
	case 8:
		return int64(binary.LittleEndian.Uint64(b)), true
	}
	return 0, false
}

func compactUnsigned(b []byte) (uint64, bool) {
	switch len(b) {
	case 1:
		return uint64(b[0]), true
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), true
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), true
	case 8:
		return binary.LittleEndian.Uint64(b), true
	}
	return 0, false
}

// decodeComparableFloat reverses the comparable float64 encoding.
func decodeComparableFloat(u uint64) float64 {
	if u&(1<<63) != 0 {
		u &^= 1 << 63
	} else {
		u = ^u
	}
	return math.Float64frombits(u)
}

func decodeCellV2(b []byte, c *Column, off int) (value.Datum, error) {
	var d value.Datum
	err := decodeCellV2Into(&d, b, c, off)
	return d, err
}

// decodeCellV2Into decodes a v2 cell straight into *dst (the full walk
// writes each datum once, into the caller's slice). On error *dst is left
// unchanged.
func decodeCellV2Into(dst *value.Datum, b []byte, c *Column, off int) error {
	switch c.cls {
	case clsSigned, clsYear:
		x, ok := compactSigned(b)
		if !ok {
			return cellErr(FormatV2, c, off, "integer cell of %d bytes (want 1, 2, 4 or 8)", len(b))
		}
		if c.cls == clsSigned && x >= c.min && x <= c.max {
			*dst = value.NewIntDatum(x)
			return nil
		}
		d, err := signedDatum(FormatV2, c, off, x)
		return setDatum(dst, d, err)
	case clsUnsigned:
		x, ok := compactUnsigned(b)
		if !ok {
			return cellErr(FormatV2, c, off, "unsigned cell of %d bytes (want 1, 2, 4 or 8)", len(b))
		}
		if x <= c.umax {
			*dst = value.NewUintDatum(x)
			return nil
		}
		d, err := unsignedDatum(FormatV2, c, off, x)
		return setDatum(dst, d, err)
	case clsFloat64:
		if len(b) != 8 {
			return cellErr(FormatV2, c, off, "float cell of %d bytes (want 8)", len(b))
		}
		f := decodeComparableFloat(binary.BigEndian.Uint64(b))
		if math.Float64bits(f)>>52&0x7ff == 0x7ff { // NaN or ±Inf
			d, err := floatDatum(FormatV2, c, off, f)
			return setDatum(dst, d, err)
		}
		*dst = value.NewFloat64Datum(f)
		return nil
	case clsFloat32:
		if len(b) != 8 {
			return cellErr(FormatV2, c, off, "float cell of %d bytes (want 8)", len(b))
		}
		d, err := floatDatum(FormatV2, c, off, decodeComparableFloat(binary.BigEndian.Uint64(b)))
		return setDatum(dst, d, err)
	case clsString:
		*dst = value.NewStringDatumBytes(b)
		return nil
	case clsBytes:
		*dst = value.NewBytesDatum(b)
		return nil
	case clsDecimal:
		if len(b) < 2 {
			return cellErr(FormatV2, c, off, "decimal cell of %d bytes is shorter than its precision/frac header", len(b))
		}
		if b[0] == c.decPrec && b[1] == c.decFrac && len(b)-2 == c.decSize && c.decSize > 0 {
			*dst = value.NewDecimalDatumBin(b[2:], int(b[0]), int(b[1]))
			return nil
		}
		d, err := decimalDatum(FormatV2, c, off, int(b[0]), int(b[1]), b[2:])
		return setDatum(dst, d, err)
	case clsTime, clsEnum, clsSet, clsBit:
		x, ok := compactUnsigned(b)
		if !ok {
			return cellErr(FormatV2, c, off, "%s cell of %d bytes (want 1, 2, 4 or 8)", typeName(c), len(b))
		}
		if c.cls == clsTime && validPackedTime(x) && (c.Tp != mysql.TypeDate || x&(1<<41-1) == 0) {
			*dst = value.NewTimeDatum(x, c.Tp, int(c.fsp))
			return nil
		}
		d, err := uintKindDatum(FormatV2, c, off, x)
		return setDatum(dst, d, err)
	case clsDuration:
		x, ok := compactSigned(b)
		if !ok {
			return cellErr(FormatV2, c, off, "TIME cell of %d bytes (want 1, 2, 4 or 8)", len(b))
		}
		if x <= value.MaxDurationNanos && x >= -value.MaxDurationNanos {
			*dst = value.NewDurationDatum(x, int(c.fsp))
			return nil
		}
		d, err := durationDatum(FormatV2, c, off, x)
		return setDatum(dst, d, err)
	case clsJSON:
		d, err := jsonDatum(FormatV2, c, off, b)
		return setDatum(dst, d, err)
	case clsVector:
		d, err := vectorDatum(FormatV2, c, off, b)
		return setDatum(dst, d, err)
	}
	return cellErr(FormatV2, c, off, "cannot decode: %s", c.invalid)
}

func signedDatum(f Format, c *Column, off int, x int64) (value.Datum, error) {
	if x < c.min || x > c.max {
		return value.Datum{}, cellErr(f, c, off, "value %d out of range [%d, %d] of %s", x, c.min, c.max, typeName(c))
	}
	if c.cls == clsYear {
		if x != 0 && x < 1901 {
			return value.Datum{}, cellErr(f, c, off, "YEAR value %d is neither 0 nor in 1901..2155", x)
		}
		return value.NewYearDatum(x), nil
	}
	return value.NewIntDatum(x), nil
}

func unsignedDatum(f Format, c *Column, off int, x uint64) (value.Datum, error) {
	if x > c.umax {
		return value.Datum{}, cellErr(f, c, off, "value %d out of range [0, %d] of %s", x, c.umax, typeName(c))
	}
	return value.NewUintDatum(x), nil
}

func floatDatum(f Format, c *Column, off int, x float64) (value.Datum, error) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return value.Datum{}, cellErr(f, c, off, "float value %v is not storable", x)
	}
	if c.cls == clsFloat32 {
		if x > math.MaxFloat32 || x < -math.MaxFloat32 {
			return value.Datum{}, cellErr(f, c, off, "value %v out of FLOAT range", x)
		}
		return value.NewFloat32Datum(float32(x)), nil
	}
	return value.NewFloat64Datum(x), nil
}

func decimalDatum(f Format, c *Column, off, prec, frac int, bin []byte) (value.Datum, error) {
	size, err := value.DecimalBinSize(prec, frac)
	if err != nil {
		return value.Datum{}, cellErr(f, c, off, "%v", err)
	}
	if len(bin) != size {
		return value.Datum{}, cellErr(f, c, off, "DECIMAL(%d,%d) bin is %d bytes, want %d", prec, frac, len(bin), size)
	}
	return value.NewDecimalDatumBin(bin, prec, frac), nil
}

// uintKindDatum turns an unsigned payload into the datum of a time, enum,
// set or bit column.
func uintKindDatum(f Format, c *Column, off int, x uint64) (value.Datum, error) {
	switch c.cls {
	case clsTime:
		if !validPackedTime(x) {
			t := value.UnpackTime(x, c.Tp, int(c.fsp))
			err := t.Validate()
			if err == nil {
				err = fmt.Errorf("field out of range")
			}
			return value.Datum{}, cellErr(f, c, off, "packed time %d: %v", x, err)
		}
		if c.Tp == mysql.TypeDate && x&(1<<41-1) != 0 {
			return value.Datum{}, cellErr(f, c, off, "packed DATE %d has a time-of-day part", x)
		}
		return value.NewTimeDatum(x, c.Tp, int(c.fsp)), nil
	case clsEnum:
		if x > uint64(len(c.elems)) {
			return value.Datum{}, cellErr(f, c, off, "ENUM index %d beyond its %d members", x, len(c.elems))
		}
		if x == 0 {
			return value.NewEnumDatum(0, ""), nil
		}
		return value.NewEnumDatum(x, c.elems[x-1]), nil
	case clsSet:
		if n := len(c.elems); n < 64 && x>>uint(n) != 0 {
			return value.Datum{}, cellErr(f, c, off, "SET bitmask 0x%x has bits beyond its %d members", x, n)
		}
		if c.setNames != nil {
			return value.NewSetDatum(x, c.setNames[x]), nil
		}
		return value.NewSetDatum(x, joinSet(c.elems, x)), nil
	case clsBit:
		if c.bitLen < 64 && x>>c.bitLen != 0 {
			return value.Datum{}, cellErr(f, c, off, "value 0x%x does not fit BIT(%d)", x, c.bitLen)
		}
		return value.NewBitDatum(x, int(c.bitWidth)), nil
	}
	return value.Datum{}, cellErr(f, c, off, "internal: %s is not an unsigned-payload type", typeName(c))
}

func durationDatum(f Format, c *Column, off int, ns int64) (value.Datum, error) {
	if ns > value.MaxDurationNanos || ns < -value.MaxDurationNanos {
		return value.Datum{}, cellErr(f, c, off, "TIME value %d ns outside ±838:59:59", ns)
	}
	return value.NewDurationDatum(ns, int(c.fsp)), nil
}

func jsonDatum(f Format, c *Column, off int, b []byte) (value.Datum, error) {
	n, err := jsonSize(b)
	if err != nil {
		return value.Datum{}, cellErr(f, c, off, "%v", err)
	}
	if n != len(b) {
		return value.Datum{}, cellErr(f, c, off, "JSON value is %d bytes but its header says %d", len(b), n)
	}
	return value.NewJSONDatum(b), nil
}

func vectorDatum(f Format, c *Column, off int, b []byte) (value.Datum, error) {
	if len(b) < 4 {
		return value.Datum{}, cellErr(f, c, off, "vector of %d bytes is shorter than its count", len(b))
	}
	if cnt := uint64(binary.LittleEndian.Uint32(b)); 4+4*cnt != uint64(len(b)) {
		return value.Datum{}, cellErr(f, c, off, "vector of %d elements needs %d bytes, have %d", cnt, 4+4*cnt, len(b))
	}
	return value.NewVectorFloat32Datum(b), nil
}

// decodeDatumV1 decodes a v1 value datum (flag byte first) for column c.
func decodeDatumV1(b []byte, c *Column, off int) (value.Datum, error) {
	return decodeDatum(FormatV1, b, c, off)
}

// decodeDatum decodes a value- or key-form datum; f only labels errors.
func decodeDatum(f Format, b []byte, c *Column, off int) (value.Datum, error) {
	flag := b[0]
	p := b[1:]
	switch flag {
	case flagNil:
		return value.Datum{}, nil
	case flagVarint, flagInt, flagDuration:
		if flag == flagDuration && c.cls != clsDuration {
			break
		}
		var x int64
		if flag == flagVarint {
			v, n := binary.Varint(p)
			if n != len(p) {
				return value.Datum{}, cellErr(f, c, off, "bad varint datum")
			}
			x = v
		} else {
			x = int64(binary.BigEndian.Uint64(p) ^ (1 << 63))
		}
		switch c.cls {
		case clsSigned, clsYear:
			return signedDatum(f, c, off, x)
		case clsDuration:
			return durationDatum(f, c, off, x)
		case clsUnsigned, clsTime, clsEnum, clsSet, clsBit:
			if x < 0 {
				return value.Datum{}, cellErr(f, c, off, "negative value %d for %s", x, typeName(c))
			}
			if c.cls == clsUnsigned {
				return unsignedDatum(f, c, off, uint64(x))
			}
			return uintKindDatum(f, c, off, uint64(x))
		}
	case flagUvarint, flagUint:
		var x uint64
		if flag == flagUvarint {
			v, n := binary.Uvarint(p)
			if n != len(p) {
				return value.Datum{}, cellErr(f, c, off, "bad uvarint datum")
			}
			x = v
		} else {
			x = binary.BigEndian.Uint64(p)
		}
		switch c.cls {
		case clsUnsigned:
			return unsignedDatum(f, c, off, x)
		case clsTime, clsEnum, clsSet, clsBit:
			return uintKindDatum(f, c, off, x)
		case clsSigned, clsYear:
			if x > math.MaxInt64 {
				return value.Datum{}, cellErr(f, c, off, "value %d out of range of %s", x, typeName(c))
			}
			return signedDatum(f, c, off, int64(x))
		}
	case flagFloat:
		if c.cls == clsFloat32 || c.cls == clsFloat64 {
			return floatDatum(f, c, off, decodeComparableFloat(binary.BigEndian.Uint64(p)))
		}
	case flagCompactBytes:
		if c.cls == clsString || c.cls == clsBytes {
			l, n := binary.Varint(p)
			if n <= 0 || l != int64(len(p)-n) {
				return value.Datum{}, cellErr(f, c, off, "bad compact-bytes datum")
			}
			if c.cls == clsString {
				return value.NewStringDatumBytes(p[n:]), nil
			}
			return value.NewBytesDatum(p[n:]), nil
		}
	case flagDecimal:
		if c.cls == clsDecimal {
			return decimalDatum(f, c, off, int(p[0]), int(p[1]), p[2:])
		}
	case flagJSON:
		if c.cls == clsJSON {
			return jsonDatum(f, c, off, p)
		}
	case flagVectorF32:
		if c.cls == clsVector {
			return vectorDatum(f, c, off, p)
		}
	}
	if c.cls == clsInvalid {
		return value.Datum{}, cellErr(f, c, off, "cannot decode: %s", c.invalid)
	}
	return value.Datum{}, cellErr(f, c, off, "datum flag %d does not fit a %s column", flag, typeName(c))
}

func typeName(c *Column) string {
	return fmt.Sprintf("%s column", strings.ToUpper(types.TypeToStr(c.Tp, "")))
}

// validPackedTime checks the fields of a packed time without unpacking it:
// microsecond <= 999999, second and minute <= 59, hour <= 23, and
// year*13+month < 10000*13 (year <= 9999; month and day cannot exceed
// their ranges given their bit widths, except month 13+ which the modulo
// excludes and day 0..31 which 5 bits hold).
func validPackedTime(p uint64) bool {
	if p&(1<<24-1) > 999999 {
		return false
	}
	hms := (p >> 24) & (1<<17 - 1)
	if hms&63 > 59 || (hms>>6)&63 > 59 || hms>>12 > 23 {
		return false
	}
	return p>>46 < 10000*13
}

// setDatum stores the result of a checked constructor.
func setDatum(dst *value.Datum, d value.Datum, err error) error {
	if err != nil {
		return err
	}
	*dst = d
	return nil
}
