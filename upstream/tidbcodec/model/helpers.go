package model

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
)

// ExtraHandleID is the column id of the hidden `_tidb_rowid` handle of tables
// that have neither an integer primary-key handle nor a clustered index.
const ExtraHandleID int64 = -1

// ExtraHandleName is the hidden row-id column's name.
const ExtraHandleName = "_tidb_rowid"

// HandleKind says how a table's rows are keyed.
type HandleKind int

const (
	// HandleRowID: the key carries the hidden `_tidb_rowid` int64.
	HandleRowID HandleKind = iota
	// HandleInt: pk_is_handle; the key carries the integer primary key,
	// which is not stored in the row value.
	HandleInt
	// HandleCommon: clustered index; the key carries the encoded primary
	// key datums, in primary-index column order.
	HandleCommon
)

func (k HandleKind) String() string {
	switch k {
	case HandleRowID:
		return "rowid"
	case HandleInt:
		return "int"
	case HandleCommon:
		return "common"
	default:
		return fmt.Sprintf("handle kind(%d)", int(k))
	}
}

// HandleColumn is one column of a table's handle.
type HandleColumn struct {
	Column *ColumnInfo
	// Length is the prefix length the primary index uses for the column, or
	// -1 when the whole value is part of the key.
	Length int
}

// HandleInfo describes how the rows of a table are keyed.
type HandleInfo struct {
	Kind HandleKind
	// Columns has one entry for HandleRowID (a synthetic `_tidb_rowid`
	// column with id ExtraHandleID) and HandleInt, and the primary-index
	// columns in index order for HandleCommon.
	Columns []HandleColumn
}

// NewExtraHandleColumn builds the synthetic `_tidb_rowid` column.
func NewExtraHandleColumn() *ColumnInfo {
	c := &ColumnInfo{ID: ExtraHandleID, Name: NewCIStr(ExtraHandleName), State: StatePublic, Offset: -1}
	c.FieldType = *types.NewFieldType(mysql.TypeLonglong)
	c.FieldType.SetFlag(mysql.PriKeyFlag | mysql.NotNullFlag)
	c.FieldType.SetFlen(20)
	return c
}

// HandleColumns resolves the table's handle. An error means the TableInfo is
// inconsistent (pk_is_handle without a primary-key column, a clustered index
// that points outside the columns).
func (t *TableInfo) HandleColumns() (HandleInfo, error) {
	switch {
	case t.PKIsHandle:
		for _, c := range t.Columns {
			if c != nil && mysql.HasPriKeyFlag(c.FieldType.GetFlag()) {
				return HandleInfo{Kind: HandleInt, Columns: []HandleColumn{{Column: c, Length: -1}}}, nil
			}
		}
		return HandleInfo{}, fmt.Errorf("table %d %q: pk_is_handle is set but no column has the primary-key flag", t.ID, t.Name.O)
	case t.IsCommonHandle:
		pk := t.PrimaryIndex()
		if pk == nil {
			return HandleInfo{}, fmt.Errorf("table %d %q: is_common_handle is set but there is no primary index", t.ID, t.Name.O)
		}
		cols := make([]HandleColumn, 0, len(pk.Columns))
		for i, ic := range pk.Columns {
			if ic == nil {
				return HandleInfo{}, fmt.Errorf("table %d %q: primary index column %d is null", t.ID, t.Name.O, i)
			}
			if ic.Offset < 0 || ic.Offset >= len(t.Columns) {
				return HandleInfo{}, fmt.Errorf("table %d %q: primary index column %d (%q) has offset %d, want 0..%d",
					t.ID, t.Name.O, i, ic.Name.O, ic.Offset, len(t.Columns)-1)
			}
			c := t.Columns[ic.Offset]
			if c == nil {
				return HandleInfo{}, fmt.Errorf("table %d %q: column at offset %d is null", t.ID, t.Name.O, ic.Offset)
			}
			if c.Name.L != ic.Name.L {
				return HandleInfo{}, fmt.Errorf("table %d %q: primary index column %d is %q but offset %d holds %q",
					t.ID, t.Name.O, i, ic.Name.O, ic.Offset, c.Name.O)
			}
			cols = append(cols, HandleColumn{Column: c, Length: ic.Length})
		}
		return HandleInfo{Kind: HandleCommon, Columns: cols}, nil
	default:
		return HandleInfo{Kind: HandleRowID, Columns: []HandleColumn{{Column: NewExtraHandleColumn(), Length: -1}}}, nil
	}
}

