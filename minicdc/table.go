package minicdc

import (
	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// Name is a TiDB identifier as written (O) and lower-cased (L).
type Name struct {
	O, L string
}

func (n Name) String() string { return n.O }

// ColumnType is the class of a column's TiDB type, as far as consumers of
// the runtime tell types apart. RawType keeps TiDB's own type code.
type ColumnType uint8

const (
	// TypeUnsupported is a TiDB type the project does not map.
	TypeUnsupported ColumnType = iota
	TypeInt                    // TINYINT, SMALLINT, MEDIUMINT, INT, BIGINT
	TypeYear                   // YEAR
	TypeFloat                  // FLOAT
	TypeDouble                 // DOUBLE
	TypeDecimal                // DECIMAL
	TypeDate                   // DATE
	TypeDatetime               // DATETIME
	TypeTimestamp              // TIMESTAMP
	TypeDuration               // TIME
	TypeString                 // CHAR, VARCHAR, BINARY, VARBINARY (declared length in Flen)
	TypeBlob                   // the TEXT and BLOB families
	TypeJSON                   // JSON
	TypeEnum                   // ENUM
	TypeSet                    // SET
	TypeBit                    // BIT
	TypeVector                 // VECTOR(FLOAT32); Flen is the dimension, <= 0 when not fixed
)

// ColumnInfo is one column of a table definition.
type ColumnInfo struct {
	ID   int64
	Name Name
	// Offset is the column's position in TableInfo.Columns, which is also
	// its offset in the row images decoded with that definition.
	Offset  int
	Type    ColumnType
	RawType byte // TiDB's type code (mysql.Type*)
	// Flen is the declared length (or vector dimension); < 0 unspecified.
	Flen     int
	Unsigned bool
	// Binary marks a binary charset or collation (BINARY, VARBINARY, BLOB).
	Binary bool
	// Public is false for a column still being added or dropped.
	Public bool
	Hidden bool
	// Virtual marks a virtual generated column: its value is not stored in
	// the row.
	Virtual bool
}

// TableInfo is a table definition at one schema version, built by the
// runtime from the schema store's model (NewTableInfo). It is immutable
// once built: the runtime never changes one it handed out, so a callee may
// keep it (M11).
type TableInfo struct {
	// ID is the logical table id (a partitioned table's own id).
	ID   int64
	Name Name
	// Columns in TiDB's order, every state included (offsets match the
	// decoded row images). An entry is nil where TiDB's list has none.
	Columns []*ColumnInfo
	// PKIsHandle is set when the primary key is the single integer column
	// that is also the row handle.
	PKIsHandle bool
	// PrimaryKey holds the column offsets of the primary key in key order
	// (the handle column when PKIsHandle, else the public primary index);
	// empty when rows are keyed by the hidden _tidb_rowid.
	PrimaryKey []int
	// PartitionIDs are the physical ids of a partitioned table's
	// partitions, nil when the table is not partitioned.
	PartitionIDs []int64
	// UpdateTS, MaxColumnID, MaxIndexID and Version identify the schema
	// version together with the column count.
	UpdateTS    uint64
	MaxColumnID int64
	MaxIndexID  int64
	Version     uint16
}

// PhysicalIDs returns the partition ids of a partitioned table, else its
// own id.
func (t *TableInfo) PhysicalIDs() []int64 {
	if len(t.PartitionIDs) == 0 {
		return []int64{t.ID}
	}
	return append([]int64(nil), t.PartitionIDs...)
}

// NewTableInfo converts a schema store model to the runtime's definition.
// It copies what it keeps, so ti may change afterwards; nil gives nil.
func NewTableInfo(ti *model.TableInfo) *TableInfo {
	if ti == nil {
		return nil
	}
	t := &TableInfo{
		ID: ti.ID, Name: Name{O: ti.Name.O, L: ti.Name.L}, PKIsHandle: ti.PKIsHandle,
		UpdateTS: ti.UpdateTS, MaxColumnID: ti.MaxColumnID, MaxIndexID: ti.MaxIndexID, Version: ti.Version,
		Columns: make([]*ColumnInfo, len(ti.Columns)),
	}
	cols := make([]ColumnInfo, len(ti.Columns))
	for off, c := range ti.Columns {
		if c == nil {
			continue
		}
		ft := &c.FieldType
		cols[off] = ColumnInfo{
			ID: c.ID, Name: Name{O: c.Name.O, L: c.Name.L}, Offset: off,
			Type: columnType(ft.GetType()), RawType: ft.GetType(), Flen: ft.GetFlen(),
			Unsigned: mysql.HasUnsignedFlag(ft.GetFlag()),
			Binary:   ft.GetCharset() == "binary" || ft.GetCollate() == "binary",
			Public:   c.State == model.StatePublic, Hidden: c.Hidden,
			Virtual: c.GeneratedExprString != "" && !c.GeneratedStored,
		}
		t.Columns[off] = &cols[off]
	}
	if ti.PKIsHandle {
		for off, c := range ti.Columns {
			if c != nil && mysql.HasPriKeyFlag(c.FieldType.GetFlag()) {
				t.PrimaryKey = []int{off}
				break
			}
		}
	} else {
		for _, idx := range ti.Indices {
			if idx != nil && idx.Primary && idx.State == model.StatePublic {
				for _, ic := range idx.Columns {
					t.PrimaryKey = append(t.PrimaryKey, ic.Offset)
				}
				break
			}
		}
	}
	if ti.IsPartitioned() {
		t.PartitionIDs = ti.PhysicalIDs()
	}
	return t
}

// columnType classifies TiDB's type code.
func columnType(tp byte) ColumnType {
	switch tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		return TypeInt
	case mysql.TypeYear:
		return TypeYear
	case mysql.TypeFloat:
		return TypeFloat
	case mysql.TypeDouble:
		return TypeDouble
	case mysql.TypeNewDecimal:
		return TypeDecimal
	case mysql.TypeDate, mysql.TypeNewDate:
		return TypeDate
	case mysql.TypeDatetime:
		return TypeDatetime
	case mysql.TypeTimestamp:
		return TypeTimestamp
	case mysql.TypeDuration:
		return TypeDuration
	case mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeString:
		return TypeString
	case mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob, mysql.TypeBlob:
		return TypeBlob
	case mysql.TypeJSON:
		return TypeJSON
	case mysql.TypeEnum:
		return TypeEnum
	case mysql.TypeSet:
		return TypeSet
	case mysql.TypeBit:
		return TypeBit
	case mysql.TypeTiDBVectorFloat32:
		return TypeVector
	}
	return TypeUnsupported
}
