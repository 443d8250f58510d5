// Package model holds TiDB's schema model as it is serialized in meta keys and
// DDL jobs (pkg/meta/model in TiDB): DBInfo, TableInfo, ColumnInfo, IndexInfo,
// PartitionInfo and Job, with TiDB's exact JSON field names.
//
// Values parsed from TiDB JSON are treated as immutable once they are shared:
// helpers such as ColumnByID build lazy read-only indexes, so a caller that
// needs to change a value takes a Clone first (see specs/schemastore.md M-rules).
//
// Fields TiDB writes but this package does not model are ignored on parse and
// kept byte for byte in TableInfo.Raw / DBInfo.Raw.
package model

import (
	"encoding/json"

	"github.com/pingcap/tidb/pkg/parser/types"
)

// CIStr is a case-insensitive name: O is the original, L the lower-case form.
type CIStr struct {
	O string `json:"O"`
	L string `json:"L"`
}

// NewCIStr builds a CIStr from an original name.
func NewCIStr(s string) CIStr { return CIStr{O: s, L: toLower(s)} }

func (c CIStr) String() string { return c.O }

// toLower lower-cases ASCII; TiDB's L forms are produced by strings.ToLower,
// which for the identifiers used in tests is the same, and for non-ASCII we
// defer to the value TiDB wrote.
func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// PolicyRefInfo names a placement policy.
type PolicyRefInfo struct {
	ID   int64 `json:"id"`
	Name CIStr `json:"name"`
}

// DBInfo is a database's meta value (`DB:<id>` field of the `DBs` hash).
type DBInfo struct {
	ID           int64           `json:"id"`
	Name         CIStr           `json:"db_name"`
	Charset      string          `json:"charset"`
	Collate      string          `json:"collate"`
	State        SchemaState     `json:"state"`
	PlacementRef *PolicyRefInfo  `json:"policy_ref_info"`
	ReadOnly     bool            `json:"read_only,omitempty"`
	Deprecated   json.RawMessage `json:"Deprecated,omitempty"`

	// Raw keeps the JSON this value was parsed from (nil for values built in
	// code), so fields a newer server adds are not lost.
	Raw json.RawMessage `json:"-"`
}

// ChangeStateInfo is set on a column while MODIFY COLUMN moves it.
type ChangeStateInfo struct {
	DependencyColumnOffset int `json:"relative_col_offset"`
}

// ColumnInfo is one column of a table.
type ColumnInfo struct {
	ID                  int64               `json:"id"`
	Name                CIStr               `json:"name"`
	Offset              int                 `json:"offset"`
	OriginDefaultValue  any                 `json:"origin_default"`
	OriginDefaultBit    []byte              `json:"origin_default_bit"`
	DefaultValue        any                 `json:"default"`
	DefaultValueBit     []byte              `json:"default_bit"`
	DefaultIsExpr       bool                `json:"default_is_expr"`
	GeneratedExprString string              `json:"generated_expr_string"`
	GeneratedStored     bool                `json:"generated_stored"`
	Dependences         map[string]struct{} `json:"dependences"`
	FieldType           types.FieldType     `json:"type"`
	ChangingFieldType   *types.FieldType    `json:"changing_type,omitempty"`
	State               SchemaState         `json:"state"`
	Comment             string              `json:"comment"`
	Hidden              bool                `json:"hidden"`
	ChangeStateInfo     *ChangeStateInfo    `json:"change_state_info"`
	Version             uint64              `json:"version"`
}

// IndexColumn is one column of an index.
type IndexColumn struct {
	Name CIStr `json:"name"`
	// Offset is the column's position in TableInfo.Columns.
	Offset int `json:"offset"`
	// Length is the prefix length, or -1 (UnspecifiedLength) for the whole value.
	Length int `json:"length"`
}

// IndexInfo is one index of a table.
type IndexInfo struct {
	ID            int64          `json:"id"`
	Name          CIStr          `json:"idx_name"`
	Table         CIStr          `json:"tbl_name"`
	Columns       []*IndexColumn `json:"idx_cols"`
	State         SchemaState    `json:"state"`
	BackfillState int            `json:"backfill_state"`
	Comment       string         `json:"comment"`
	Tp            int            `json:"index_type"`
	Unique        bool           `json:"is_unique"`
	Primary       bool           `json:"is_primary"`
	Invisible     bool           `json:"is_invisible"`
	Global        bool           `json:"is_global"`
	MVIndex       bool           `json:"mv_index"`
	// VectorInfo is kept raw: its shape differs between TiDB versions.
	VectorInfo json.RawMessage `json:"vector_index,omitempty"`
}

// PartitionType is PartitionInfo.Type.
type PartitionType int

// Partition types as TiDB numbers them.
const (
	PartitionTypeRange      PartitionType = 1
	PartitionTypeHash       PartitionType = 2
	PartitionTypeList       PartitionType = 3
	PartitionTypeKey        PartitionType = 4
	PartitionTypeSystemTime PartitionType = 5
)

