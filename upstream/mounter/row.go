// Package mounter turns raw KV entries plus the TableInfo valid at
// commit_ts-1 into row changes: insert, update (put with old value) or
// delete, with lazily decoded, borrowed row images. Rules: specs/mounter.md.
package mounter

import (
	"fmt"
	"strings"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

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

// emptyRowV2 is the v2 encoding of a row without columns; handle-only
// images point their view at it.
var emptyRowV2 = []byte{rowcodec.CodecVerV2, 0, 0, 0, 0, 0}

// image is one reusable row image of a Mounter.
type image struct {
	m          *Mounter
	view       rowcodec.RowView
	handleOnly bool
	// Full-decode scratch, indexed like tableDecoder.sorted.
	datums []value.Datum
	states []rowcodec.CellState
}

func (img *image) reset(val []byte, handleOnly bool) error {
	img.handleOnly = handleOnly
	if handleOnly {
		return img.view.Reset(emptyRowV2)
	}
	return img.view.Reset(val)
}

// Row is a borrowed, lazily decoded row image: valid only until the
// Mounter that produced it decodes the next entry (then every method
// returns ErrStaleRow). The zero Row is absent (the PreRow of an insert,
// the Row of a delete).
type Row struct {
	img *image
	gen uint64
}

// IsEmpty reports whether the image is absent.
func (r Row) IsEmpty() bool { return r.img == nil }

func (r Row) live() (*image, *tableDecoder, error) {
	if r.img == nil {
		return nil, nil, fmt.Errorf("mounter: empty row image")
	}
	if r.gen != r.img.m.gen {
		return nil, nil, ErrStaleRow
	}
	return r.img, r.img.m.td, nil
}

// HandleOnly reports whether only the handle columns are known (a delete
// without old value).
func (r Row) HandleOnly() bool { return r.img != nil && r.img.handleOnly }

// TableInfo returns the schema the row was decoded with.
func (r Row) TableInfo() *model.TableInfo {
	if _, td, err := r.live(); err == nil {
		return td.ti
	}
	return nil
}

// Column returns the value of column colID (rules MT6-MT13): the stored
// value or NULL; for a column the row does not store, the handle value
// (handle columns) or the origin default. model.ExtraHandleID gives the
// `_tidb_rowid` handle of tables keyed by it. Virtual generated and
// non-public columns are errors, as is any non-handle column of a
// handle-only image.
func (r Row) Column(colID int64) (value.Datum, error) {
	img, td, err := r.live()
	if err != nil {
		return value.Datum{}, err
	}
	off := td.offsetOf(colID)
	if off < 0 {
		if colID == model.ExtraHandleID && td.handle.Kind == model.HandleRowID {
			return value.NewIntDatum(img.m.handle.IntValue()), nil
		}
		return value.Datum{}, fmt.Errorf("%w %d in table %d %q", ErrUnknownColumn, colID, td.ti.ID, td.ti.Name.O)
	}
	return img.columnAt(td, off)
}

// ColumnAt returns the column at offset (its position in TableInfo.Columns).
func (r Row) ColumnAt(offset int) (value.Datum, error) {
	img, td, err := r.live()
	if err != nil {
		return value.Datum{}, err
	}
	if offset < 0 || offset >= len(td.cols) {
		return value.Datum{}, fmt.Errorf("mounter: column offset %d outside 0..%d of table %d %q", offset, len(td.cols)-1, td.ti.ID, td.ti.Name.O)
	}
	return img.columnAt(td, offset)
}

// NumColumns is len(TableInfo.Columns) of the row's schema.
func (r Row) NumColumns() int {
	if _, td, err := r.live(); err == nil {
		return len(td.cols)
	}
	return 0
}

func (img *image) columnAt(td *tableDecoder, off int) (value.Datum, error) {
	c := &td.cols[off]
	if !c.visible {
		return value.Datum{}, img.invisibleErr(td, c)
	}
	if img.handleOnly {
		if c.handlePos < 0 {
			return value.Datum{}, fmt.Errorf("%w: column %d %q is not a handle column", ErrHandleOnly, c.info.ID, c.info.Name.O)
		}
		return img.m.handleDatum(c)
	}
	d, found, err := img.view.Column(&c.spec)
	if err != nil {
		return value.Datum{}, err
	}
	if found {
		return d, nil
	}
	return img.fill(c)
}

func (img *image) invisibleErr(td *tableDecoder, c *column) error {
	if c.virtual {
		return fmt.Errorf("%w: column %d %q of table %d", ErrVirtualColumn, c.info.ID, c.info.Name.O, td.ti.ID)
	}
	return fmt.Errorf("%w: column %d %q of table %d is in state %d", ErrNotPublic, c.info.ID, c.info.Name.O, td.ti.ID, c.info.State)
}

// fill gives the value of a column the row does not store.
func (img *image) fill(c *column) (value.Datum, error) {
	if c.handlePos >= 0 {
		return img.m.handleDatum(c)
	}
	if c.defErr != nil {
		return value.Datum{}, fmt.Errorf("mounter: column %d %q is not in the row and its origin default is unusable: %w", c.info.ID, c.info.Name.O, c.defErr)
	}
	return c.def, nil
}

// ForEach calls fn for every visible column (public, not virtual) in table
// order with its value; a handle-only image yields only its handle columns.
// It decodes the whole row in one pass. Returning an error from fn stops
// the walk and returns that error.
func (r Row) ForEach(fn func(col *model.ColumnInfo, d value.Datum) error) error {
	img, td, err := r.live()
	if err != nil {
		return err
	}
	if img.handleOnly {
		for _, off := range td.handleOffs {
			c := &td.cols[off]
			if !c.visible {
				continue
			}
			d, err := img.m.handleDatum(c)
			if err != nil {
				return err
			}
			if err := fn(c.info, d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := img.decodeAll(td); err != nil {
		return err
	}
	for _, off := range td.visibleOffs {
		k := td.offSorted[off]
		c := &td.cols[off]
		d := img.datums[k]
		if img.states[k] == rowcodec.CellAbsent {
			if d, err = img.fill(c); err != nil {
				return err
			}
		}
		if err := fn(c.info, d); err != nil {
			return err
		}
	}
	return nil
}

// Datums decodes every column into dst (grown to len(TableInfo.Columns)),
// indexed by column offset. Invisible columns (virtual, non-public) are
// NULL there; use ForEach or Visible to tell them apart.
func (r Row) Datums(dst []value.Datum) ([]value.Datum, error) {
	img, td, err := r.live()
	if err != nil {
		return dst, err
	}
	if cap(dst) < len(td.cols) {
		dst = make([]value.Datum, len(td.cols))
	}
	dst = dst[:len(td.cols)]
	if img.handleOnly {
		clear(dst)
		for _, off := range td.handleOffs {
			if dst[off], err = img.m.handleDatum(&td.cols[off]); err != nil {
				return dst, err
			}
		}
		return dst, nil
	}
	if err := img.decodeInto(td, dst); err != nil {
		return dst, err
	}
	for k, off := range td.sortedOff {
		if img.states[k] == rowcodec.CellAbsent {
			if dst[off], err = img.fill(&td.cols[off]); err != nil {
				return dst, err
			}
		}
	}
	return dst, nil
}

// Visible reports whether the column at offset is part of row images
// (public and not virtual generated).
func (r Row) Visible(offset int) bool {
	_, td, err := r.live()
	return err == nil && offset >= 0 && offset < len(td.cols) && td.cols[offset].visible
}

// decodeInto decodes the visible columns straight into dst (indexed by
// offset) and sets the invisible ones to NULL.
func (img *image) decodeInto(td *tableDecoder, dst []value.Datum) error {
	n := len(td.sorted)
	if cap(img.states) < n {
		img.states = make([]rowcodec.CellState, n)
	}
	img.states = img.states[:n]
	for _, off := range td.invisibleOffs {
		dst[off] = value.Datum{}
	}
	return img.view.DecodeColumnsAt(td.sorted, td.sortedOff, dst, img.states)
}

func (img *image) decodeAll(td *tableDecoder) error {
	n := len(td.sorted)
	if cap(img.datums) < n {
		img.datums = make([]value.Datum, n)
		img.states = make([]rowcodec.CellState, n)
	}
	img.datums, img.states = img.datums[:n], img.states[:n]
	return img.view.DecodeColumns(td.sorted, img.datums, img.states)
}

// String renders the image for logs and test failures:
// "{name=value, ...}" in table order, "<empty>" for an absent image, or the
// error that stopped the rendering.
func (r Row) String() string {
	if r.IsEmpty() {
		return "<empty>"
	}
	var sb strings.Builder
	sb.WriteByte('{')
	err := r.ForEach(func(c *model.ColumnInfo, d value.Datum) error {
		if sb.Len() > 1 {
			sb.WriteString(", ")
		}
		sb.WriteString(c.Name.O)
		sb.WriteByte('=')
		sb.WriteString(d.String())
		return nil
	})
	if err != nil {
		return fmt.Sprintf("<row: %v>", err)
	}
	sb.WriteByte('}')
	return sb.String()
}
