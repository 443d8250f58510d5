// Package value holds the typed values TiDB stores in keys and rows and the
// single value container every decoder in upstream/tidbcodec returns: Datum.
//
// A Datum is small (40 bytes) and never allocates for fixed-size kinds: the
// numeric payload of ints, uints, floats, packed times, durations, enums,
// sets and bits lives in one uint64; variable-size payloads (strings, bytes,
// decimal bin, binary JSON, vectors) are slices borrowed from the bytes the
// datum was decoded from. A decoded Datum is therefore only valid as long as
// the source bytes are; Clone copies the borrowed part.
//
// String gives the canonical text form: what the MySQL text protocol shows
// for the value (see specs/tidbcodec-values.md, rules V1-V12).
package value

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"unsafe"
)

// Kind says which payload a Datum holds.
type Kind uint8

const (
	// KindNull is SQL NULL (the zero Datum).
	KindNull Kind = iota
	// KindInt64 is a signed integer (all signed integer widths, BOOL).
	KindInt64
	// KindUint64 is an unsigned integer (UNSIGNED integer columns).
	KindUint64
	// KindFloat32 is a FLOAT column value; stored widened in the uint64 bits.
	KindFloat32
	// KindFloat64 is a DOUBLE column value.
	KindFloat64
	// KindString is text in a non-binary charset (CHAR, VARCHAR, TEXT).
	KindString
	// KindBytes is binary data (BINARY, VARBINARY, BLOB).
	KindBytes
	// KindDecimal is a DECIMAL held as its MyDecimal bin bytes plus the
	// declared precision and scale.
	KindDecimal
	// KindTime is a DATE, DATETIME or TIMESTAMP in the packed uint64 layout
	// (TIMESTAMP in UTC), with its MySQL type and fsp.
	KindTime
	// KindDuration is a TIME value: int64 nanoseconds with fsp.
	KindDuration
	// KindJSON is TiDB binary JSON: type code byte followed by the value.
	KindJSON
	// KindEnum is an ENUM: 1-based index plus the member name.
	KindEnum
	// KindSet is a SET: bitmask plus the comma-joined member names.
	KindSet
	// KindBit is a BIT(n) value as an unsigned integer plus its byte width.
	KindBit
	// KindYear is a YEAR value (0 or 1901..2155) held as int64.
	KindYear
	// KindVectorFloat32 is a VECTOR(FLOAT32): uint32 LE count + LE floats.
	KindVectorFloat32
	// KindMinNotNull is the range sentinel "smallest non-NULL value"
	// (a lone bytes flag in a key).
	KindMinNotNull
	// KindMaxValue is the range sentinel "larger than every value".
	KindMaxValue
)

