package minicdc

import (
	"unsafe"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Value is one column value of a row image. Variable-size payloads borrow
// the row's bytes (M11): copy what must outlive the callback. The zero
// Value is SQL NULL.
//
// It has the representation of the codec's datum, so a row image decodes
// straight into a []Value without a copy or an allocation. Its methods take
// a pointer: they read the payload in place (the row path calls them per
// value).
type Value value.Datum

// ValueKind says which payload a Value holds.
type ValueKind uint8

// The kinds carry the codec's numbering (checked at compile time below).
const (
	ValueNull          ValueKind = iota // SQL NULL
	ValueInt64                          // signed integers
	ValueUint64                         // unsigned integers
	ValueFloat32                        // FLOAT
	ValueFloat64                        // DOUBLE
	ValueString                         // text in a non-binary charset
	ValueBytes                          // binary strings
	ValueDecimal                        // DECIMAL (text form through AppendText)
	ValueTime                           // DATE, DATETIME, TIMESTAMP
	ValueDuration                       // TIME
	ValueJSON                           // JSON
	ValueEnum                           // ENUM (member name through AppendText)
	ValueSet                            // SET (member names through AppendText)
	ValueBit                            // BIT as an unsigned integer
	ValueYear                           // YEAR as int64
	ValueVectorFloat32                  // VECTOR(FLOAT32): uint32 LE count + LE floats in Bytes
)

func _() {
	// A compile error here means the codec's kinds were renumbered.
	var x [1]struct{}
	_ = x[ValueNull-ValueKind(value.KindNull)]
	_ = x[ValueInt64-ValueKind(value.KindInt64)]
	_ = x[ValueUint64-ValueKind(value.KindUint64)]
	_ = x[ValueFloat32-ValueKind(value.KindFloat32)]
	_ = x[ValueFloat64-ValueKind(value.KindFloat64)]
	_ = x[ValueString-ValueKind(value.KindString)]
	_ = x[ValueBytes-ValueKind(value.KindBytes)]
	_ = x[ValueDecimal-ValueKind(value.KindDecimal)]
	_ = x[ValueTime-ValueKind(value.KindTime)]
	_ = x[ValueDuration-ValueKind(value.KindDuration)]
	_ = x[ValueJSON-ValueKind(value.KindJSON)]
	_ = x[ValueEnum-ValueKind(value.KindEnum)]
	_ = x[ValueSet-ValueKind(value.KindSet)]
	_ = x[ValueBit-ValueKind(value.KindBit)]
	_ = x[ValueYear-ValueKind(value.KindYear)]
	_ = x[ValueVectorFloat32-ValueKind(value.KindVectorFloat32)]
}

func (k ValueKind) String() string { return value.Kind(k).String() }

// Kind reports the value's kind.
func (v *Value) Kind() ValueKind { return ValueKind((*value.Datum)(v).Kind()) }

// IsNull reports SQL NULL.
func (v *Value) IsNull() bool { return (*value.Datum)(v).IsNull() }

// GetInt64 is the payload of ValueInt64 and ValueYear.
func (v *Value) GetInt64() int64 { return (*value.Datum)(v).GetInt64() }

// GetUint64 is the payload of ValueUint64 and ValueBit.
func (v *Value) GetUint64() uint64 { return (*value.Datum)(v).GetUint64() }

// GetFloat64 is the payload of ValueFloat64.
func (v *Value) GetFloat64() float64 { return (*value.Datum)(v).GetFloat64() }

// GetFloat32 is the payload of ValueFloat32.
func (v *Value) GetFloat32() float32 { return (*value.Datum)(v).GetFloat32() }

// GetBytes is the borrowed payload of strings, bytes, JSON and vectors.
func (v *Value) GetBytes() []byte { return (*value.Datum)(v).GetBytes() }

// AppendText appends the canonical text form (as TiDB prints the value)
// to dst.
func (v *Value) AppendText(dst []byte) ([]byte, error) { return (*value.Datum)(v).AppendText(dst) }

func (v *Value) String() string { return (*value.Datum)(v).String() }

// ValuesOf views decoded datums as Values (no copy).
func ValuesOf(ds []value.Datum) []Value {
	if ds == nil {
		return nil
	}
	return unsafe.Slice((*Value)(unsafe.SliceData(ds)), cap(ds))[:len(ds)]
}

// datumsOf is ValuesOf's inverse.
func datumsOf(vs []Value) []value.Datum {
	if vs == nil {
		return nil
	}
	return unsafe.Slice((*value.Datum)(unsafe.SliceData(vs)), cap(vs))[:len(vs)]
}
