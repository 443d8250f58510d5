// Package kvevent holds the raw KV change types that cross the seam between a
// KV source (the EventFeed log puller or the in-process fake) and its
// consumers (the Mini-CDC runtime, the mounter, the schema store's DDL job
// reader). It has no logic beyond small classification helpers.
package kvevent

import "fmt"

// OpType says what a raw entry carries.
type OpType uint8

const (
	OpTypeUnknown OpType = iota
	// OpTypePut is a committed write (insert or update) of Key with Value.
	OpTypePut
	// OpTypeDelete is a committed delete of Key.
	OpTypeDelete
)

func (o OpType) String() string {
	switch o {
	case OpTypePut:
		return "put"
	case OpTypeDelete:
		return "delete"
	default:
		return fmt.Sprintf("op(%d)", uint8(o))
	}
}

// Span is a key range [StartKey, EndKey) in comparable (memcomparable
// EncodeBytes) form, as used by region boundaries and CDC requests. An empty
// EndKey means +infinity.
type Span struct {
	StartKey []byte
	EndKey   []byte
}

// RawKVEntry is one committed change of one key, as a KV source delivers it.
//
// Ownership: Key, Value and OldValue are borrowed for the duration of the
// consume call; a consumer that keeps them beyond that must copy them.
type RawKVEntry struct {
	OpType OpType
	// Key is the raw TiDB key (no TiKV 'z' prefix, not comparable-encoded);
	// a keyspace prefix, when present, is kept.
	Key []byte
	// Value is the row value for puts; empty for deletes.
	Value []byte
	// OldValue is the previous value of Key when the subscription asked for
	// old values and the key existed before this transaction.
	OldValue []byte
	StartTs  uint64
	// CRTs is the commit ts.
	CRTs     uint64
	RegionID uint64
}

// IsUpdate reports whether the entry is a put over an existing value, as far
// as the old value tells.
func (e *RawKVEntry) IsUpdate() bool {
	return e.OpType == OpTypePut && len(e.OldValue) > 0
}

func (e *RawKVEntry) String() string {
	return fmt.Sprintf("%s key=%x start_ts=%d commit_ts=%d region=%d value_len=%d old_len=%d",
		e.OpType, e.Key, e.StartTs, e.CRTs, e.RegionID, len(e.Value), len(e.OldValue))
}
