package value

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Binary JSON type codes (TiDB flavour of MySQL's format).
const (
	JSONTypeCodeObject    byte = 0x01
	JSONTypeCodeArray     byte = 0x03
	JSONTypeCodeLiteral   byte = 0x04
	JSONTypeCodeInt64     byte = 0x09
	JSONTypeCodeUint64    byte = 0x0a
	JSONTypeCodeFloat64   byte = 0x0b
	JSONTypeCodeString    byte = 0x0c
	JSONTypeCodeOpaque    byte = 0x0d
	JSONTypeCodeDate      byte = 0x0e
	JSONTypeCodeDatetime  byte = 0x0f
	JSONTypeCodeTimestamp byte = 0x10
	JSONTypeCodeDuration  byte = 0x11
)

// JSON literal bytes.
const (
	JSONLiteralNull  byte = 0x00
	JSONLiteralTrue  byte = 0x01
	JSONLiteralFalse byte = 0x02
)

// MaxJSONDepth is the deepest nesting TiDB accepts.
const MaxJSONDepth = 100

const (
	jsonHeaderSize     = 8 // element count + total size
	jsonKeyEntrySize   = 6 // uint32 offset + uint16 length
	jsonValueEntrySize = 5 // type code + uint32 offset/inlined literal
)

// BinaryJSON is a view over one binary JSON value: its type code and value
// bytes (borrowed).
type BinaryJSON struct {
	TypeCode byte
	Value    []byte
}

// JSONOpaque is an opaque JSON value: a MySQL field type plus raw bytes.
type JSONOpaque struct {
	Type byte
	Data []byte
}

// BinaryJSONFromTyped splits "type code + value" bytes (the form used in
// datums and row cells) and checks the value's declared length fits. Extra
// trailing bytes are not part of the value and are ignored.
func BinaryJSONFromTyped(b []byte) (BinaryJSON, error) {
	if len(b) == 0 {
		return BinaryJSON{}, fmt.Errorf("json: empty input, expected a type code at offset 0")
	}
	n, err := JSONValueLen(b[0], b[1:])
	if err != nil {
		return BinaryJSON{}, err
	}
	return BinaryJSON{TypeCode: b[0], Value: b[1 : 1+n]}, nil
}

// JSONValueLen returns the byte length of a value of type code tc at the
// front of v (the "peek" rule), checking it fits.
func JSONValueLen(tc byte, v []byte) (int, error) {
	need := 0
	switch tc {
	case JSONTypeCodeLiteral:
		need = 1
	case JSONTypeCodeInt64, JSONTypeCodeUint64, JSONTypeCodeFloat64,
		JSONTypeCodeDate, JSONTypeCodeDatetime, JSONTypeCodeTimestamp:
		need = 8
	case JSONTypeCodeDuration:
		need = 12
	case JSONTypeCodeString:
		l, w := binary.Uvarint(v)
		if w <= 0 {
			return 0, fmt.Errorf("json: bad string length varint at value offset 0")
		}
		if l > uint64(len(v)-w) {
			return 0, fmt.Errorf("json: string of %d bytes at value offset %d exceeds %d remaining", l, w, len(v)-w)
		}
		return w + int(l), nil
	case JSONTypeCodeOpaque:
		if len(v) < 1 {
			return 0, fmt.Errorf("json: opaque value truncated at offset 0 (need field type)")
		}
		l, w := binary.Uvarint(v[1:])
		if w <= 0 {
			return 0, fmt.Errorf("json: bad opaque length varint at value offset 1")
		}
		if l > uint64(len(v)-1-w) {
			return 0, fmt.Errorf("json: opaque of %d bytes at value offset %d exceeds %d remaining", l, 1+w, len(v)-1-w)
		}
		return 1 + w + int(l), nil
	case JSONTypeCodeObject, JSONTypeCodeArray:
		if len(v) < jsonHeaderSize {
			return 0, fmt.Errorf("json: container header needs %d bytes, have %d", jsonHeaderSize, len(v))
		}
		size := binary.LittleEndian.Uint32(v[4:])
		if size < jsonHeaderSize || uint64(size) > uint64(len(v)) {
			return 0, fmt.Errorf("json: container size %d outside [%d, %d]", size, jsonHeaderSize, len(v))
		}
		return int(size), nil
	default:
		return 0, fmt.Errorf("json: unknown type code 0x%02x", tc)
	}
	if len(v) < need {
		return 0, fmt.Errorf("json: type 0x%02x needs %d value bytes, have %d", tc, need, len(v))
	}
	return need, nil
}

// AppendTyped appends type code + value (the datum/row cell form).
func (j BinaryJSON) AppendTyped(dst []byte) []byte {
	return append(append(dst, j.TypeCode), j.Value...)
}

// String renders canonical JSON text; malformed input renders as an error
// marker (use AppendText for the error).
func (j BinaryJSON) String() string {
	out, err := j.AppendText(nil)
	if err != nil {
		return "<invalid json: " + err.Error() + ">"
	}
	return string(out)
}

// AppendText appends TiDB's canonical JSON text (spec rule V9): object keys
// in stored (sorted) order, ", " between elements, ": " after keys.
func (j BinaryJSON) AppendText(dst []byte) ([]byte, error) {
	return appendJSONText(dst, j.TypeCode, j.Value, 0)
}

func appendJSONText(dst []byte, tc byte, v []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return dst, fmt.Errorf("json: nesting deeper than %d", MaxJSONDepth)
	}
	n, err := JSONValueLen(tc, v)
	if err != nil {
		return dst, err
	}
	v = v[:n]
	switch tc {
	case JSONTypeCodeLiteral:
		switch v[0] {
		case JSONLiteralNull:
			return append(dst, "null"...), nil
		case JSONLiteralTrue:
			return append(dst, "true"...), nil
		case JSONLiteralFalse:
			return append(dst, "false"...), nil
		}
		return dst, fmt.Errorf("json: unknown literal 0x%02x", v[0])
	case JSONTypeCodeInt64:
		return strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(v)), 10), nil
	case JSONTypeCodeUint64:
		return strconv.AppendUint(dst, binary.LittleEndian.Uint64(v), 10), nil
	case JSONTypeCodeFloat64:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, fmt.Errorf("json: float64 %v is not valid JSON", f)
		}
		return appendJSONFloat(dst, f), nil
	case JSONTypeCodeString:
		l, w := binary.Uvarint(v)
		return appendJSONString(dst, v[w:w+int(l)]), nil
	case JSONTypeCodeOpaque:
		_, w := binary.Uvarint(v[1:])
		data := v[1+w:]
		var tmp []byte
		tmp = append(tmp, "base64:type"...)
		tmp = strconv.AppendUint(tmp, uint64(v[0]), 10)
		tmp = append(tmp, ':')
		tmp = base64.StdEncoding.AppendEncode(tmp, data)
		return appendJSONString(dst, tmp), nil
	case JSONTypeCodeDate, JSONTypeCodeDatetime, JSONTypeCodeTimestamp:
		t := jsonTime(tc, binary.LittleEndian.Uint64(v))
		if err := t.Validate(); err != nil {
			return dst, err
		}
		dst = append(dst, '"')
		dst = t.AppendText(dst)
		return append(dst, '"'), nil
	case JSONTypeCodeDuration:
		d := Duration{Nanos: int64(binary.LittleEndian.Uint64(v)), Fsp: int(binary.LittleEndian.Uint32(v[8:]))}
		if err := d.Validate(); err != nil {
			return dst, err
		}
		d.Fsp = MaxFsp // JSON text always shows 6 fraction digits
		dst = append(dst, '"')
		dst = d.AppendText(dst)
		return append(dst, '"'), nil
	case JSONTypeCodeObject, JSONTypeCodeArray:
		return appendJSONContainer(dst, tc, v, depth)
	}
	return dst, fmt.Errorf("json: unknown type code 0x%02x", tc)
}

