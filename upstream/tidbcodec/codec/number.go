// Package codec implements TiDB's datum codec (pkg/util/codec): the flag
// byte of every encoded datum, memcomparable bytes, comparable integers and
// floats, varints, compact bytes, and whole datums in key form
// (memcomparable, for index keys and common handles) and value form (for old
// v1 rows). Rules are in specs/tidbcodec-keys.md (K1-K11).
//
// Decoders never panic: every failure is an error naming what was wrong and
// the offset it was found at, relative to the slice the caller passed in.
package codec

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Datum flags: the first byte of every encoded datum (rule K1).
const (
	NilFlag           byte = 0
	BytesFlag         byte = 1
	CompactBytesFlag  byte = 2
	IntFlag           byte = 3
	UintFlag          byte = 4
	FloatFlag         byte = 5
	DecimalFlag       byte = 6
	DurationFlag      byte = 7
	VarintFlag        byte = 8
	UvarintFlag       byte = 9
	JSONFlag          byte = 10
	VectorFloat32Flag byte = 20
	MaxFlag           byte = 250
)

const signMask uint64 = 0x8000000000000000

// Error is a decoding error with the offset (into the caller's input) at
// which the problem was found.
type Error struct {
	Offset int
	What   string
}

func (e *Error) Error() string { return fmt.Sprintf("codec: %s at offset %d", e.What, e.Offset) }

func errAt(off int, format string, args ...any) error {
	return &Error{Offset: off, What: fmt.Sprintf(format, args...)}
}

// EncodeIntToCmpUint flips the sign bit so signed order becomes unsigned
// byte order.
func EncodeIntToCmpUint(v int64) uint64 { return uint64(v) ^ signMask }

// DecodeCmpUintToInt reverses EncodeIntToCmpUint.
func DecodeCmpUintToInt(u uint64) int64 { return int64(u ^ signMask) }

// EncodeInt appends the 8-byte comparable form of v (rule K2).
func EncodeInt(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, EncodeIntToCmpUint(v))
}

// EncodeIntDesc appends the descending comparable form of v.
func EncodeIntDesc(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, ^EncodeIntToCmpUint(v))
}

// DecodeInt decodes a comparable int64 from the front of b.
func DecodeInt(b []byte) (rest []byte, v int64, err error) {
	if len(b) < 8 {
		return b, 0, errAt(0, "comparable int64 needs 8 bytes, have %d", len(b))
	}
	return b[8:], DecodeCmpUintToInt(binary.BigEndian.Uint64(b)), nil
}

// DecodeIntDesc decodes a descending comparable int64.
func DecodeIntDesc(b []byte) (rest []byte, v int64, err error) {
	if len(b) < 8 {
		return b, 0, errAt(0, "comparable int64 needs 8 bytes, have %d", len(b))
	}
	return b[8:], DecodeCmpUintToInt(^binary.BigEndian.Uint64(b)), nil
}

// EncodeUint appends v as 8 bytes big-endian.
func EncodeUint(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// EncodeUintDesc appends ^v as 8 bytes big-endian.
func EncodeUintDesc(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, ^v) }

// DecodeUint decodes 8 bytes big-endian.
func DecodeUint(b []byte) (rest []byte, v uint64, err error) {
	if len(b) < 8 {
		return b, 0, errAt(0, "comparable uint64 needs 8 bytes, have %d", len(b))
	}
	return b[8:], binary.BigEndian.Uint64(b), nil
}

// DecodeUintDesc decodes the descending form.
func DecodeUintDesc(b []byte) (rest []byte, v uint64, err error) {
	if len(b) < 8 {
		return b, 0, errAt(0, "comparable uint64 needs 8 bytes, have %d", len(b))
	}
	return b[8:], ^binary.BigEndian.Uint64(b), nil
}

// EncodeFloatToCmpUint64 maps IEEE bits to an order-preserving uint64
// (rule K3): non-negative → set the sign bit; negative → invert all bits.
func EncodeFloatToCmpUint64(f float64) uint64 {
	u := math.Float64bits(f)
	if u&signMask == 0 {
		return u | signMask
	}
	return ^u
}

// DecodeCmpUintToFloat reverses EncodeFloatToCmpUint64.
func DecodeCmpUintToFloat(u uint64) float64 {
	if u&signMask > 0 {
		u &^= signMask
	} else {
		u = ^u
	}
	return math.Float64frombits(u)
}

// EncodeFloat appends the 8-byte comparable float.
func EncodeFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(b, EncodeFloatToCmpUint64(f))
}

// EncodeFloatDesc appends the descending comparable float.
func EncodeFloatDesc(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(b, ^EncodeFloatToCmpUint64(f))
}

