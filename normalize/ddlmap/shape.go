package ddlmap

import (
	"fmt"
	"sort"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/minicdc"
)

// RowIDField is the synthetic key field of tables keyed by the hidden
// `_tidb_rowid` (N16).
const RowIDField = "_tidb_rowid"

// rowIDColumnID is TiDB's column id of the hidden row id (ExtraHandleID).
const rowIDColumnID int64 = -1

// textMinLen is the declared CHAR/VARCHAR length from which a string column
// is full-text indexed rather than treated as a keyword (N18).
const textMinLen = 64

// Field is one selected column as the bridge lowers it. It holds no
// pointer into the TableInfo (N15): columns are found again by offset in the
// TableInfo that comes with each row.
type Field struct {
	Name     string
	ColID    int64
	Offset   int // offset in TableInfo.Columns; -1 for the row-id field
	Type     apiv1.FieldType
	Role     apiv1.FieldRole
	Dim      uint32
	Unsigned bool
}

// Shape is the lowered form of one table schema version: the fields in
// column order and the key fields in key order.
type Shape struct {
	Fields []Field
	PK     []int // indexes into fields, key order
	RowID  bool  // keyed by _tidb_rowid read from the row key
	// WireOverhead estimates what an upsert's fields add to its encoded
	// size beside the value bytes: names and per-entry framing (N21).
	WireOverhead int64
	// Layout is the field names in Fields order, shared by every
	// positional row of this shape (E44).
	Layout *contract.Layout
}

// RoleOverrides maps a column name to the role it must get, overriding N18.
type RoleOverrides map[string]apiv1.FieldRole

// BuildShape lowers a table schema (N16-N18).
func BuildShape(ti *minicdc.TableInfo, roles RoleOverrides) (*Shape, error) {
	if ti == nil {
		return nil, fmt.Errorf("normalize: nil TableInfo")
	}
	s := &Shape{}
	byOffset := map[int]int{}
	for off, c := range ti.Columns {
		if c == nil || !c.Public || c.Hidden {
			continue
		}
		if c.Virtual {
			continue // virtual generated: not stored in the row (N16)
		}
		ft, dim, err := fieldTypeOf(c)
		if err != nil {
			return nil, fmt.Errorf("normalize: table %q (id %d) column %q: %w", ti.Name.O, ti.ID, c.Name.O, err)
		}
		byOffset[off] = len(s.Fields)
		s.Fields = append(s.Fields, Field{
			Name: c.Name.O, ColID: c.ID, Offset: off, Type: ft, Dim: dim,
			Unsigned: c.Unsigned,
		})
	}
	// Key columns (N16, N19): the handle column or the primary index.
	keyOffsets := ti.PrimaryKey
	if len(keyOffsets) == 0 {
		s.RowID = true
		s.PK = []int{len(s.Fields)}
		s.Fields = append(s.Fields, Field{Name: RowIDField, ColID: rowIDColumnID, Offset: -1, Type: apiv1.FieldType_FIELD_TYPE_INT})
	} else {
		for _, off := range keyOffsets {
			i, ok := byOffset[off]
			if !ok {
				return nil, fmt.Errorf("normalize: table %q (id %d): primary-key column at offset %d is not a selected column", ti.Name.O, ti.ID, off)
			}
			switch s.Fields[i].Type {
			case apiv1.FieldType_FIELD_TYPE_JSON, apiv1.FieldType_FIELD_TYPE_VECTOR:
				return nil, fmt.Errorf("normalize: table %q: primary-key column %q has type %s, which cannot be a key (E12)", ti.Name.O, s.Fields[i].Name, s.Fields[i].Type)
			}
			s.PK = append(s.PK, i)
		}
	}
	for i := range s.Fields {
		// map entry tag+len, key tag+len, value tag+len, Value oneof
		// tag+len or varint/fixed payload: at most ~24 bytes.
		s.WireOverhead += int64(len(s.Fields[i].Name)) + 24
	}
	isKey := map[int]bool{}
	for _, i := range s.PK {
		isKey[i] = true
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		if isKey[i] {
			f.Role = apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY
			continue
		}
		f.Role = defaultRole(ti, f)
		if r, ok := roles[f.Name]; ok && r != apiv1.FieldRole_FIELD_ROLE_UNSPECIFIED && r != apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY {
			f.Role = r
		}
	}
	names := make([]string, len(s.Fields))
	for i := range s.Fields {
		names[i] = s.Fields[i].Name
	}
	s.Layout = contract.NewLayout(names)
	return s, nil
}