// jsonTime decodes an embedded CoreTime. DATE renders without a time part;
// DATETIME/TIMESTAMP always render with 6 fraction digits, as TiDB prints
// them (fsp is not stored in JSON), spec rule V9.
func jsonTime(tc byte, core uint64) Time {
	tp := mysql.TypeDatetime
	switch tc {
	case JSONTypeCodeDate:
		tp = mysql.TypeDate
	case JSONTypeCodeTimestamp:
		tp = mysql.TypeTimestamp
	}
	t := TimeFromCoreTime(core, tp, MaxFsp)
	if tp == mysql.TypeDate {
		t.Fsp = 0
	}
	return t
}

func appendJSONContainer(dst []byte, tc byte, v []byte, depth int) ([]byte, error) {
	count := uint64(binary.LittleEndian.Uint32(v))
	isObj := tc == JSONTypeCodeObject
	entry := uint64(jsonValueEntrySize)
	if isObj {
		entry += jsonKeyEntrySize
	}
	if jsonHeaderSize+count*entry > uint64(len(v)) {
		return dst, fmt.Errorf("json: %d elements need %d header bytes, container has %d", count, jsonHeaderSize+count*entry, len(v))
	}
	n := int(count)
	valEntries := jsonHeaderSize
	if isObj {
		valEntries += n * jsonKeyEntrySize
	}
	// Keys, then out-of-line values, follow the header back to back in
	// entry order, as TiDB writes them. Requiring increasing,
	// non-overlapping offsets also keeps hostile input (entries pointing
	// back into their own container) from costing exponential time.
	minOff := uint64(valEntries + n*jsonValueEntrySize)
	if isObj {
		for i := 0; i < n; i++ {
			ke := jsonHeaderSize + i*jsonKeyEntrySize
			ko := uint64(binary.LittleEndian.Uint32(v[ke:]))
			kl := uint64(binary.LittleEndian.Uint16(v[ke+4:]))
			if ko < minOff || ko+kl > uint64(len(v)) {
				return dst, fmt.Errorf("json: key %d at offset %d length %d outside [%d, %d)", i, ko, kl, minOff, len(v))
			}
			minOff = ko + kl
		}
		dst = append(dst, '{')
	} else {
		dst = append(dst, '[')
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		if isObj {
			ke := jsonHeaderSize + i*jsonKeyEntrySize
			ko := uint64(binary.LittleEndian.Uint32(v[ke:]))
			kl := uint64(binary.LittleEndian.Uint16(v[ke+4:]))
			dst = appendJSONString(dst, v[ko:ko+kl])
			dst = append(dst, ": "...)
		}
		ve := valEntries + i*jsonValueEntrySize
		etc := v[ve]
		var err error
		if etc == JSONTypeCodeLiteral {
			dst, err = appendJSONText(dst, etc, v[ve+1:ve+2], depth+1)
		} else {
			off := uint64(binary.LittleEndian.Uint32(v[ve+1:]))
			if off < minOff || off >= uint64(len(v)) {
				return dst, fmt.Errorf("json: element %d offset %d outside [%d, %d)", i, off, minOff, len(v))
			}
			l, lerr := JSONValueLen(etc, v[off:])
			if lerr != nil {
				return dst, fmt.Errorf("element %d: %w", i, lerr)
			}
			minOff = off + uint64(l)
			dst, err = appendJSONText(dst, etc, v[off:off+uint64(l)], depth+1)
		}
		if err != nil {
			return dst, fmt.Errorf("element %d: %w", i, err)
		}
	}
	if isObj {
		return append(dst, '}'), nil
	}
	return append(dst, ']'), nil
}