// PrimaryIndex returns the index marked primary, or nil.
func (t *TableInfo) PrimaryIndex() *IndexInfo {
	for _, idx := range t.Indices {
		if idx != nil && idx.Primary {
			return idx
		}
	}
	return nil
}

// PhysicalIDs returns the ids whose record spans hold the table's rows: the
// partition ids of a partitioned table (in definition order), else the
// table id itself.
func (t *TableInfo) PhysicalIDs() []int64 {
	if t.Partition == nil || len(t.Partition.Definitions) == 0 {
		return []int64{t.ID}
	}
	ids := make([]int64, len(t.Partition.Definitions))
	for i, d := range t.Partition.Definitions {
		ids[i] = d.ID
	}
	return ids
}

// IsPartitioned reports whether the table has partitions.
func (t *TableInfo) IsPartitioned() bool {
	return t.Partition != nil && len(t.Partition.Definitions) > 0
}

// IsView reports whether the TableInfo describes a view (no rows).
func (t *TableInfo) IsView() bool { return len(t.View) > 0 && string(t.View) != "null" }

// IsSequence reports whether the TableInfo describes a sequence (no rows).
func (t *TableInfo) IsSequence() bool { return len(t.Sequence) > 0 && string(t.Sequence) != "null" }

// IsVirtualGenerated reports whether the column is computed on read and
// therefore never stored in row values.
func (c *ColumnInfo) IsVirtualGenerated() bool {
	return c.GeneratedExprString != "" && !c.GeneratedStored
}

// IsGenerated reports whether the column is generated (stored or virtual).
func (c *ColumnInfo) IsGenerated() bool { return c.GeneratedExprString != "" }

// columnIndex maps column id to column. Dense ids (the common case: TiDB
// hands out 1..max_col_id) use a slice; sparse ones a map.
type columnIndex struct {
	dense  []*ColumnInfo
	sparse map[int64]*ColumnInfo
}

func buildColumnIndex(cols []*ColumnInfo) *columnIndex {
	var maxID int64
	dense := true
	for _, c := range cols {
		if c == nil {
			continue
		}
		if c.ID < 0 {
			dense = false
			break
		}
		if c.ID > maxID {
			maxID = c.ID
		}
	}
	if dense && maxID <= int64(4*len(cols)+64) {
		idx := &columnIndex{dense: make([]*ColumnInfo, maxID+1)}
		for _, c := range cols {
			if c != nil && idx.dense[c.ID] == nil {
				idx.dense[c.ID] = c
			}
		}
		return idx
	}
	idx := &columnIndex{sparse: make(map[int64]*ColumnInfo, len(cols))}
	for _, c := range cols {
		if c == nil {
			continue
		}
		if _, dup := idx.sparse[c.ID]; !dup {
			idx.sparse[c.ID] = c
		}
	}
	return idx
}

func (t *TableInfo) columnIndexPtr() *unsafe.Pointer {
	return (*unsafe.Pointer)(unsafe.Pointer(&t.colIndex))
}

