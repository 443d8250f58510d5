package tablecodec

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Key layout constants (rule K12).
const (
	TablePrefix     byte = 't'
	MetaPrefix      byte = 'm'
	KeyspacePrefix  byte = 'x'
	RawKeyspaceMode byte = 'r'

	// TablePrefixLen is len("t" + 8-byte table id).
	TablePrefixLen = 9
	// RecordPrefixLen is len("t{id}_r").
	RecordPrefixLen = 11
	// IntRecordKeyLen is the length of an int-handle record key.
	IntRecordKeyLen = 19
	// KeyspacePrefixLen is len("x" + 3-byte keyspace id).
	KeyspacePrefixLen = 4
	// MaxKeyspaceID is the largest 24-bit keyspace id.
	MaxKeyspaceID = 0xFFFFFF
	// TempIndexPrefix marks temporary (ingest/merge) index ids.
	TempIndexPrefix int64 = 0x7FFF000000000000
)

// EncodeTablePrefix appends "t" + comparable tableID.
func EncodeTablePrefix(b []byte, tableID int64) []byte {
	return codec.EncodeInt(append(b, TablePrefix), tableID)
}

// EncodeRecordPrefix appends "t{id}_r".
func EncodeRecordPrefix(b []byte, tableID int64) []byte {
	return append(EncodeTablePrefix(b, tableID), '_', 'r')
}

// EncodeIndexPrefix appends "t{id}_i{indexID}".
func EncodeIndexPrefix(b []byte, tableID, indexID int64) []byte {
	return codec.EncodeInt(append(EncodeTablePrefix(b, tableID), '_', 'i'), indexID)
}

// EncodeIntRecordKey appends the record key of an int handle.
func EncodeIntRecordKey(b []byte, tableID, handle int64) []byte {
	return codec.EncodeInt(EncodeRecordPrefix(b, tableID), handle)
}

// EncodeRecordKey appends the record key of any handle.
func EncodeRecordKey(b []byte, tableID int64, h Handle) []byte {
	return h.AppendEncoded(EncodeRecordPrefix(b, tableID))
}

// EncodeIndexKey appends an index key (rule K15): the prefix, the key form
// of the indexed values (already truncated for prefix indexes and turned
// into collation sort keys), then the handle unless the index is unique and
// no indexed value is NULL. Int handles are written with their flag (03).
func EncodeIndexKey(b []byte, tableID, indexID int64, unique bool, values []value.Datum, h Handle) ([]byte, error) {
	b = EncodeIndexPrefix(b, tableID, indexID)
	b, err := codec.EncodeKey(b, values...)
	if err != nil {
		return b, err
	}
	hasNull := false
	for i := range values {
		if values[i].IsNull() {
			hasNull = true
			break
		}
	}
	if unique && !hasNull {
		return b, nil
	}
	if h.IsInt() {
		return codec.EncodeInt(append(b, codec.IntFlag), h.IntValue()), nil
	}
	return append(b, h.common...), nil
}

// KeyError says why bytes are not the key the caller expected.
type KeyError struct {
	Key    []byte
	Offset int
	What   string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("tablecodec: %s at offset %d of key %x", e.What, e.Offset, e.Key)
}

func keyErr(key []byte, off int, format string, args ...any) error {
	return &KeyError{Key: key, Offset: off, What: fmt.Sprintf(format, args...)}
}

// IsRecordKey is TiDB's quick test: long enough, 't', and 'r' at offset 10.
func IsRecordKey(k []byte) bool {
	return len(k) > RecordPrefixLen && k[0] == TablePrefix && k[9] == '_' && k[10] == 'r'
}

// IsIndexKey is the same test with 'i'.
func IsIndexKey(k []byte) bool {
	return len(k) > RecordPrefixLen && k[0] == TablePrefix && k[9] == '_' && k[10] == 'i'
}

// DecodeRecordKey parses a raw record key (no keyspace prefix) into the
// table id and the handle (rule K13). Exactly 8 handle bytes is an int
// handle; anything longer is a common handle, returned as a borrowed
// sub-slice of key and checked to be well-formed. It does not allocate.
func DecodeRecordKey(key []byte) (tableID int64, h Handle, err error) {
	if len(key) < RecordPrefixLen {
		return 0, Handle{}, recordKeyErr(key)
	}
	if key[0] != TablePrefix || key[9] != '_' || key[10] != 'r' {
		return 0, Handle{}, recordKeyErr(key)
	}
	tableID = codec.DecodeCmpUintToInt(binary.BigEndian.Uint64(key[1:9]))
	rest := key[RecordPrefixLen:]
	if len(rest) == 8 {
		return tableID, Handle{i: codec.DecodeCmpUintToInt(binary.BigEndian.Uint64(rest))}, nil
	}
	if len(rest) < 9 {
		return 0, Handle{}, keyErr(key, RecordPrefixLen, "record key handle of %d bytes: neither an 8-byte int handle nor a common handle of at least 9", len(rest))
	}
	if err := checkCommonHandle(rest); err != nil {
		return 0, Handle{}, &KeyError{Key: key, Offset: RecordPrefixLen, What: strings.TrimPrefix(err.Error(), "tablecodec: ")}
	}
	return tableID, Handle{common: rest}, nil
}