// appendJSONFloat formats a JSON double like TiDB: plain notation with
// shortest digits and at least one fraction digit ("2.0"); exponent
// notation when |f| >= 1e15 or 0 < |f| < 1e-15, without '+' and without a
// leading zero in the exponent (spec rule V9).
func appendJSONFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	if abs == 0 || (abs >= 1e-15 && abs < 1e15) {
		start := len(dst)
		dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
		if bytes.IndexByte(dst[start:], '.') < 0 {
			dst = append(dst, '.', '0')
		}
		return dst
	}
	var tmp [32]byte
	s := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	e := bytes.IndexByte(s, 'e')
	dst = append(dst, s[:e+1]...)
	exp := s[e+1:]
	if exp[0] == '-' {
		dst = append(dst, '-')
	}
	exp = exp[1:] // drop the sign
	if len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	return append(dst, exp...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s: '"' '\\' and control characters escaped
// (\b \f \n \r \t by name, others \u00XX), U+2028/U+2029 escaped, invalid
// UTF-8 replaced by \ufffd, everything else (incl. <>&) verbatim.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028':
			dst = append(dst, `\u2028`...)
		case r == '\u2029':
			dst = append(dst, `\u2029`...)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// ParseJSON parses JSON text into binary JSON. Numbers without fraction or
// exponent become int64, else uint64 when they fit, else float64 (spec rule
// V10). Duplicate object keys keep the last value.
func ParseJSON(text []byte) (BinaryJSON, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return BinaryJSON{}, fmt.Errorf("json: parse: %w", err)
	}
	if dec.More() {
		return BinaryJSON{}, fmt.Errorf("json: trailing data after offset %d", dec.InputOffset())
	}
	return BinaryJSONFromGo(v)
}

// BinaryJSONFromGo encodes a Go value: nil, bool, json.Number, int, int64,
// uint64, float64, string, []any, map[string]any, Time (date types),
// Duration, JSONOpaque.
func BinaryJSONFromGo(v any) (BinaryJSON, error) {
	tc, val, err := encodeJSONValue(v, 0)
	if err != nil {
		return BinaryJSON{}, err
	}
	return BinaryJSON{TypeCode: tc, Value: val}, nil
}

