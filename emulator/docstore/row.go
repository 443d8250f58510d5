package docstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
	"unsafe"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
)

// The compact row (E45): a live document is kept in memory as one byte
// slice, its values in the order of its layout, each value as the kind
// byte and payload the stored record (format 3, 'R') writes for it. A row
// held as ~10 protobuf Values costs ~940 bytes of pointer-rich heap that
// every GC cycle scans; the same row as bytes is a third of that and
// holds no pointers. Readers decode one field at a time.

// Value kinds of the row encoding (stored records use the same bytes).
const (
	KindUnset byte = iota
	KindNull
	KindInt64
	KindUint64
	KindDouble
	KindString
	KindBytes
	KindBool
	KindJSON
	KindVector
	// kindAbsent marks a layout slot the row does not carry. It exists
	// in memory only: a stored record lists the fields it carries.
	kindAbsent byte = 0xff
)

// AppendValue appends the encoding of v (kind byte, then payload).
func AppendValue(dst []byte, v *apiv1.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case nil:
		return append(dst, KindUnset), nil
	case *apiv1.Value_NullValue:
		return AppendNull(dst), nil
	case *apiv1.Value_Int64Value:
		return AppendInt64(dst, k.Int64Value), nil
	case *apiv1.Value_Uint64Value:
		return AppendUint64(dst, k.Uint64Value), nil
	case *apiv1.Value_DoubleValue:
		return AppendDouble(dst, k.DoubleValue), nil
	case *apiv1.Value_StringValue:
		if !utf8.ValidString(k.StringValue) {
			return nil, errors.New("string value is not valid UTF-8")
		}
		return AppendString(dst, k.StringValue), nil
	case *apiv1.Value_BytesValue:
		return AppendBytes(dst, k.BytesValue), nil
	case *apiv1.Value_BoolValue:
		b := byte(0)
		if k.BoolValue {
			b = 1
		}
		return append(dst, KindBool, b), nil
	case *apiv1.Value_JsonValue:
		if !utf8.ValidString(k.JsonValue) {
			return nil, errors.New("json value is not valid UTF-8")
		}
		return AppendJSON(dst, k.JsonValue), nil
	case *apiv1.Value_VectorValue:
		vals := k.VectorValue.GetValues()
		dst = binary.AppendUvarint(append(dst, KindVector), uint64(len(vals)))
		for _, x := range vals {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
		}
		return dst, nil
	}
	return nil, fmt.Errorf("unknown value kind %T", v.GetKind())
}

// The value encoders below are the one encoding of E45/E60: AppendValue
// uses them, and so does a caller (normalize) that builds encoded rows
// (E96) without building Values first. Each appends one slot.

// AppendAbsent appends the slot of a layout field the row does not carry.
func AppendAbsent(dst []byte) []byte { return append(dst, kindAbsent) }

// AppendNull appends a null value.
func AppendNull(dst []byte) []byte { return append(dst, KindNull) }

// AppendInt64 appends an int64 value.
func AppendInt64(dst []byte, x int64) []byte {
	return binary.AppendVarint(append(dst, KindInt64), x)
}

// AppendUint64 appends a uint64 value.
func AppendUint64(dst []byte, x uint64) []byte {
	return binary.AppendUvarint(append(dst, KindUint64), x)
}

// AppendDouble appends a double value.
func AppendDouble(dst []byte, x float64) []byte {
	return binary.LittleEndian.AppendUint64(append(dst, KindDouble), math.Float64bits(x))
}

// AppendString appends a string value (the caller's text; the emulator
// checks UTF-8 when it admits the row).
func AppendString(dst []byte, s string) []byte { return appendString(append(dst, KindString), s) }

// AppendJSON appends a JSON value.
func AppendJSON(dst []byte, s string) []byte { return appendString(append(dst, KindJSON), s) }

// AppendBytes appends a bytes value.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(append(dst, KindBytes), uint64(len(b)))
	return append(dst, b...)
}

// AppendVectorLE appends a vector value whose components are le: 4 bytes
// each, the little-endian IEEE 754 bits (len(le) a multiple of 4).
func AppendVectorLE(dst, le []byte) []byte {
	dst = binary.AppendUvarint(append(dst, KindVector), uint64(len(le)/4))
	return append(dst, le...)
}

// Encoded sizes of the slots above, for a row's exact-size allocation.