var kindNames = [...]string{
	KindNull: "null", KindInt64: "int64", KindUint64: "uint64", KindFloat32: "float32",
	KindFloat64: "float64", KindString: "string", KindBytes: "bytes", KindDecimal: "decimal",
	KindTime: "time", KindDuration: "duration", KindJSON: "json", KindEnum: "enum",
	KindSet: "set", KindBit: "bit", KindYear: "year", KindVectorFloat32: "vector_float32",
	KindMinNotNull: "min_not_null", KindMaxValue: "max_value",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Datum is one typed value. The zero Datum is NULL.
type Datum struct {
	// b is the borrowed variable-size payload (or the enum/set name).
	b []byte
	// num is the fixed-size payload: int64/uint64 bits, float64 bits,
	// packed time, duration ns, enum index, set bits, bit value.
	num uint64
	k   Kind
	// a: MySQL time type for KindTime, precision for KindDecimal, byte
	// width for KindBit.
	a uint8
	// c: fsp for KindTime/KindDuration, frac for KindDecimal.
	c uint8
}

// Kind reports the datum's kind.
func (d Datum) Kind() Kind { return d.k }

// IsNull reports whether the datum is SQL NULL.
func (d Datum) IsNull() bool { return d.k == KindNull }

// Constructors. Slices are borrowed, not copied.

// NewNullDatum returns NULL.
func NewNullDatum() Datum { return Datum{} }

// NewIntDatum returns a signed integer datum.
func NewIntDatum(v int64) Datum { return Datum{k: KindInt64, num: uint64(v)} }

// NewUintDatum returns an unsigned integer datum.
func NewUintDatum(v uint64) Datum { return Datum{k: KindUint64, num: v} }

// NewFloat32Datum returns a FLOAT datum.
func NewFloat32Datum(v float32) Datum {
	return Datum{k: KindFloat32, num: math.Float64bits(float64(v))}
}

// NewFloat64Datum returns a DOUBLE datum.
func NewFloat64Datum(v float64) Datum { return Datum{k: KindFloat64, num: math.Float64bits(v)} }

// NewStringDatum returns a text datum over s without copying it.
func NewStringDatum(s string) Datum { return Datum{k: KindString, b: stringBytes(s)} }

// NewStringDatumBytes returns a text datum borrowing b.
func NewStringDatumBytes(b []byte) Datum { return Datum{k: KindString, b: b} }

// NewBytesDatum returns a binary datum borrowing b.
func NewBytesDatum(b []byte) Datum { return Datum{k: KindBytes, b: b} }

// NewDecimalDatumBin returns a DECIMAL datum over MyDecimal bin bytes with the
// declared precision and frac. The bytes are not validated here; GetDecimal
// and String report malformed bins.
func NewDecimalDatumBin(bin []byte, prec, frac int) Datum {
	return Datum{k: KindDecimal, b: bin, a: uint8(prec), c: uint8(frac)}
}

// NewDecimalDatum encodes dec at (prec, frac) into a new bin buffer. prec 0
// means the value's own shape.
func NewDecimalDatum(dec Decimal, prec, frac int) (Datum, error) {
	if prec == 0 {
		prec, frac = dec.PrecisionAndFrac()
	}
	bin, err := dec.AppendBin(nil, prec, frac)
	if err != nil {
		return Datum{}, err
	}
	return NewDecimalDatumBin(bin, prec, frac), nil
}

// NewTimeDatum returns a DATE/DATETIME/TIMESTAMP datum from its packed form.
// tp is mysql.TypeDate, TypeDatetime or TypeTimestamp.
func NewTimeDatum(packed uint64, tp byte, fsp int) Datum {
	return Datum{k: KindTime, num: packed, a: tp, c: uint8(fsp)}
}

// NewDurationDatum returns a TIME datum.
func NewDurationDatum(ns int64, fsp int) Datum {
	return Datum{k: KindDuration, num: uint64(ns), c: uint8(fsp)}
}

// NewJSONDatum returns a JSON datum borrowing the type code + value bytes.
func NewJSONDatum(typeCodeAndValue []byte) Datum { return Datum{k: KindJSON, b: typeCodeAndValue} }

// NewEnumDatum returns an ENUM datum; name is "" for index 0.
func NewEnumDatum(index uint64, name string) Datum {
	return Datum{k: KindEnum, num: index, b: stringBytes(name)}
}

// NewSetDatum returns a SET datum; names is the comma-joined member list.
func NewSetDatum(bits uint64, names string) Datum {
	return Datum{k: KindSet, num: bits, b: stringBytes(names)}
}

// NewBitDatum returns a BIT datum; width is the column's byte width
// ((flen+7)/8, 1..8) and only affects String.
func NewBitDatum(v uint64, width int) Datum {
	if width < 1 {
		width = 1
	} else if width > 8 {
		width = 8
	}
	return Datum{k: KindBit, num: v, a: uint8(width)}
}

// NewYearDatum returns a YEAR datum.
func NewYearDatum(y int64) Datum { return Datum{k: KindYear, num: uint64(y)} }

// NewVectorFloat32Datum returns a VECTOR datum borrowing the serialized form
// (uint32 LE count + LE float32s).
func NewVectorFloat32Datum(serialized []byte) Datum {
	return Datum{k: KindVectorFloat32, b: serialized}
}

// NewMinNotNullDatum and NewMaxValueDatum return the range sentinels.
func NewMinNotNullDatum() Datum { return Datum{k: KindMinNotNull} }
func NewMaxValueDatum() Datum   { return Datum{k: KindMaxValue} }

// Accessors. They do not check the kind (like TiDB's); use Kind first.

// GetInt64 returns the signed payload (int, year, duration ns).
func (d Datum) GetInt64() int64 { return int64(d.num) }

// GetUint64 returns the unsigned payload (uint, packed time, enum index, set
// bits, bit value).
func (d Datum) GetUint64() uint64 { return d.num }

// GetFloat64 returns the float payload (FLOAT widened to float64).
func (d Datum) GetFloat64() float64 { return math.Float64frombits(d.num) }

// GetFloat32 returns the float payload narrowed to float32.
func (d Datum) GetFloat32() float32 { return float32(math.Float64frombits(d.num)) }

// GetBytes returns the borrowed variable-size payload: string/bytes
// contents, decimal bin, JSON type code + value, serialized vector, enum or
// set names.
func (d Datum) GetBytes() []byte { return d.b }

// GetString returns the variable-size payload as a string (copies).
func (d Datum) GetString() string { return string(d.b) }

// GetDecimal decodes a KindDecimal datum.
func (d Datum) GetDecimal() (Decimal, error) {
	dec, _, err := DecodeDecimalBin(d.b, int(d.a), int(d.c))
	return dec, err
}

// DecimalShape returns the declared (precision, frac) of a KindDecimal datum.
func (d Datum) DecimalShape() (prec, frac int) { return int(d.a), int(d.c) }

// GetTime unpacks a KindTime datum.
func (d Datum) GetTime() Time { return UnpackTime(d.num, d.a, int(d.c)) }

// GetDuration returns a KindDuration datum.
func (d Datum) GetDuration() Duration { return Duration{Nanos: int64(d.num), Fsp: int(d.c)} }

// GetJSON returns a KindJSON datum's binary JSON view.
func (d Datum) GetJSON() (BinaryJSON, error) { return BinaryJSONFromTyped(d.b) }

// GetVectorFloat32 returns a KindVectorFloat32 datum's view.
func (d Datum) GetVectorFloat32() (VectorFloat32, error) { return VectorFloat32FromBytes(d.b) }

// Fsp returns the fractional-second precision of a time or duration datum.
func (d Datum) Fsp() int { return int(d.c) }

// TimeType returns the MySQL type of a KindTime datum.
func (d Datum) TimeType() byte { return d.a }

// BitWidth returns the byte width of a KindBit datum.
func (d Datum) BitWidth() int { return int(d.a) }

// Clone returns a datum that owns its variable-size payload.
func (d Datum) Clone() Datum {
	if d.b != nil {
		d.b = append([]byte(nil), d.b...)
	}
	return d
}

// Equal reports whether two datums hold the same kind, payload and shape.
func (d *Datum) Equal(o *Datum) bool {
	return d.k == o.k && d.num == o.num && d.a == o.a && d.c == o.c && bytes.Equal(d.b, o.b)
}

// String renders the canonical text form; malformed payloads render as
// "<invalid kind: error>" (use AppendText to get the error).
func (d Datum) String() string {
	out, err := d.AppendText(nil)
	if err != nil {
		return fmt.Sprintf("<invalid %s: %v>", d.k, err)
	}
	return string(out)
}

// AppendText appends the canonical text form (spec rules V1-V12) to dst.
// NULL appends "NULL".
func (d Datum) AppendText(dst []byte) ([]byte, error) {
	switch d.k {
	case KindNull:
		return append(dst, "NULL"...), nil
	case KindInt64:
		return strconv.AppendInt(dst, int64(d.num), 10), nil
	case KindUint64:
		return strconv.AppendUint(dst, d.num, 10), nil
	case KindYear:
		y := int64(d.num)
		if y == 0 {
			return append(dst, "0000"...), nil
		}
		return strconv.AppendInt(dst, y, 10), nil
	case KindFloat32:
		return AppendFloatText(dst, math.Float64frombits(d.num), 32), nil
	case KindFloat64:
		return AppendFloatText(dst, math.Float64frombits(d.num), 64), nil
	case KindString, KindEnum, KindSet:
		return append(dst, d.b...), nil
	case KindBytes:
		dst = append(dst, "0x"...)
		return hex.AppendEncode(dst, d.b), nil
	case KindBit:
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], d.num)
		dst = append(dst, "0x"...)
		return hex.AppendEncode(dst, buf[8-int(d.a):]), nil
	case KindDecimal:
		dec, err := d.GetDecimal()
		if err != nil {
			return dst, err
		}
		return dec.AppendText(dst), nil
	case KindTime:
		t := d.GetTime()
		if err := t.Validate(); err != nil {
			return dst, err
		}
		return t.AppendText(dst), nil
	case KindDuration:
		return d.GetDuration().AppendText(dst), nil
	case KindJSON:
		j, err := d.GetJSON()
		if err != nil {
			return dst, err
		}
		return j.AppendText(dst)
	case KindVectorFloat32:
		v, err := d.GetVectorFloat32()
		if err != nil {
			return dst, err
		}
		return v.AppendText(dst), nil
	case KindMinNotNull:
		return append(dst, "-inf"...), nil
	case KindMaxValue:
		return append(dst, "+inf"...), nil
	}
	return dst, fmt.Errorf("value: unknown datum kind %d", d.k)
}