func encodeJSONValue(v any, depth int) (byte, []byte, error) {
	if depth > MaxJSONDepth {
		return 0, nil, fmt.Errorf("json: nesting deeper than %d", MaxJSONDepth)
	}
	le := binary.LittleEndian
	switch x := v.(type) {
	case nil:
		return JSONTypeCodeLiteral, []byte{JSONLiteralNull}, nil
	case bool:
		if x {
			return JSONTypeCodeLiteral, []byte{JSONLiteralTrue}, nil
		}
		return JSONTypeCodeLiteral, []byte{JSONLiteralFalse}, nil
	case json.Number:
		s := string(x)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return JSONTypeCodeInt64, le.AppendUint64(nil, uint64(i)), nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return JSONTypeCodeUint64, le.AppendUint64(nil, u), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("json: number %q: %w", s, err)
		}
		return encodeJSONValue(f, depth)
	case int:
		return JSONTypeCodeInt64, le.AppendUint64(nil, uint64(int64(x))), nil
	case int64:
		return JSONTypeCodeInt64, le.AppendUint64(nil, uint64(x)), nil
	case uint64:
		return JSONTypeCodeUint64, le.AppendUint64(nil, x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, nil, fmt.Errorf("json: float64 %v is not valid JSON", x)
		}
		return JSONTypeCodeFloat64, le.AppendUint64(nil, math.Float64bits(x)), nil
	case string:
		out := binary.AppendUvarint(nil, uint64(len(x)))
		return JSONTypeCodeString, append(out, x...), nil
	case JSONOpaque:
		out := binary.AppendUvarint([]byte{x.Type}, uint64(len(x.Data)))
		return JSONTypeCodeOpaque, append(out, x.Data...), nil
	case Time:
		tc := JSONTypeCodeDatetime
		switch x.Type {
		case mysql.TypeDate:
			tc = JSONTypeCodeDate
		case mysql.TypeTimestamp:
			tc = JSONTypeCodeTimestamp
		}
		return tc, le.AppendUint64(nil, x.CoreTime()), nil
	case Duration:
		out := le.AppendUint64(nil, uint64(x.Nanos))
		return JSONTypeCodeDuration, le.AppendUint32(out, uint32(x.Fsp)), nil
	case []any:
		return encodeJSONContainer(nil, x, depth)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if len(k) > math.MaxUint16 {
				return 0, nil, fmt.Errorf("json: object key of %d bytes exceeds %d", len(k), math.MaxUint16)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys) // Go string order is raw byte order
		vals := make([]any, len(keys))
		for i, k := range keys {
			vals[i] = x[k]
		}
		return encodeJSONContainer(keys, vals, depth)
	}
	return 0, nil, fmt.Errorf("json: cannot encode Go value of type %T", v)
}

// encodeJSONContainer lays out an object (keys != nil) or array.
func encodeJSONContainer(keys []string, vals []any, depth int) (byte, []byte, error) {
	le := binary.LittleEndian
	n := len(vals)
	isObj := keys != nil
	tc := JSONTypeCodeArray
	hdr := jsonHeaderSize + n*jsonValueEntrySize
	if isObj {
		tc = JSONTypeCodeObject
		hdr += n * jsonKeyEntrySize
	}
	buf := make([]byte, hdr, hdr+16*n)
	le.PutUint32(buf, uint32(n))
	if isObj {
		for i, k := range keys {
			le.PutUint32(buf[jsonHeaderSize+i*jsonKeyEntrySize:], uint32(len(buf)))
			le.PutUint16(buf[jsonHeaderSize+i*jsonKeyEntrySize+4:], uint16(len(k)))
			buf = append(buf, k...)
		}
	}
	valEntries := jsonHeaderSize
	if isObj {
		valEntries += n * jsonKeyEntrySize
	}
	for i, v := range vals {
		etc, ev, err := encodeJSONValue(v, depth+1)
		if err != nil {
			return 0, nil, err
		}
		e := valEntries + i*jsonValueEntrySize
		buf[e] = etc
		if etc == JSONTypeCodeLiteral {
			buf[e+1] = ev[0]
			continue
		}
		le.PutUint32(buf[e+1:], uint32(len(buf)))
		buf = append(buf, ev...)
	}
	if uint64(len(buf)) > math.MaxUint32 {
		return 0, nil, fmt.Errorf("json: container of %d bytes too large", len(buf))
	}
	le.PutUint32(buf[4:], uint32(len(buf)))
	return tc, buf, nil
}