// SizeInt64 is the length of AppendInt64's slot.
func SizeInt64(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return 1 + uvarintLen(ux)
}

// SizeUint64 is the length of AppendUint64's slot.
func SizeUint64(x uint64) int { return 1 + uvarintLen(x) }

// SizeLenPrefixed is the length of a string, JSON or bytes slot of n
// bytes, and of a vector slot of n/4 components.
func SizeLenPrefixed(n int, vector bool) int {
	if vector {
		return 1 + uvarintLen(uint64(n/4)) + n
	}
	return 1 + uvarintLen(uint64(n)) + n
}

// SizeDouble is the length of AppendDouble's slot; SizeNull of
// AppendNull's and AppendAbsent's.
const (
	SizeDouble = 9
	SizeNull   = 1
)

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// ValueLen checks the encoded value at the start of b (bounds, UTF-8 of
// strings and JSON, bool bytes) and returns its length. It reads untrusted
// bytes (stored records) and never panics.
func ValueLen(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, errors.New("missing value kind")
	}
	off := 1
	lenPrefixed := func() (int, error) {
		n, w := binary.Uvarint(b[off:])
		if w <= 0 {
			return 0, errors.New("bad uvarint")
		}
		if n > uint64(len(b)-off-w) {
			return 0, fmt.Errorf("length %d exceeds the %d bytes left", n, len(b)-off-w)
		}
		return off + w + int(n), nil
	}
	switch b[0] {
	case KindUnset, KindNull:
		return 1, nil
	case KindInt64:
		if _, w := binary.Varint(b[1:]); w <= 0 {
			return 0, errors.New("bad varint")
		} else {
			return 1 + w, nil
		}
	case KindUint64:
		if _, w := binary.Uvarint(b[1:]); w <= 0 {
			return 0, errors.New("bad uvarint")
		} else {
			return 1 + w, nil
		}
	case KindDouble:
		if len(b) < 9 {
			return 0, errors.New("short double")
		}
		return 9, nil
	case KindBool:
		if len(b) < 2 {
			return 0, errors.New("short bool")
		}
		if b[1] > 1 {
			return 0, fmt.Errorf("bool byte %d", b[1])
		}
		return 2, nil
	case KindBytes:
		return lenPrefixed()
	case KindString, KindJSON:
		end, err := lenPrefixed()
		if err != nil {
			return 0, err
		}
		_, w := binary.Uvarint(b[1:])
		if !utf8.Valid(b[1+w : end]) {
			if b[0] == KindJSON {
				return 0, errors.New("json value is not valid UTF-8")
			}
			return 0, errors.New("string value is not valid UTF-8")
		}
		return end, nil
	case KindVector:
		n, w := binary.Uvarint(b[1:])
		if w <= 0 {
			return 0, errors.New("bad uvarint")
		}
		if n > uint64(len(b)-1-w)/4 {
			return 0, errors.New("vector length exceeds the record")
		}
		return 1 + w + 4*int(n), nil
	}
	return 0, fmt.Errorf("unknown value kind %d", b[0])
}

// slotLen is the length of the trusted (encoded by this package or checked
// by ValueLen) slot at the start of b.
func slotLen(b []byte) int {
	switch b[0] {
	case KindUnset, KindNull, kindAbsent:
		return 1
	case KindInt64, KindUint64:
		i := 1
		for b[i] >= 0x80 {
			i++
		}
		return i + 1
	case KindDouble:
		return 9
	case KindBool:
		return 2
	case KindVector:
		n, w := binary.Uvarint(b[1:])
		return 1 + w + 4*int(n)
	}
	n, w := binary.Uvarint(b[1:]) // string, bytes, JSON
	return 1 + w + int(n)
}