// recordKeyErr explains precisely why key is not a record key.
func recordKeyErr(key []byte) error {
	switch {
	case len(key) == 0:
		return keyErr(key, 0, "empty key is not a record key")
	case key[0] == KeyspacePrefix && len(key) > KeyspacePrefixLen:
		return keyErr(key, 0, "key has a keyspace prefix (x + 3 bytes); strip it before decoding the record key")
	case key[0] == MetaPrefix:
		return keyErr(key, 0, "meta key ('m') is not a record key")
	case key[0] != TablePrefix:
		return keyErr(key, 0, "first byte 0x%02x is not the table prefix 't'", key[0])
	case len(key) < RecordPrefixLen:
		return keyErr(key, len(key), "key of %d bytes is shorter than the %d-byte record prefix t{id}_r", len(key), RecordPrefixLen)
	case key[9] != '_':
		return keyErr(key, 9, "expected '_' after the table id, got 0x%02x", key[9])
	case key[10] == 'i':
		return keyErr(key, 10, "index key (t{id}_i) is not a record key")
	default:
		return keyErr(key, 10, "expected 'r' after t{id}_, got 0x%02x", key[10])
	}
}

// DecodeIndexKey parses "t{id}_i{indexID}" and returns the bytes after it
// (the encoded index values and optional handle suffix).
func DecodeIndexKey(key []byte) (tableID, indexID int64, rest []byte, err error) {
	if len(key) < RecordPrefixLen+8 || key[0] != TablePrefix || key[9] != '_' || key[10] != 'i' {
		if len(key) >= RecordPrefixLen && key[0] == TablePrefix && key[9] == '_' && key[10] == 'i' {
			return 0, 0, nil, keyErr(key, RecordPrefixLen, "index key truncated: index id needs 8 bytes, have %d", len(key)-RecordPrefixLen)
		}
		return 0, 0, nil, keyErr(key, 0, "not an index key t{id}_i{index id}")
	}
	tableID = codec.DecodeCmpUintToInt(binary.BigEndian.Uint64(key[1:9]))
	indexID = codec.DecodeCmpUintToInt(binary.BigEndian.Uint64(key[11:19]))
	return tableID, indexID, key[19:], nil
}

// DecodeTableID returns the table id of any "t{id}..." key, stripping a
// keyspace prefix first; 0 when the key is not a table key (like TiDB).
func DecodeTableID(key []byte) int64 {
	if len(key) > KeyspacePrefixLen && key[0] == KeyspacePrefix {
		key = key[KeyspacePrefixLen:]
	}
	if len(key) < TablePrefixLen || key[0] != TablePrefix {
		return 0
	}
	return codec.DecodeCmpUintToInt(binary.BigEndian.Uint64(key[1:9]))
}

// AppendKeyspacePrefix appends 'x' + the 3-byte big-endian keyspace id
// (rule K16). Callers validate the id with ValidateKeyspaceID.
func AppendKeyspacePrefix(b []byte, keyspaceID uint32) []byte {
	return append(b, KeyspacePrefix, byte(keyspaceID>>16), byte(keyspaceID>>8), byte(keyspaceID))
}

// ValidateKeyspaceID checks the id fits in 24 bits.
func ValidateKeyspaceID(id uint32) error {
	if id > MaxKeyspaceID {
		return fmt.Errorf("tablecodec: keyspace id %d exceeds 24 bits (max %d)", id, MaxKeyspaceID)
	}
	return nil
}

// RemoveKeyspacePrefix splits a txn-mode keyspace prefix off key; ok is
// false (and rest == key) when the key has none.
func RemoveKeyspacePrefix(key []byte) (keyspaceID uint32, rest []byte, ok bool) {
	if len(key) > KeyspacePrefixLen && key[0] == KeyspacePrefix {
		return uint32(key[1])<<16 | uint32(key[2])<<8 | uint32(key[3]), key[KeyspacePrefixLen:], true
	}
	return 0, key, false
}

// PrefixNext returns the smallest key greater than every key with prefix k:
// increment the last byte with carry; all 0xFF → k + 0x00 (rule K17).
func PrefixNext(k []byte) []byte {
	buf := make([]byte, len(k))
	copy(buf, k)
	i := len(buf) - 1
	for ; i >= 0; i-- {
		buf[i]++
		if buf[i] != 0 {
			break
		}
	}
	if i == -1 {
		copy(buf, k)
		buf = append(buf, 0)
	}
	return buf
}

// RawTableRecordRange returns the raw record range [t{id}_r, t{id}_s),
// with the keyspace prefix when nextGen (API v2) is set.
func RawTableRecordRange(keyspaceID uint32, nextGen bool, tableID int64) (start, end []byte) {
	var p []byte
	if nextGen {
		p = AppendKeyspacePrefix(make([]byte, 0, KeyspacePrefixLen+RecordPrefixLen), keyspaceID)
	}
	start = EncodeRecordPrefix(p, tableID)
	end = append(append([]byte(nil), start[:len(start)-1]...), 'r'+1)
	return start, end
}

// TableRecordSpan returns the record span of a table in the comparable
// (EncodeBytes) form used by region boundaries and ChangeData requests
// (rule K18). keyspaceID is only used when nextGen is set and must have been
// checked with ValidateKeyspaceID (higher bits are dropped).
func TableRecordSpan(keyspaceID uint32, nextGen bool, tableID int64) kvevent.Span {
	start, end := RawTableRecordRange(keyspaceID, nextGen, tableID)
	return kvevent.Span{
		StartKey: codec.EncodeBytes(nil, start),
		EndKey:   codec.EncodeBytes(nil, end),
	}
}

// ComparableKey returns EncodeBytes(key).
func ComparableKey(key []byte) []byte { return codec.EncodeBytes(nil, key) }

// DecodeComparableKey reverses ComparableKey into buf (no allocation when
// buf has room) and requires the whole input to be consumed.
func DecodeComparableKey(comparable []byte, buf []byte) ([]byte, error) {
	rest, raw, err := codec.DecodeBytes(comparable, buf)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("tablecodec: %d trailing bytes after comparable key at offset %d", len(rest), len(comparable)-len(rest))
	}
	return raw, nil
}