// ColumnByID returns the column with the given id, or nil. The index is
// built on first use and published atomically, so concurrent readers are
// safe; the TableInfo must not be changed afterwards (take a Clone).
func (t *TableInfo) ColumnByID(id int64) *ColumnInfo {
	idx := (*columnIndex)(atomic.LoadPointer(t.columnIndexPtr()))
	if idx == nil {
		idx = buildColumnIndex(t.Columns)
		atomic.StorePointer(t.columnIndexPtr(), unsafe.Pointer(idx))
	}
	if idx.dense != nil {
		if id >= 0 && id < int64(len(idx.dense)) {
			return idx.dense[id]
		}
		return nil
	}
	return idx.sparse[id]
}

// ColumnByName returns the column whose lower-case name is name (matched
// case-insensitively), or nil.
func (t *TableInfo) ColumnByName(name string) *ColumnInfo {
	l := toLower(name)
	for _, c := range t.Columns {
		if c != nil && c.Name.L == l {
			return c
		}
	}
	return nil
}

// Clone returns a deep copy that shares nothing mutable with t (strings
// are immutable and shared). The column index is rebuilt lazily on the copy.
// Fields added to the model must be added here; TestCloneIsDeep checks
// every field through reflection.
func (t *TableInfo) Clone() *TableInfo {
	if t == nil {
		return nil
	}
	c := &TableInfo{}
	*c = tableInfoCopyable(t)
	c.colIndex = nil
	if t.Columns != nil {
		c.Columns = make([]*ColumnInfo, len(t.Columns))
		for i, col := range t.Columns {
			c.Columns[i] = col.Clone()
		}
	}
	if t.Indices != nil {
		c.Indices = make([]*IndexInfo, len(t.Indices))
		for i, idx := range t.Indices {
			c.Indices[i] = idx.Clone()
		}
	}
	c.Partition = t.Partition.Clone()
	c.View = cloneBytes(t.View)
	c.Sequence = cloneBytes(t.Sequence)
	c.TTLInfo = cloneBytes(t.TTLInfo)
	if t.ExchangePartitionInfo != nil {
		e := *t.ExchangePartitionInfo
		c.ExchangePartitionInfo = &e
	}
	c.Raw = cloneBytes(t.Raw)
	return c
}

// tableInfoCopyable returns a shallow copy of the exported fields of *t. It
// lists them one by one so the lazily published column index is never read
// non-atomically (a plain *t copy would race with ColumnByID).
func tableInfoCopyable(t *TableInfo) TableInfo {
	return TableInfo{
		ID:                    t.ID,
		Name:                  t.Name,
		Charset:               t.Charset,
		Collate:               t.Collate,
		Columns:               t.Columns,
		Indices:               t.Indices,
		State:                 t.State,
		PKIsHandle:            t.PKIsHandle,
		IsCommonHandle:        t.IsCommonHandle,
		CommonHandleVersion:   t.CommonHandleVersion,
		Comment:               t.Comment,
		AutoIncID:             t.AutoIncID,
		AutoIDCache:           t.AutoIDCache,
		AutoRandID:            t.AutoRandID,
		MaxColumnID:           t.MaxColumnID,
		MaxIndexID:            t.MaxIndexID,
		MaxForeignKeyID:       t.MaxForeignKeyID,
		MaxConstraintID:       t.MaxConstraintID,
		UpdateTS:              t.UpdateTS,
		OldSchemaID:           t.OldSchemaID,
		ShardRowIDBits:        t.ShardRowIDBits,
		MaxShardRowIDBits:     t.MaxShardRowIDBits,
		AutoRandomBits:        t.AutoRandomBits,
		AutoRandomRangeBits:   t.AutoRandomRangeBits,
		PreSplitRegions:       t.PreSplitRegions,
		Partition:             t.Partition,
		Compression:           t.Compression,
		View:                  t.View,
		Sequence:              t.Sequence,
		Version:               t.Version,
		IsColumnar:            t.IsColumnar,
		TempTableType:         t.TempTableType,
		CacheTableStatus:      t.CacheTableStatus,
		ExchangePartitionInfo: t.ExchangePartitionInfo,
		TTLInfo:               t.TTLInfo,
		Revision:              t.Revision,
		Raw:                   t.Raw,
	}
}