// EncodeRow appends the compact row of vals (vals[i] is layout slot i's
// value, nil when the row does not carry it).
func EncodeRow(dst []byte, vals []*apiv1.Value) ([]byte, error) {
	var err error
	for _, v := range vals {
		if v == nil {
			dst = append(dst, kindAbsent)
			continue
		}
		if dst, err = AppendValue(dst, v); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// RowBuilder assembles a compact row slot by slot (the storage loader
// copies checked values of a stored record into it).
type RowBuilder struct{ buf []byte }

// Reset starts a new row.
func (b *RowBuilder) Reset() { b.buf = b.buf[:0] }

// Add appends one slot: enc is a value ValueLen accepted.
func (b *RowBuilder) Add(enc []byte) { b.buf = append(b.buf, enc...) }

// Row returns the row built so far in its own exact-size slice.
func (b *RowBuilder) Row() []byte { return append([]byte(nil), b.buf...) }

// slot returns the encoded slot i of row (kindAbsent's single byte when
// the row does not carry it).
func slot(row []byte, i int) []byte {
	off := 0
	for ; i > 0; i-- {
		off += slotLen(row[off:])
	}
	return row[off : off+slotLen(row[off:])]
}

// str aliases b as a string: rows are never modified once built, so the
// string stays valid for as long as anything references it.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decodeSlot materialises slot s as a Value (nil for an absent slot),
// filling sc's values when sc is not nil instead of allocating.
func decodeSlot(s []byte, sc *Scratch) *apiv1.Value {
	if s[0] == kindAbsent {
		return nil
	}
	var v *apiv1.Value
	if sc != nil {
		v = &sc.v
		v.Kind = nil
	} else {
		v = &apiv1.Value{}
	}
	switch s[0] {
	case KindNull:
		if sc != nil {
			sc.null.NullValue = true
			v.Kind = &sc.null
		} else {
			v.Kind = &apiv1.Value_NullValue{NullValue: true}
		}
	case KindInt64:
		x, _ := binary.Varint(s[1:])
		if sc != nil {
			sc.i64.Int64Value = x
			v.Kind = &sc.i64
		} else {
			v.Kind = &apiv1.Value_Int64Value{Int64Value: x}
		}
	case KindUint64:
		x, _ := binary.Uvarint(s[1:])
		if sc != nil {
			sc.u64.Uint64Value = x
			v.Kind = &sc.u64
		} else {
			v.Kind = &apiv1.Value_Uint64Value{Uint64Value: x}
		}
	case KindDouble:
		x := math.Float64frombits(binary.LittleEndian.Uint64(s[1:]))
		if sc != nil {
			sc.f64.DoubleValue = x
			v.Kind = &sc.f64
		} else {
			v.Kind = &apiv1.Value_DoubleValue{DoubleValue: x}
		}
	case KindBool:
		if sc != nil {
			sc.b.BoolValue = s[1] == 1
			v.Kind = &sc.b
		} else {
			v.Kind = &apiv1.Value_BoolValue{BoolValue: s[1] == 1}
		}
	case KindString:
		x := str(payload(s))
		if sc != nil {
			sc.s.StringValue = x
			v.Kind = &sc.s
		} else {
			v.Kind = &apiv1.Value_StringValue{StringValue: x}
		}
	case KindJSON:
		x := str(payload(s))
		if sc != nil {
			sc.j.JsonValue = x
			v.Kind = &sc.j
		} else {
			v.Kind = &apiv1.Value_JsonValue{JsonValue: x}
		}
	case KindBytes:
		// Bytes are copied: a caller may modify a []byte it is handed.
		v.Kind = &apiv1.Value_BytesValue{BytesValue: append([]byte{}, payload(s)...)}
	case KindVector:
		n, w := binary.Uvarint(s[1:])
		raw := s[1+w:]
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		v.Kind = &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: vals}}
	}
	return v
}

// payload is the bytes of a length-prefixed slot (string, JSON, bytes).
func payload(s []byte) []byte {
	n, w := binary.Uvarint(s[1:])
	return s[1+w : 1+w+int(n)]
}

// Scratch holds the Value that Entry.FieldScratch fills in place of a new
// one: a filter or facet scan reads a field of every document without an
// allocation per read.
type Scratch struct {
	v    apiv1.Value
	null apiv1.Value_NullValue
	i64  apiv1.Value_Int64Value
	u64  apiv1.Value_Uint64Value
	f64  apiv1.Value_DoubleValue
	b    apiv1.Value_BoolValue
	s    apiv1.Value_StringValue
	j    apiv1.Value_JsonValue
	// RowView's: bytes and vectors without a copy.
	by  apiv1.Value_BytesValue
	vec apiv1.Value_VectorValue
	fv  apiv1.FloatVector
	f32 []float32
}

