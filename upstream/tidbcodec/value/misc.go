package value

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxVectorDimension is the largest VECTOR dimension TiDB accepts.
const MaxVectorDimension = 16383

// VectorFloat32 is a view over a serialized VECTOR(FLOAT32): uint32 LE
// dimension followed by that many float32 LE.
type VectorFloat32 struct {
	data []byte // starts with the count; exactly 4+4*Len bytes
}

// VectorFloat32Len returns the serialized length at the front of b.
func VectorFloat32Len(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("vector: need 4 bytes for the dimension, have %d", len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if n > MaxVectorDimension {
		return 0, fmt.Errorf("vector: dimension %d exceeds %d", n, MaxVectorDimension)
	}
	if 4+4*n > uint64(len(b)) {
		return 0, fmt.Errorf("vector: dimension %d needs %d bytes, have %d", n, 4+4*n, len(b))
	}
	return int(4 + 4*n), nil
}

// VectorFloat32FromBytes views the serialized vector at the front of b.
func VectorFloat32FromBytes(b []byte) (VectorFloat32, error) {
	n, err := VectorFloat32Len(b)
	if err != nil {
		return VectorFloat32{}, err
	}
	return VectorFloat32{data: b[:n]}, nil
}

// Len returns the dimension.
func (v VectorFloat32) Len() int {
	if len(v.data) < 4 {
		return 0
	}
	return int(binary.LittleEndian.Uint32(v.data))
}

// At returns element i.
func (v VectorFloat32) At(i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(v.data[4+4*i:]))
}

// Serialized returns the borrowed bytes.
func (v VectorFloat32) Serialized() []byte { return v.data }

// Elements copies the elements out.
func (v VectorFloat32) Elements() []float32 {
	out := make([]float32, v.Len())
	for i := range out {
		out[i] = v.At(i)
	}
	return out
}

// String renders "[e1,e2,...]" with float32 shortest digits in plain
// notation (spec rule V11).
func (v VectorFloat32) String() string { return string(v.AppendText(nil)) }

// AppendText appends the text form.
func (v VectorFloat32) AppendText(dst []byte) []byte {
	dst = append(dst, '[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendFloat(dst, float64(v.At(i)), 'f', -1, 32)
	}
	return append(dst, ']')
}

// AppendVectorFloat32 serializes elems, refusing NaN, ±Inf and dimensions
// over MaxVectorDimension like TiDB.
func AppendVectorFloat32(dst []byte, elems []float32) ([]byte, error) {
	if len(elems) > MaxVectorDimension {
		return dst, fmt.Errorf("vector: dimension %d exceeds %d", len(elems), MaxVectorDimension)
	}
	for i, f := range elems {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return dst, fmt.Errorf("vector: element %d is %v", i, f)
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(elems)))
	for _, f := range elems {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	}
	return dst, nil
}

// ParseVectorFloat32 parses "[1, 2.5, -3]".
func ParseVectorFloat32(s string) ([]float32, error) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '[' || t[len(t)-1] != ']' {
		return nil, fmt.Errorf("vector: %q is not a bracketed list", s)
	}
	body := strings.TrimSpace(t[1 : len(t)-1])
	if body == "" {
		return []float32{}, nil
	}
	parts := strings.Split(body, ",")
	out := make([]float32, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return nil, fmt.Errorf("vector: element %d %q: %w", i, p, err)
		}
		out[i] = float32(f)
	}
	return out, nil
}

// EnumName returns the member for a 1-based ENUM index; 0 is the empty
// "error" value.
func EnumName(elems []string, index uint64) (string, error) {
	if index == 0 {
		return "", nil
	}
	if index > uint64(len(elems)) {
		return "", fmt.Errorf("enum: index %d out of range 1..%d", index, len(elems))
	}
	return elems[index-1], nil
}

// EnumIndex returns the 1-based index of name (exact match first, then
// case-insensitive as the default collations compare).
func EnumIndex(elems []string, name string) (uint64, error) {
	for i, e := range elems {
		if e == name {
			return uint64(i + 1), nil
		}
	}
	for i, e := range elems {
		if strings.EqualFold(e, name) {
			return uint64(i + 1), nil
		}
	}
	if name == "" {
		return 0, nil
	}
	return 0, fmt.Errorf("enum: %q is not a member of %q", name, elems)
}

// SetNames returns the comma-joined members of bits in elems order. It only
// allocates when more than one member is set.
func SetNames(elems []string, bits uint64) (string, error) {
	if len(elems) < 64 && bits>>uint(len(elems)) != 0 {
		return "", fmt.Errorf("set: bits 0x%x name members beyond the %d elems", bits, len(elems))
	}
	if bits == 0 {
		return "", nil
	}
	if bits&(bits-1) == 0 {
		for i := range elems {
			if bits == 1<<uint(i) {
				return elems[i], nil
			}
		}
	}
	var sb strings.Builder
	for i, e := range elems {
		if bits&(1<<uint(i)) != 0 {
			if sb.Len() > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(e)
		}
	}
	return sb.String(), nil
}

// SetBits parses a comma-joined member list into a bitmask.
func SetBits(elems []string, names string) (uint64, error) {
	if names == "" {
		return 0, nil
	}
	var bits uint64
	for _, n := range strings.Split(names, ",") {
		idx, err := EnumIndex(elems, n)
		if err != nil || idx == 0 {
			return 0, fmt.Errorf("set: %q is not a member of %q", n, elems)
		}
		bits |= 1 << (idx - 1)
	}
	return bits, nil
}

// BitBytes returns v as width big-endian bytes (BIT(n) with width =
// (n+7)/8), appended to dst.
func BitBytes(dst []byte, v uint64, width int) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	if width < 1 {
		width = 1
	} else if width > 8 {
		width = 8
	}
	return append(dst, buf[8-width:]...)
}

// BitValue reads up to 8 big-endian bytes as the BIT value.
func BitValue(b []byte) (uint64, error) {
	if len(b) > 8 {
		return 0, fmt.Errorf("bit: %d bytes exceed 8", len(b))
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}
