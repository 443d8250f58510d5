package codec

import (
	"encoding/binary"
	"fmt"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// EncodeKey appends the key (memcomparable) form of each datum (rule K7).
// Strings are written as given: callers apply the collation sort key
// (SortKey) first when new collation is on.
func EncodeKey(b []byte, datums ...value.Datum) ([]byte, error) {
	return encodeDatums(b, true, datums)
}

// EncodeValue appends the value (compact) form of each datum (rule K8).
func EncodeValue(b []byte, datums ...value.Datum) ([]byte, error) {
	return encodeDatums(b, false, datums)
}

func encodeDatums(b []byte, comparable bool, datums []value.Datum) ([]byte, error) {
	for i := range datums {
		var err error
		b, err = encodeDatum(b, &datums[i], comparable)
		if err != nil {
			return b, fmt.Errorf("codec: datum %d: %w", i, err)
		}
	}
	return b, nil
}

func encodeDatum(b []byte, d *value.Datum, comparable bool) ([]byte, error) {
	switch d.Kind() {
	case value.KindNull:
		return append(b, NilFlag), nil
	case value.KindInt64, value.KindYear:
		if comparable {
			return EncodeInt(append(b, IntFlag), d.GetInt64()), nil
		}
		return EncodeVarint(append(b, VarintFlag), d.GetInt64()), nil
	case value.KindUint64, value.KindEnum, value.KindSet, value.KindBit:
		if comparable {
			return EncodeUint(append(b, UintFlag), d.GetUint64()), nil
		}
		return EncodeUvarint(append(b, UvarintFlag), d.GetUint64()), nil
	case value.KindFloat32, value.KindFloat64:
		return EncodeFloat(append(b, FloatFlag), d.GetFloat64()), nil
	case value.KindString, value.KindBytes:
		if comparable {
			return EncodeBytes(append(b, BytesFlag), d.GetBytes()), nil
		}
		return EncodeCompactBytes(append(b, CompactBytesFlag), d.GetBytes()), nil
	case value.KindDecimal:
		prec, frac := d.DecimalShape()
		// Validate the bin against its shape so we never write garbage.
		if _, _, err := value.DecodeDecimalBin(d.GetBytes(), prec, frac); err != nil {
			return b, err
		}
		n, _ := value.DecimalBinSize(prec, frac)
		b = append(b, DecimalFlag, byte(prec), byte(frac))
		return append(b, d.GetBytes()[:n]...), nil
	case value.KindTime:
		// Un-flattened times use the fixed 9-byte form in both forms.
		return EncodeUint(append(b, UintFlag), d.GetUint64()), nil
	case value.KindDuration:
		return EncodeInt(append(b, DurationFlag), d.GetInt64()), nil
	case value.KindJSON:
		j, err := d.GetJSON()
		if err != nil {
			return b, err
		}
		return j.AppendTyped(append(b, JSONFlag)), nil
	case value.KindVectorFloat32:
		v, err := d.GetVectorFloat32()
		if err != nil {
			return b, err
		}
		return append(append(b, VectorFloat32Flag), v.Serialized()...), nil
	case value.KindMinNotNull:
		return append(b, BytesFlag), nil
	case value.KindMaxValue:
		return append(b, MaxFlag), nil
	}
	return b, fmt.Errorf("cannot encode datum kind %s", d.Kind())
}

// EncodeDecimal appends prec, frac and the bin of dec at that shape (the
// value-form payload after DecimalFlag). prec 0 uses the value's own shape.
func EncodeDecimal(b []byte, dec value.Decimal, prec, frac int) ([]byte, error) {
	if prec == 0 {
		prec, frac = dec.PrecisionAndFrac()
	}
	b = append(b, byte(prec), byte(frac))
	return dec.AppendBin(b, prec, frac)
}

// DecodeOne decodes the datum at the front of b (either form) and returns
// the rest (rule K9). String and JSON/vector/decimal payloads of the value
// form are borrowed from b; memcomparable bytes are copied into a new
// buffer (use DecodeOneBuf to supply one). Without a schema, flags map to
// kinds: 1/2 → bytes, 3/8 → int64, 4/9 → uint64, 5 → float64, 7 →
// duration (fsp 6), 6 → decimal, 10 → JSON, 20 → vector, 0 → NULL, 250/251
// → max value, a lone 1 at the end → min-not-null.
func DecodeOne(b []byte) (rest []byte, d value.Datum, err error) {
	return DecodeOneBuf(b, nil)
}

// DecodeOneBuf is DecodeOne with a caller buffer for memcomparable bytes.
func DecodeOneBuf(b []byte, buf []byte) (rest []byte, d value.Datum, err error) {
	if len(b) == 0 {
		return b, d, errAt(0, "datum: empty input, expected a flag byte")
	}
	flag := b[0]
	p := b[1:]
	wrap := func(e error) error { return wrapFlagErr(flag, e) }
	switch flag {
	case NilFlag:
		return p, value.NewNullDatum(), nil
	case IntFlag:
		r, v, e := DecodeInt(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewIntDatum(v), nil
	case UintFlag:
		r, v, e := DecodeUint(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewUintDatum(v), nil
	case VarintFlag:
		r, v, e := DecodeVarint(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewIntDatum(v), nil
	case UvarintFlag:
		r, v, e := DecodeUvarint(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewUintDatum(v), nil
	case FloatFlag:
		r, v, e := DecodeFloat(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewFloat64Datum(v), nil
	case DurationFlag:
		r, v, e := DecodeInt(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewDurationDatum(v, value.MaxFsp), nil
	case BytesFlag:
		if len(p) == 0 {
			return p, value.NewMinNotNullDatum(), nil
		}
		if buf == nil {
			n, e := PeekBytesLen(p, false)
			if e != nil {
				return b, d, wrap(e)
			}
			buf = make([]byte, 0, n/9*8)
		}
		r, v, e := DecodeBytes(p, buf)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewBytesDatum(v), nil
	case CompactBytesFlag:
		r, v, e := DecodeCompactBytes(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return r, value.NewBytesDatum(v), nil
	case DecimalFlag:
		if len(p) < 2 {
			return b, d, wrap(errAt(0, "decimal needs precision and frac bytes, have %d", len(p)))
		}
		prec, frac := int(p[0]), int(p[1])
		_, n, e := value.DecodeDecimalBin(p[2:], prec, frac)
		if e != nil {
			return b, d, wrap(errAt(2, "%v", e))
		}
		return p[2+n:], value.NewDecimalDatumBin(p[2:2+n], prec, frac), nil
	case JSONFlag:
		j, e := value.BinaryJSONFromTyped(p)
		if e != nil {
			return b, d, wrap(e)
		}
		n := 1 + len(j.Value)
		return p[n:], value.NewJSONDatum(p[:n]), nil
	case VectorFloat32Flag:
		n, e := value.VectorFloat32Len(p)
		if e != nil {
			return b, d, wrap(e)
		}
		return p[n:], value.NewVectorFloat32Datum(p[:n]), nil
	case MaxFlag, MaxFlag + 1:
		return p, value.NewMaxValueDatum(), nil
	}
	return b, d, errAt(0, "datum: unknown flag %d", flag)
}

func wrapFlagErr(flag byte, e error) error {
	if ce, ok := e.(*Error); ok {
		return &Error{Offset: ce.Offset + 1, What: fmt.Sprintf("datum flag %d: %s", flag, ce.What)}
	}
	return &Error{Offset: 1, What: fmt.Sprintf("datum flag %d: %v", flag, e)}
}

// PeekLength returns the encoded length (flag included) of the datum at the
// front of b without decoding it (rule K10).
func PeekLength(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, errAt(0, "datum: empty input, expected a flag byte")
	}
	p := b[1:]
	var n int
	switch b[0] {
	case NilFlag, MaxFlag, MaxFlag + 1:
		n = 0
	case IntFlag, UintFlag, FloatFlag, DurationFlag:
		n = 8
	case BytesFlag:
		if len(p) == 0 {
			return 1, nil
		}
		l, err := PeekBytesLen(p, false)
		if err != nil {
			return 0, shift(err, 1)
		}
		n = l
	case CompactBytesFlag:
		l, w := binary.Varint(p)
		if w <= 0 || l < 0 || l > int64(len(p)-w) {
			return 0, errAt(1, "compact bytes: bad length")
		}
		n = w + int(l)
	case DecimalFlag:
		if len(p) < 2 {
			return 0, errAt(1, "decimal needs precision and frac bytes")
		}
		s, err := value.DecimalBinSize(int(p[0]), int(p[1]))
		if err != nil {
			return 0, errAt(1, "%v", err)
		}
		n = 2 + s
	case VarintFlag, UvarintFlag:
		_, w := binary.Uvarint(p)
		if w <= 0 {
			return 0, errAt(1, "bad varint")
		}
		n = w
	case JSONFlag:
		if len(p) == 0 {
			return 0, errAt(1, "json needs a type code")
		}
		l, err := value.JSONValueLen(p[0], p[1:])
		if err != nil {
			return 0, errAt(1, "%v", err)
		}
		n = 1 + l
	case VectorFloat32Flag:
		l, err := value.VectorFloat32Len(p)
		if err != nil {
			return 0, errAt(1, "%v", err)
		}
		n = l
	default:
		return 0, errAt(0, "datum: unknown flag %d", b[0])
	}
	if n > len(p) {
		return 0, errAt(1, "datum flag %d needs %d payload bytes, have %d", b[0], n, len(p))
	}
	return 1 + n, nil
}

func shift(err error, by int) error {
	if ce, ok := err.(*Error); ok {
		return &Error{Offset: ce.Offset + by, What: ce.What}
	}
	return err
}

// CutOne splits the first encoded datum off b.
func CutOne(b []byte) (datum, rest []byte, err error) {
	n, err := PeekLength(b)
	if err != nil {
		return nil, b, err
	}
	return b[:n], b[n:], nil
}

// Decode decodes up to size datums (size <= 0: all) from b.
func Decode(b []byte, size int) ([]value.Datum, error) {
	var out []value.Datum
	off := 0
	for len(b) > 0 && (size <= 0 || len(out) < size) {
		rest, d, err := DecodeOne(b)
		if err != nil {
			return out, shift(err, off)
		}
		off += len(b) - len(rest)
		out = append(out, d)
		b = rest
	}
	return out, nil
}
