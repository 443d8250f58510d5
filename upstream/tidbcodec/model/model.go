// Package model holds TiDB's schema model as it is serialized in meta keys and
// DDL jobs (pkg/meta/model in TiDB): DBInfo, TableInfo, ColumnInfo, IndexInfo,
// PartitionInfo and Job, with TiDB's exact JSON field names.
//
// Seeded by the lead with the fields other packages need first; the owner of
// this package extends it (Job, helpers, enumerations). Exported names here
// are relied on by other packages and must keep their meaning.
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

// SchemaState is TiDB's online-DDL state of a schema object.
type SchemaState byte

// StatePublic is the only state in which an object is visible to users.
const StatePublic SchemaState = 5

// DBInfo is a database's meta value (`DB:<id>` field of the `DBs` hash).
type DBInfo struct {
	ID      int64       `json:"id"`
	Name    CIStr       `json:"db_name"`
	Charset string      `json:"charset"`
	Collate string      `json:"collate"`
	State   SchemaState `json:"state"`
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
	State               SchemaState         `json:"state"`
	Comment             string              `json:"comment"`
	Hidden              bool                `json:"hidden"`
	Version             uint64              `json:"version"`
}

// IndexColumn is one column of an index.
type IndexColumn struct {
	Name   CIStr `json:"name"`
	Offset int   `json:"offset"`
	Length int   `json:"length"`
}

// IndexInfo is one index of a table.
type IndexInfo struct {
	ID        int64          `json:"id"`
	Name      CIStr          `json:"idx_name"`
	Table     CIStr          `json:"tbl_name"`
	Columns   []*IndexColumn `json:"idx_cols"`
	State     SchemaState    `json:"state"`
	Comment   string         `json:"comment"`
	Tp        int            `json:"index_type"`
	Unique    bool           `json:"is_unique"`
	Primary   bool           `json:"is_primary"`
	Invisible bool           `json:"is_invisible"`
	Global    bool           `json:"is_global"`
}

// PartitionDefinition is one physical partition.
type PartitionDefinition struct {
	ID       int64      `json:"id"`
	Name     CIStr      `json:"name"`
	LessThan []string   `json:"less_than"`
	InValues [][]string `json:"in_values"`
	Comment  string     `json:"comment,omitempty"`
}

// PartitionInfo describes a partitioned table.
type PartitionInfo struct {
	Type        int                   `json:"type"`
	Expr        string                `json:"expr"`
	Columns     []CIStr               `json:"columns"`
	Enable      bool                  `json:"enable"`
	Definitions []PartitionDefinition `json:"definitions"`
	Num         uint64                `json:"num"`
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
	MaxColumnID         int64          `json:"max_col_id"`
	MaxIndexID          int64          `json:"max_idx_id"`
	UpdateTS            uint64         `json:"update_timestamp"`
	Partition           *PartitionInfo `json:"partition"`
	Version             uint16         `json:"version"`

	// Raw keeps the JSON this value was parsed from, so nothing TiDB wrote
	// is lost when a newer server adds fields this struct does not model.
	Raw json.RawMessage `json:"-"`
}
