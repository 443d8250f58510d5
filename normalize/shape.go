package normalize

import "github.com/searchfabric/sfemu/normalize/ddlmap"

// The lowered schema (N16-N18) is ddlmap's: the DDL mapping builds
// definitions from it and the row path lowers rows with it.
type (
	shape     = ddlmap.Shape
	fieldSpec = ddlmap.Field
	// RoleOverrides maps a column name to the role it must get, overriding
	// N18.
	RoleOverrides = ddlmap.RoleOverrides
	// SourceInfo is the collection metadata of a logical table (E10).
	SourceInfo = ddlmap.SourceInfo
)

// RowIDField is the synthetic key field of tables keyed by the hidden
// `_tidb_rowid` (N16).
const RowIDField = ddlmap.RowIDField