// RowView reads an encoded row a caller built with the encoders above
// (E96) as Values, for the per-field checks of E36/E42 to run on them
// unchanged: the Values live in the view's scratch (no allocation per
// row) and are valid until the next View. Strings, JSON and bytes alias
// the row.
type RowView struct {
	sc   []Scratch
	vals []*apiv1.Value
}

// View splits row into n slots (each a value of a known kind or the
// absent mark, in bounds, varints in their shortest form, bools 0 or 1,
// nothing after the last) and returns them as Values (nil for an absent
// slot). It reads untrusted bytes and never panics.
func (rv *RowView) View(row []byte, n int) ([]*apiv1.Value, error) {
	if cap(rv.sc) < n {
		rv.sc = make([]Scratch, n)
		rv.vals = make([]*apiv1.Value, n)
	}
	rv.sc, rv.vals = rv.sc[:n], rv.vals[:n]
	off := 0
	for i := 0; i < n; i++ {
		if off >= len(row) {
			return nil, fmt.Errorf("%d of %d values", i, n)
		}
		l, err := encLen(row[off:])
		if err != nil {
			return nil, fmt.Errorf("value %d: %w", i, err)
		}
		rv.vals[i] = viewSlot(row[off:off+l], &rv.sc[i])
		off += l
	}
	if off != len(row) {
		return nil, fmt.Errorf("%d bytes after the %d values", len(row)-off, n)
	}
	return rv.vals, nil
}

// canonUvarint reads a uvarint in its shortest form (what the encoders
// write, so the row is byte for byte what its values encode to).
func canonUvarint(b []byte) (uint64, int, error) {
	x, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, 0, errors.New("bad uvarint")
	}
	if w > 1 && b[w-1] == 0 {
		return 0, 0, errors.New("varint not in its shortest form")
	}
	return x, w, nil
}

// encLen is the length of the encoded slot at the start of b (len(b) > 0),
// checked as View says. UTF-8 is not checked here: the field checks
// report it (E42) as they do for a Value.
func encLen(b []byte) (int, error) {
	switch b[0] {
	case kindAbsent, KindUnset, KindNull:
		return 1, nil
	case KindInt64, KindUint64:
		_, w, err := canonUvarint(b[1:]) // a varint is a zigzag uvarint
		return 1 + w, err
	case KindDouble:
		if len(b) < 9 {
			return 0, errors.New("short double")
		}
		return 9, nil
	case KindBool:
		if len(b) < 2 || b[1] > 1 {
			return 0, errors.New("bad bool")
		}
		return 2, nil
	case KindString, KindJSON, KindBytes, KindVector:
		n, w, err := canonUvarint(b[1:])
		if err != nil {
			return 0, err
		}
		size := n
		if b[0] == KindVector {
			if n > uint64(len(b))/4 {
				return 0, errors.New("vector length exceeds the row")
			}
			size = 4 * n
		}
		if size > uint64(len(b)-1-w) {
			return 0, fmt.Errorf("length %d exceeds the %d bytes left", size, len(b)-1-w)
		}
		return 1 + w + int(size), nil
	}
	return 0, fmt.Errorf("unknown value kind %d", b[0])
}

// viewSlot is decodeSlot into sc for a checked slot, with bytes aliased
// and a vector's components in sc's buffer.
func viewSlot(s []byte, sc *Scratch) *apiv1.Value {
	switch s[0] {
	case KindUnset:
		sc.v.Kind = nil
		return &sc.v
	case KindBytes:
		sc.v.Kind = &sc.by
		sc.by.BytesValue = payload(s)
		return &sc.v
	case KindVector:
		n, w := binary.Uvarint(s[1:])
		raw := s[1+w:]
		sc.f32 = sc.f32[:0]
		for i := 0; i < int(n); i++ {
			sc.f32 = append(sc.f32, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		sc.fv.Values = sc.f32
		sc.vec.VectorValue = &sc.fv
		sc.v.Kind = &sc.vec
		return &sc.v
	}
	return decodeSlot(s, sc)
}

// UpsertEncoded is Upsert of an encoded row (E96) that View accepted and
// the checks admitted: the entry keeps row itself as its compact row
// (E45), so the caller must not modify it.
func (b *Batch) UpsertEncoded(pk string, commitTs uint64, layout *contract.Layout, row []byte, partition string) bool {
	return b.put(pk, &Entry{Version: commitTs, Layout: layout, Row: row, Partition: partition})
}
