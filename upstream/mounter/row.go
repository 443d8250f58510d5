// Package mounter turns raw KV entries plus the TableInfo valid at
// commit_ts-1 into row changes: insert, update (put with old value) or
// delete, with lazily decoded, borrowed row images.
//
// Seeded by the lead so other packages can name these types; the owner of the
// package fills in the representation and keeps the exported names.
package mounter

// RowType classifies a row change.
type RowType uint8

const (
	RowTypeUnknown RowType = iota
	RowTypeInsert
	RowTypeUpdate
	RowTypeDelete
)

func (t RowType) String() string {
	switch t {
	case RowTypeInsert:
		return "insert"
	case RowTypeUpdate:
		return "update"
	case RowTypeDelete:
		return "delete"
	default:
		return "unknown"
	}
}

// Row is a borrowed, lazily decoded row image: valid only during the callback
// that received it. The zero Row is absent (the PreRow of an insert, the Row
// of a delete).
type Row struct {
	present bool
}

// IsEmpty reports whether the image is absent.
func (r Row) IsEmpty() bool { return !r.present }
