package mounter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// column is the decoding state of one TableInfo column.
type column struct {
	info *model.ColumnInfo
	spec rowcodec.Column
	// visible: public and not virtual generated; only visible columns are
	// part of a row image (rule MT13).
	visible bool
	virtual bool
	// handlePos is the column's position in the handle (int handle: 0;
	// common handle: index in the primary index), or -1.
	handlePos int
	// keyLossy: a common-handle column whose key form cannot give back the
	// value (prefix index or weight-based collation); it must be in the row.
	keyLossy bool
	def      value.Datum
	defErr   error
}

// tableDecoder is everything the hot path needs for one TableInfo, built
// once per (table, TableInfo) and reused for every row (rule MT14).
type tableDecoder struct {
	ti      *model.TableInfo
	physIDs []int64 // table id, or partition ids
	cols    []column
	// byID maps column id to offset: dense slice when ids are small.
	byIDSlice []int32
	byIDMap   map[int64]int
	// sorted holds the visible columns ordered by id (rowcodec's merge
	// walk); sortedOff[k] is the offset of sorted[k].
	sorted    []rowcodec.Column
	sortedOff []int
	// visibleOffs lists visible offsets in table order; offSorted maps an
	// offset to its position in sorted (-1 when not visible).
	visibleOffs   []int
	invisibleOffs []int
	offSorted     []int
	handle        model.HandleInfo
	handleOffs    []int // handle column offsets in handle order (none for rowid)
	setupErr      error
}

const maxDenseColumnID = 1 << 16

func newTableDecoder(ti *model.TableInfo) *tableDecoder {
	td := &tableDecoder{ti: ti, physIDs: ti.PhysicalIDs()}
	hi, err := ti.HandleColumns()
	if err != nil {
		td.setupErr = err
		return td
	}
	td.handle = hi
	td.cols = make([]column, len(ti.Columns))
	td.offSorted = make([]int, len(ti.Columns))
	maxID := int64(0)
	for off, ci := range ti.Columns {
		if ci == nil {
			td.setupErr = fmt.Errorf("table %d %q: column at offset %d is null", ti.ID, ti.Name.O, off)
			return td
		}
		c := &td.cols[off]
		c.info = ci
		c.spec = rowcodec.NewColumn(ci.ID, &ci.FieldType)
		c.virtual = ci.IsVirtualGenerated()
		c.visible = !c.virtual && ci.State == model.StatePublic
		c.handlePos = -1
		c.def, c.defErr = originDefault(ci)
		if ci.ID > maxID {
			maxID = ci.ID
		}
	}
	if hi.Kind != model.HandleRowID {
		for pos, hc := range hi.Columns {
			off := columnOffset(ti, hc.Column)
			if off < 0 {
				td.setupErr = fmt.Errorf("table %d %q: handle column %q not among the columns", ti.ID, ti.Name.O, hc.Column.Name.O)
				return td
			}
			c := &td.cols[off]
			c.handlePos = pos
			if hi.Kind == model.HandleCommon {
				c.keyLossy = hc.Length > 0 || lossyKeyCollation(&c.info.FieldType)
			}
			td.handleOffs = append(td.handleOffs, off)
		}
	}
	if maxID < maxDenseColumnID {
		td.byIDSlice = make([]int32, maxID+1)
		for i := range td.byIDSlice {
			td.byIDSlice[i] = -1
		}
	} else {
		td.byIDMap = make(map[int64]int, len(ti.Columns))
	}
	for off := range td.cols {
		id := td.cols[off].info.ID
		if id < 0 {
			td.setupErr = fmt.Errorf("table %d %q: column %q has negative id %d", ti.ID, ti.Name.O, td.cols[off].info.Name.O, id)
			return td
		}
		if td.offsetOf(id) >= 0 {
			td.setupErr = fmt.Errorf("table %d %q: column id %d used twice", ti.ID, ti.Name.O, id)
			return td
		}
		if td.byIDSlice != nil {
			td.byIDSlice[id] = int32(off)
		} else {
			td.byIDMap[id] = off
		}
		td.offSorted[off] = -1
		if td.cols[off].visible {
			td.visibleOffs = append(td.visibleOffs, off)
			td.sortedOff = append(td.sortedOff, off)
		} else {
			td.invisibleOffs = append(td.invisibleOffs, off)
		}
	}
	slices.SortFunc(td.sortedOff, func(a, b int) int {
		x, y := td.cols[a].info.ID, td.cols[b].info.ID
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	td.sorted = make([]rowcodec.Column, len(td.sortedOff))
	for k, off := range td.sortedOff {
		td.sorted[k] = td.cols[off].spec
		td.offSorted[off] = k
	}
	return td
}

func columnOffset(ti *model.TableInfo, c *model.ColumnInfo) int {
	for off, ci := range ti.Columns {
		if ci == c || ci != nil && ci.ID == c.ID {
			return off
		}
	}
	return -1
}

// offsetOf returns the offset of column id, or -1.
func (td *tableDecoder) offsetOf(id int64) int {
	if td.byIDSlice != nil {
		if id < 0 || id >= int64(len(td.byIDSlice)) {
			return -1
		}
		return int(td.byIDSlice[id])
	}
	if off, ok := td.byIDMap[id]; ok {
		return off
	}
	return -1
}

// ownsPhysicalID reports whether a record key's table id belongs to the
// table (its own id, or one of its partitions).
func (td *tableDecoder) ownsPhysicalID(id int64) bool {
	for _, p := range td.physIDs {
		if p == id {
			return true
		}
	}
	return false
}

// lossyKeyCollation reports whether a string column's key form (its
// collation sort key) cannot be turned back into the value: collations
// that compare by weights. binary, *_bin (PAD SPACE: only trailing spaces
// are trimmed, and TiDB keeps the value in the row when that matters) and
// utf8mb4_0900_bin keep the bytes.
func lossyKeyCollation(ft interface {
	GetType() byte
	GetCollate() string
}) bool {
	switch ft.GetType() {
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeVarString,
		mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
	default:
		return false
	}
	coll := strings.ToLower(ft.GetCollate())
	if coll == "gbk_bin" { // the sort key is the GBK encoding, not the text
		return true
	}
	return !(coll == "" || coll == "binary" || strings.HasSuffix(coll, "_bin"))
}
