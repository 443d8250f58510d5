package tablecodec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// Meta structure type flags, written as full 8-byte big-endian integers
// after the encoded structure name (rule K19).
const (
	StringData   uint64 = 's'
	HashMeta     uint64 = 'H'
	HashData     uint64 = 'h'
	ListMeta     uint64 = 'L'
	ListData     uint64 = 'l'
	metaDBs             = "DBs"
	metaDBPre           = "DB:"
	metaTablePre        = "Table:"
)

// EncodeStringDataKey appends m + EncodeBytes(name) + u64('s').
func EncodeStringDataKey(b []byte, name string) []byte {
	b = codec.EncodeBytes(append(b, MetaPrefix), []byte(name))
	return binary.BigEndian.AppendUint64(b, StringData)
}

// EncodeHashDataKey appends m + EncodeBytes(name) + u64('h') +
// EncodeBytes(field) (rule K20).
func EncodeHashDataKey(b []byte, name string, field []byte) []byte {
	return codec.EncodeBytes(EncodeHashDataPrefix(b, name), field)
}

// EncodeHashDataPrefix appends the scan prefix of every field of a hash.
func EncodeHashDataPrefix(b []byte, name string) []byte {
	b = codec.EncodeBytes(append(b, MetaPrefix), []byte(name))
	return binary.BigEndian.AppendUint64(b, HashData)
}

// EncodeHashMetaKey appends the (pre-5.2) hash meta key.
func EncodeHashMetaKey(b []byte, name string) []byte {
	b = codec.EncodeBytes(append(b, MetaPrefix), []byte(name))
	return binary.BigEndian.AppendUint64(b, HashMeta)
}

// EncodeListMetaKey appends m + EncodeBytes(name) + u64('L').
func EncodeListMetaKey(b []byte, name string) []byte {
	b = codec.EncodeBytes(append(b, MetaPrefix), []byte(name))
	return binary.BigEndian.AppendUint64(b, ListMeta)
}

// EncodeListDataKey appends m + EncodeBytes(name) + u64('l') + int(index).
func EncodeListDataKey(b []byte, name string, index int64) []byte {
	b = codec.EncodeBytes(append(b, MetaPrefix), []byte(name))
	b = binary.BigEndian.AppendUint64(b, ListData)
	return codec.EncodeInt(b, index)
}

// DBField returns "DB:<id>".
func DBField(dbID int64) []byte { return strconv.AppendInt([]byte(metaDBPre), dbID, 10) }

// TableField returns "Table:<id>".
func TableField(tableID int64) []byte {
	return strconv.AppendInt([]byte(metaTablePre), tableID, 10)
}

// EncodeDBKey appends the meta key of a database's DBInfo:
// hash "DBs", field "DB:<id>" (rule K21).
func EncodeDBKey(b []byte, dbID int64) []byte {
	return EncodeHashDataKey(b, metaDBs, DBField(dbID))
}

// EncodeDBsPrefix appends the scan prefix of every DBInfo.
func EncodeDBsPrefix(b []byte) []byte { return EncodeHashDataPrefix(b, metaDBs) }

// EncodeTableKey appends the meta key of a table's TableInfo: hash
// "DB:<dbID>", field "Table:<tableID>".
func EncodeTableKey(b []byte, dbID, tableID int64) []byte {
	return EncodeHashDataKey(b, string(DBField(dbID)), TableField(tableID))
}

// EncodeDBTablesPrefix appends the scan prefix of every field of the
// database's hash (tables and auto-id fields).
func EncodeDBTablesPrefix(b []byte, dbID int64) []byte {
	return EncodeHashDataPrefix(b, string(DBField(dbID)))
}

// EncodeJobHistoryKey appends the legacy DDLJobHistory hash key of a job:
// the field is the 8-byte big-endian job id (not sign-flipped).
func EncodeJobHistoryKey(b []byte, jobID int64) []byte {
	return EncodeHashDataKey(b, "DDLJobHistory", binary.BigEndian.AppendUint64(nil, uint64(jobID)))
}

// MetaKey is a parsed meta key.
type MetaKey struct {
	// Name is the structure name (e.g. "DBs", "DB:2").
	Name []byte
	// Type is the structure type flag ('s', 'h', 'H', 'L', 'l').
	Type uint64
	// Field is the hash field for 'h' keys.
	Field []byte
	// Index is the list index for 'l' keys.
	Index int64
}

// DecodeMetaKey parses a meta key without keyspace prefix (rule K22). A
// hash-data key with nothing after the type flag is a scan prefix and is
// reported as an error.
func DecodeMetaKey(key []byte) (MetaKey, error) {
	var mk MetaKey
	if len(key) == 0 || key[0] != MetaPrefix {
		return mk, keyErr(key, 0, "not a meta key (want prefix 'm')")
	}
	rest, name, err := codec.DecodeBytes(key[1:], nil)
	if err != nil {
		return mk, keyErr(key, 1, "meta key name: %v", err)
	}
	mk.Name = name
	off := len(key) - len(rest)
	if len(rest) < 8 {
		return mk, keyErr(key, off, "meta key type flag needs 8 bytes, have %d", len(rest))
	}
	mk.Type = binary.BigEndian.Uint64(rest)
	rest = rest[8:]
	off += 8
	switch mk.Type {
	case StringData, HashMeta, ListMeta:
		if len(rest) != 0 {
			return mk, keyErr(key, off, "%d unexpected bytes after type flag %q", len(rest), rune(mk.Type))
		}
	case HashData:
		r, field, err := codec.DecodeBytes(rest, nil)
		if err != nil {
			return mk, keyErr(key, off, "hash field: %v", err)
		}
		if len(r) != 0 {
			return mk, keyErr(key, len(key)-len(r), "%d unexpected bytes after hash field", len(r))
		}
		mk.Field = field
	case ListData:
		r, idx, err := codec.DecodeInt(rest)
		if err != nil || len(r) != 0 {
			return mk, keyErr(key, off, "list index must be exactly 8 bytes, have %d", len(rest))
		}
		mk.Index = idx
	default:
		return mk, keyErr(key, off-8, "unknown meta type flag 0x%x", mk.Type)
	}
	return mk, nil
}

// ParseDBName parses "DB:<id>".
func ParseDBName(b []byte) (int64, error) { return parseIDField(b, metaDBPre) }

// ParseTableField parses "Table:<id>".
func ParseTableField(b []byte) (int64, error) { return parseIDField(b, metaTablePre) }

func parseIDField(b []byte, prefix string) (int64, error) {
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return 0, fmt.Errorf("tablecodec: %q does not start with %q", b, prefix)
	}
	id, err := strconv.ParseInt(string(b[len(prefix):]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("tablecodec: bad id in %q: %v", b, err)
	}
	return id, nil
}