// DecodeFloat decodes a comparable float.
func DecodeFloat(b []byte) (rest []byte, f float64, err error) {
	if len(b) < 8 {
		return b, 0, errAt(0, "comparable float needs 8 bytes, have %d", len(b))
	}
	return b[8:], DecodeCmpUintToFloat(binary.BigEndian.Uint64(b)), nil
}

// DecodeFloatDesc decodes the descending comparable float.
func DecodeFloatDesc(b []byte) (rest []byte, f float64, err error) {
	if len(b) < 8 {
		return b, 0, errAt(0, "comparable float needs 8 bytes, have %d", len(b))
	}
	return b[8:], DecodeCmpUintToFloat(^binary.BigEndian.Uint64(b)), nil
}

// EncodeVarint appends Go's zig-zag varint.
func EncodeVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// DecodeVarint decodes Go's zig-zag varint.
func DecodeVarint(b []byte) (rest []byte, v int64, err error) {
	v, n := binary.Varint(b)
	if n == 0 {
		return b, 0, errAt(0, "varint truncated after %d bytes", len(b))
	}
	if n < 0 {
		return b, 0, errAt(-n-1, "varint overflows 64 bits")
	}
	return b[n:], v, nil
}

// EncodeUvarint appends Go's uvarint.
func EncodeUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// DecodeUvarint decodes Go's uvarint.
func DecodeUvarint(b []byte) (rest []byte, v uint64, err error) {
	v, n := binary.Uvarint(b)
	if n == 0 {
		return b, 0, errAt(0, "uvarint truncated after %d bytes", len(b))
	}
	if n < 0 {
		return b, 0, errAt(-n-1, "uvarint overflows 64 bits")
	}
	return b[n:], v, nil
}

// EncodeComparableVarint appends the order-preserving variable-length form
// (rule K4).
func EncodeComparableVarint(b []byte, v int64) []byte {
	if v >= 0 {
		return EncodeComparableUvarint(b, uint64(v))
	}
	// Negative: tag 8-n, then the low n bytes of v; n minimal so that
	// v >= -(256^n - 1)... n=8 for the rest.
	var n int
	switch {
	case v >= -0xff:
		n = 1
	case v >= -0xffff:
		n = 2
	case v >= -0xffffff:
		n = 3
	case v >= -0xffffffff:
		n = 4
	case v >= -0xffffffffff:
		n = 5
	case v >= -0xffffffffffff:
		n = 6
	case v >= -0xffffffffffffff:
		n = 7
	default:
		n = 8
	}
	b = append(b, byte(8-n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(uint64(v)>>(8*uint(i))))
	}
	return b
}

// EncodeComparableUvarint appends the order-preserving unsigned form:
// v <= 239 → one byte v+8; else tag 0xf7+n then n big-endian bytes.
func EncodeComparableUvarint(b []byte, v uint64) []byte {
	if v <= 239 {
		return append(b, byte(v+8))
	}
	n := 8
	for n > 1 && v>>(8*uint(n-1)) == 0 {
		n--
	}
	b = append(b, byte(0xf7+n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*uint(i))))
	}
	return b
}

// DecodeComparableUvarint reverses EncodeComparableUvarint (and always
// advances past what it read).
func DecodeComparableUvarint(b []byte) (rest []byte, v uint64, err error) {
	if len(b) == 0 {
		return b, 0, errAt(0, "comparable uvarint: empty input")
	}
	tag := b[0]
	switch {
	case tag < 8:
		return b, 0, errAt(0, "comparable uvarint: tag 0x%02x is a negative varint", tag)
	case tag <= 8+239:
		return b[1:], uint64(tag - 8), nil
	}
	n := int(tag - 0xf7)
	if len(b) < 1+n {
		return b, 0, errAt(1, "comparable uvarint: need %d bytes, have %d", n, len(b)-1)
	}
	for _, c := range b[1 : 1+n] {
		v = v<<8 | uint64(c)
	}
	return b[1+n:], v, nil
}

// DecodeComparableVarint reverses EncodeComparableVarint.
func DecodeComparableVarint(b []byte) (rest []byte, v int64, err error) {
	if len(b) == 0 {
		return b, 0, errAt(0, "comparable varint: empty input")
	}
	tag := b[0]
	if tag >= 8 {
		rest, u, err := DecodeComparableUvarint(b)
		if err != nil {
			return b, 0, err
		}
		if u > math.MaxInt64 {
			return b, 0, errAt(0, "comparable varint: %d overflows int64", u)
		}
		return rest, int64(u), nil
	}
	n := 8 - int(tag)
	if len(b) < 1+n {
		return b, 0, errAt(1, "comparable varint: need %d bytes, have %d", n, len(b)-1)
	}
	u := ^uint64(0)
	for _, c := range b[1 : 1+n] {
		u = u<<8 | uint64(c)
	}
	return b[1+n:], int64(u), nil
}
