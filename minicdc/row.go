package minicdc

import "github.com/searchfabric/sfemu/upstream/mounter"

// RowType classifies a row change.
type RowType uint8

const (
	RowTypeUnknown RowType = iota
	RowTypeInsert
	RowTypeUpdate
	RowTypeDelete
)

func _() {
	// A compile error here means the decoder's row types were renumbered.
	var x [1]struct{}
	_ = x[RowTypeUnknown-RowType(mounter.RowTypeUnknown)]
	_ = x[RowTypeInsert-RowType(mounter.RowTypeInsert)]
	_ = x[RowTypeUpdate-RowType(mounter.RowTypeUpdate)]
	_ = x[RowTypeDelete-RowType(mounter.RowTypeDelete)]
}

func (t RowType) String() string { return mounter.RowType(t).String() }

// Row is a borrowed, lazily decoded row image (M11): valid only during the
// callback that received it. The zero Row is absent (the PreRow of an
// insert, the Row of a delete).
type Row struct{ r mounter.Row }

// NewRow wraps a decoder's row image.
func NewRow(r mounter.Row) Row { return Row{r: r} }

// IsEmpty reports whether the image is absent.
func (r Row) IsEmpty() bool { return r.r.IsEmpty() }

// HandleOnly reports an image that holds only the handle columns (a
// delete without old value).
func (r Row) HandleOnly() bool { return r.r.HandleOnly() }

// ColumnAt returns the value of the column at offset in the TableInfo the
// row was decoded with.
func (r Row) ColumnAt(offset int) (Value, error) {
	d, err := r.r.ColumnAt(offset)
	return Value(d), err
}

// Values decodes the whole image into dst (grown to the column count), by
// column offset, in one pass.
func (r Row) Values(dst []Value) ([]Value, error) {
	ds, err := r.r.Datums(datumsOf(dst))
	return ValuesOf(ds), err
}

func (r Row) String() string { return r.r.String() }
