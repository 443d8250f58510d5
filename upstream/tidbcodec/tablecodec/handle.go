// Package tablecodec builds and parses TiDB's table keys (pkg/tablecodec)
// and meta keys (pkg/structure): record keys with int or common handles,
// index keys, the record span of a table in raw and comparable form,
// API-v2 keyspace prefixes, and meta hash/string/list keys. Rules are in
// specs/tidbcodec-keys.md (K12-K24).
package tablecodec

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Handle identifies a row: an int64 (PK-is-handle tables and _tidb_rowid)
// or the key-form encoding of the clustered primary key columns (common
// handle). A decoded common Handle borrows the key bytes; Clone copies.
type Handle struct {
	common []byte // nil for int handles; else >= 9 bytes incl. padding
	i      int64
}

// NewIntHandle returns an int handle.
func NewIntHandle(v int64) Handle { return Handle{i: v} }

// NewCommonHandle wraps already-encoded common handle bytes (as found after
// "_r" in a record key), checking they are a sequence of key-form datums
// optionally followed by zero padding up to 9 bytes (rule K14).
func NewCommonHandle(encoded []byte) (Handle, error) {
	if err := checkCommonHandle(encoded); err != nil {
		return Handle{}, err
	}
	return Handle{common: encoded}, nil
}

// CommonHandleFromDatums encodes PK column values (already converted to
// their sort keys) as a common handle, zero-padding to 9 bytes.
func CommonHandleFromDatums(datums ...value.Datum) (Handle, error) {
	if len(datums) == 0 {
		return Handle{}, fmt.Errorf("tablecodec: common handle needs at least one column")
	}
	for i := range datums {
		if datums[i].IsNull() {
			return Handle{}, fmt.Errorf("tablecodec: common handle column %d is NULL", i)
		}
	}
	b, err := codec.EncodeKey(nil, datums...)
	if err != nil {
		return Handle{}, err
	}
	for len(b) < 9 {
		b = append(b, 0)
	}
	return Handle{common: b}, nil
}

func checkCommonHandle(b []byte) error {
	if len(b) < 9 {
		return fmt.Errorf("tablecodec: common handle of %d bytes, want at least 9", len(b))
	}
	off := 0
	cols := 0
	for off < len(b) {
		if b[off] == codec.NilFlag {
			// Padding: the rest must be zeros and the handle exactly 9 bytes.
			for j := off; j < len(b); j++ {
				if b[j] != 0 {
					return fmt.Errorf("tablecodec: common handle byte %d is 0x%02x inside zero padding", j, b[j])
				}
			}
			if len(b) != 9 {
				return fmt.Errorf("tablecodec: common handle padded to %d bytes, padding only reaches 9", len(b))
			}
			break
		}
		n, err := codec.PeekLength(b[off:])
		if err != nil {
			return fmt.Errorf("tablecodec: common handle column %d at offset %d: %w", cols, off, err)
		}
		off += n
		cols++
	}
	if cols == 0 {
		return fmt.Errorf("tablecodec: common handle holds no column")
	}
	return nil
}

// IsInt reports whether the handle is an int handle.
func (h Handle) IsInt() bool { return h.common == nil }

// IntValue returns the int handle (0 for common handles).
func (h Handle) IntValue() int64 { return h.i }

// Encoded returns the bytes the handle occupies in a record key: the 8-byte
// comparable int, or the common handle bytes (borrowed).
func (h Handle) Encoded() []byte {
	if h.common != nil {
		return h.common
	}
	return codec.EncodeInt(make([]byte, 0, 8), h.i)
}

// AppendEncoded appends the record-key form of the handle.
func (h Handle) AppendEncoded(b []byte) []byte {
	if h.common != nil {
		return append(b, h.common...)
	}
	return codec.EncodeInt(b, h.i)
}

// Datums decodes the columns of a common handle (allocates).
func (h Handle) Datums() ([]value.Datum, error) {
	if h.common == nil {
		return []value.Datum{value.NewIntDatum(h.i)}, nil
	}
	var out []value.Datum
	b := h.common
	off := 0
	for len(b) > 0 && b[0] != codec.NilFlag {
		rest, d, err := codec.DecodeOne(b)
		if err != nil {
			return nil, fmt.Errorf("tablecodec: common handle column %d at offset %d: %w", len(out), off, err)
		}
		off += len(b) - len(rest)
		b = rest
		out = append(out, d)
	}
	return out, nil
}

// Clone returns a handle owning its bytes.
func (h Handle) Clone() Handle {
	if h.common != nil {
		h.common = bytes.Clone(h.common)
	}
	return h
}

// Equal compares two handles.
func (h Handle) Equal(o Handle) bool {
	if h.IsInt() != o.IsInt() {
		return false
	}
	if h.IsInt() {
		return h.i == o.i
	}
	return bytes.Equal(h.common, o.common)
}

// String renders an int handle as its number and a common handle as
// "{v1, v2}" using the datums' canonical text.
func (h Handle) String() string {
	if h.IsInt() {
		return strconv.FormatInt(h.i, 10)
	}
	ds, err := h.Datums()
	if err != nil {
		return fmt.Sprintf("<invalid common handle %x>", h.common)
	}
	var b []byte
	b = append(b, '{')
	for i := range ds {
		if i > 0 {
			b = append(b, ", "...)
		}
		if ds[i].Kind() == value.KindBytes {
			b = append(b, ds[i].GetBytes()...)
		} else {
			b, _ = ds[i].AppendText(b)
		}
	}
	return string(append(b, '}'))
}