// AppendFloatText formats f as the MySQL text protocol does in TiDB: plain
// decimal notation with the shortest round-trip digits, switching to
// exponent notation (no '+', no trailing zeros in the mantissa) when
// |f| >= 1e15 or 0 < |f| < 1e-15 (spec rule V3). bitSize 32 formats FLOAT
// columns with float32 shortest digits and at most 6 significant digits in
// exponent form.
func AppendFloatText(dst []byte, f float64, bitSize int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	abs := math.Abs(f)
	var expo bool
	if bitSize == 32 {
		a32 := float32(abs)
		expo = a32 >= 1e15 || (a32 != 0 && a32 < 1e-15)
	} else {
		expo = abs >= 1e15 || (abs != 0 && abs < 1e-15)
	}
	if !expo {
		return strconv.AppendFloat(dst, f, 'f', -1, bitSize)
	}
	prec := -1
	if bitSize == 32 {
		prec = 5
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', prec, bitSize)
	s := dst[start:]
	e := bytes.IndexByte(s, 'e')
	mant, exp := s[:e], s[e+1:]
	// Trim trailing zeros (and a bare point) from the mantissa.
	if bytes.IndexByte(mant, '.') >= 0 {
		mant = bytes.TrimRight(mant, "0")
		mant = bytes.TrimSuffix(mant, []byte("."))
	}
	if len(exp) > 0 && exp[0] == '+' {
		exp = exp[1:]
	}
	var tmp [40]byte
	out := append(append(append(tmp[:0], mant...), 'e'), exp...)
	return append(dst[:start], out...)
}

// stringBytes views s as bytes without copying; callers never mutate it.
func stringBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