// fieldTypeOf maps a TiDB column type to the contract's field type (N17).
func fieldTypeOf(c *minicdc.ColumnInfo) (apiv1.FieldType, uint32, error) {
	switch c.Type {
	case minicdc.TypeInt:
		if c.Unsigned {
			return apiv1.FieldType_FIELD_TYPE_UINT, 0, nil
		}
		return apiv1.FieldType_FIELD_TYPE_INT, 0, nil
	case minicdc.TypeYear:
		return apiv1.FieldType_FIELD_TYPE_INT, 0, nil
	case minicdc.TypeFloat, minicdc.TypeDouble:
		return apiv1.FieldType_FIELD_TYPE_FLOAT, 0, nil
	case minicdc.TypeDecimal:
		return apiv1.FieldType_FIELD_TYPE_DECIMAL, 0, nil
	case minicdc.TypeDate, minicdc.TypeDatetime, minicdc.TypeTimestamp:
		return apiv1.FieldType_FIELD_TYPE_TIME, 0, nil
	case minicdc.TypeDuration:
		return apiv1.FieldType_FIELD_TYPE_DURATION, 0, nil
	case minicdc.TypeString, minicdc.TypeBlob:
		if c.Binary {
			return apiv1.FieldType_FIELD_TYPE_BYTES, 0, nil
		}
		return apiv1.FieldType_FIELD_TYPE_STRING, 0, nil
	case minicdc.TypeJSON:
		return apiv1.FieldType_FIELD_TYPE_JSON, 0, nil
	case minicdc.TypeEnum:
		return apiv1.FieldType_FIELD_TYPE_ENUM, 0, nil
	case minicdc.TypeSet:
		return apiv1.FieldType_FIELD_TYPE_SET, 0, nil
	case minicdc.TypeBit:
		return apiv1.FieldType_FIELD_TYPE_BIT, 0, nil
	case minicdc.TypeVector:
		if c.Flen > 0 {
			return apiv1.FieldType_FIELD_TYPE_VECTOR, uint32(c.Flen), nil
		}
		return apiv1.FieldType_FIELD_TYPE_STRING, 0, nil // no fixed dimension: text form (N17)
	}
	return 0, 0, fmt.Errorf("unsupported column type 0x%02x", c.RawType)
}

// defaultRole is N18 for a non-key field.
func defaultRole(ti *minicdc.TableInfo, f *Field) apiv1.FieldRole {
	switch f.Type {
	case apiv1.FieldType_FIELD_TYPE_STRING:
		if f.Offset < 0 {
			return apiv1.FieldRole_FIELD_ROLE_STORED_ONLY
		}
		c := ti.Columns[f.Offset]
		switch c.Type {
		case minicdc.TypeBlob:
			return apiv1.FieldRole_FIELD_ROLE_TEXT
		case minicdc.TypeVector:
			return apiv1.FieldRole_FIELD_ROLE_STORED_ONLY
		}
		if c.Flen >= textMinLen || c.Flen < 0 {
			return apiv1.FieldRole_FIELD_ROLE_TEXT
		}
		return apiv1.FieldRole_FIELD_ROLE_KEYWORD
	case apiv1.FieldType_FIELD_TYPE_ENUM, apiv1.FieldType_FIELD_TYPE_SET:
		return apiv1.FieldRole_FIELD_ROLE_KEYWORD
	case apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldType_FIELD_TYPE_UINT, apiv1.FieldType_FIELD_TYPE_FLOAT,
		apiv1.FieldType_FIELD_TYPE_DECIMAL, apiv1.FieldType_FIELD_TYPE_TIME:
		return apiv1.FieldRole_FIELD_ROLE_NUMERIC
	case apiv1.FieldType_FIELD_TYPE_VECTOR:
		return apiv1.FieldRole_FIELD_ROLE_VECTOR
	}
	return apiv1.FieldRole_FIELD_ROLE_STORED_ONLY
}

// SourceInfo is the collection metadata of a logical table (E10).
type SourceInfo struct {
	KeyspaceID     uint32
	Database       string
	Table          string
	LogicalTableID int64
}

// Definition is the full canonical definition of a collection (N26).
func Definition(name string, s *Shape, src SourceInfo, partitions []string, metadataAux bool) *apiv1.CollectionDefinition {
	def := &apiv1.CollectionDefinition{
		Name: name,
		Source: &apiv1.SourceTable{
			KeyspaceId: src.KeyspaceID, Database: src.Database, Table: src.Table, LogicalTableId: src.LogicalTableID,
		},
		MetadataAux: metadataAux,
	}
	for _, f := range s.Fields {
		fd := &apiv1.Field{Name: f.Name, Type: f.Type, Role: f.Role, VectorDim: f.Dim}
		if f.Offset >= 0 {
			fd.SourceColumnId = f.ColID
		}
		def.Fields = append(def.Fields, fd)
	}
	for _, i := range s.PK {
		def.PrimaryKey = append(def.PrimaryKey, s.Fields[i].Name)
	}
	def.SourcePartitions = append([]string(nil), partitions...)
	sort.Strings(def.SourcePartitions)
	return def
}