// Clone returns a deep copy of the column.
func (c *ColumnInfo) Clone() *ColumnInfo {
	if c == nil {
		return nil
	}
	n := *c
	n.OriginDefaultValue = cloneJSONValue(c.OriginDefaultValue)
	n.DefaultValue = cloneJSONValue(c.DefaultValue)
	n.OriginDefaultBit = cloneBytes(c.OriginDefaultBit)
	n.DefaultValueBit = cloneBytes(c.DefaultValueBit)
	if c.Dependences != nil {
		n.Dependences = make(map[string]struct{}, len(c.Dependences))
		for k := range c.Dependences {
			n.Dependences[k] = struct{}{}
		}
	}
	n.FieldType = *c.FieldType.DeepCopy()
	if c.ChangingFieldType != nil {
		n.ChangingFieldType = c.ChangingFieldType.DeepCopy()
	}
	if c.ChangeStateInfo != nil {
		s := *c.ChangeStateInfo
		n.ChangeStateInfo = &s
	}
	return &n
}

// cloneJSONValue deep-copies a value decoded from JSON into an `any`.
func cloneJSONValue(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSONValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneJSONValue(e)
		}
		return out
	case []byte:
		return cloneBytes(x)
	default:
		return v // nil, bool, float64, string, json.Number: immutable
	}
}

// Clone returns a deep copy of the index.
func (idx *IndexInfo) Clone() *IndexInfo {
	if idx == nil {
		return nil
	}
	n := *idx
	if idx.Columns != nil {
		n.Columns = make([]*IndexColumn, len(idx.Columns))
		for i, ic := range idx.Columns {
			if ic != nil {
				c := *ic
				n.Columns[i] = &c
			}
		}
	}
	n.VectorInfo = cloneBytes(idx.VectorInfo)
	return &n
}

func clonePartitionDefs(defs []PartitionDefinition) []PartitionDefinition {
	if defs == nil {
		return nil
	}
	out := make([]PartitionDefinition, len(defs))
	for i, d := range defs {
		out[i] = d
		if d.LessThan != nil {
			out[i].LessThan = append([]string(nil), d.LessThan...)
		}
		if d.InValues != nil {
			out[i].InValues = make([][]string, len(d.InValues))
			for k, vs := range d.InValues {
				if vs != nil {
					out[i].InValues[k] = append([]string(nil), vs...)
				}
			}
		}
		if d.PlacementRef != nil {
			p := *d.PlacementRef
			out[i].PlacementRef = &p
		}
	}
	return out
}

// Clone returns a deep copy of the partition info.
func (p *PartitionInfo) Clone() *PartitionInfo {
	if p == nil {
		return nil
	}
	n := *p
	if p.Columns != nil {
		n.Columns = append([]CIStr(nil), p.Columns...)
	}
	if p.DDLColumns != nil {
		n.DDLColumns = append([]CIStr(nil), p.DDLColumns...)
	}
	n.Definitions = clonePartitionDefs(p.Definitions)
	n.AddingDefinitions = clonePartitionDefs(p.AddingDefinitions)
	n.DroppingDefinitions = clonePartitionDefs(p.DroppingDefinitions)
	if p.NewPartitionIDs != nil {
		n.NewPartitionIDs = append([]int64(nil), p.NewPartitionIDs...)
	}
	if p.States != nil {
		n.States = append([]PartitionState(nil), p.States...)
	}
	return &n
}

// Clone returns a deep copy of d.
func (d *DBInfo) Clone() *DBInfo {
	if d == nil {
		return nil
	}
	c := *d
	if d.PlacementRef != nil {
		p := *d.PlacementRef
		c.PlacementRef = &p
	}
	c.Deprecated = cloneBytes(d.Deprecated)
	c.Raw = cloneBytes(d.Raw)
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