// PartitionDefinition is one physical partition.
type PartitionDefinition struct {
	ID           int64          `json:"id"`
	Name         CIStr          `json:"name"`
	LessThan     []string       `json:"less_than"`
	InValues     [][]string     `json:"in_values"`
	PlacementRef *PolicyRefInfo `json:"policy_ref_info"`
	Comment      string         `json:"comment,omitempty"`
}

// PartitionState is the online-DDL state of one partition.
type PartitionState struct {
	ID    int64       `json:"id"`
	State SchemaState `json:"state"`
}

// PartitionInfo describes a partitioned table.
type PartitionInfo struct {
	Type                PartitionType         `json:"type"`
	Expr                string                `json:"expr"`
	Columns             []CIStr               `json:"columns"`
	Enable              bool                  `json:"enable"`
	IsEmptyColumns      bool                  `json:"is_empty_columns"`
	Definitions         []PartitionDefinition `json:"definitions"`
	AddingDefinitions   []PartitionDefinition `json:"adding_definitions"`
	DroppingDefinitions []PartitionDefinition `json:"dropping_definitions"`
	NewPartitionIDs     []int64               `json:"NewPartitionIDs,omitempty"`
	States              []PartitionState      `json:"states"`
	Num                 uint64                `json:"num"`
	DDLState            SchemaState           `json:"ddl_state"`
	NewTableID          int64                 `json:"new_table_id,omitempty"`
	DDLType             PartitionType         `json:"ddl_type,omitempty"`
	DDLExpr             string                `json:"ddl_expr,omitempty"`
	DDLColumns          []CIStr               `json:"ddl_columns,omitempty"`
}

// ExchangePartitionInfo is set on both tables while EXCHANGE PARTITION runs.
type ExchangePartitionInfo struct {
	ExchangePartitionTableID int64 `json:"exchange_partition_id"`
	ExchangePartitionDefID   int64 `json:"exchange_partition_def_id"`
	ExchangePartitionFlag    bool  `json:"exchange_partition_flag"`
}

// TableInfo is a table's meta value (`Table:<id>` field of a `DB:<id>` hash).
type TableInfo struct {
	ID                  int64          `json:"id"`
	Name                CIStr          `json:"name"`
	Charset             string         `json:"charset"`
	Collate             string         `json:"collate"`
	Columns             []*ColumnInfo  `json:"cols"`
	Indices             []*IndexInfo   `json:"index_info"`
	State               SchemaState    `json:"state"`
	PKIsHandle          bool           `json:"pk_is_handle"`
	IsCommonHandle      bool           `json:"is_common_handle"`
	CommonHandleVersion uint16         `json:"common_handle_version"`
	Comment             string         `json:"comment"`
	AutoIncID           int64          `json:"auto_inc_id"`
	AutoIDCache         int64          `json:"auto_id_cache"`
	AutoRandID          int64          `json:"auto_rand_id"`
	MaxColumnID         int64          `json:"max_col_id"`
	MaxIndexID          int64          `json:"max_idx_id"`
	MaxForeignKeyID     int64          `json:"max_fk_id"`
	MaxConstraintID     int64          `json:"max_cst_id"`
	UpdateTS            uint64         `json:"update_timestamp"`
	OldSchemaID         int64          `json:"old_schema_id,omitempty"`
	ShardRowIDBits      uint64         `json:"ShardRowIDBits"`
	MaxShardRowIDBits   uint64         `json:"max_shard_row_id_bits"`
	AutoRandomBits      uint64         `json:"auto_random_bits"`
	AutoRandomRangeBits uint64         `json:"auto_random_range_bits"`
	PreSplitRegions     uint64         `json:"pre_split_regions"`
	Partition           *PartitionInfo `json:"partition"`
	Compression         string         `json:"compression"`
	// View and Sequence are kept raw: the store only needs to know that they
	// are set (views and sequences carry no rows).
	View                  json.RawMessage        `json:"view,omitempty"`
	Sequence              json.RawMessage        `json:"sequence,omitempty"`
	Version               uint16                 `json:"version"`
	IsColumnar            bool                   `json:"is_columnar"`
	TempTableType         int                    `json:"temp_table_type"`
	CacheTableStatus      int                    `json:"cache_table_status"`
	ExchangePartitionInfo *ExchangePartitionInfo `json:"exchange_partition_info"`
	TTLInfo               json.RawMessage        `json:"ttl_info,omitempty"`
	Revision              uint64                 `json:"revision"`

	// Raw keeps the JSON this value was parsed from, so nothing TiDB wrote
	// is lost when a newer server adds fields this struct does not model.
	// Nil for values built or changed in code.
	Raw json.RawMessage `json:"-"`

	// colIndex is the lazily built column-by-id index, read and published
	// with atomic pointer operations (a plain pointer rather than
	// atomic.Pointer so TableInfo values stay copyable for callers). It is
	// derived data, never serialized; Clone does not copy it.
	colIndex *columnIndex
}
