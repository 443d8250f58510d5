package normalize

import (
	"testing"
	"unsafe"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/stretchr/testify/require"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize/ddlmap"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// TestN17N18TypesAndRoles is the type and role table of the spec.
func TestN17N18TypesAndRoles(t *testing.T) {
	cases := []struct {
		def  colDef
		typ  apiv1.FieldType
		role apiv1.FieldRole
		dim  uint32
	}{
		{colDef{name: "i", tp: mysql.TypeLong}, apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "u", tp: mysql.TypeLonglong, flag: mysql.UnsignedFlag}, apiv1.FieldType_FIELD_TYPE_UINT, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "y", tp: mysql.TypeYear}, apiv1.FieldType_FIELD_TYPE_INT, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "f", tp: mysql.TypeFloat}, apiv1.FieldType_FIELD_TYPE_FLOAT, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "d", tp: mysql.TypeNewDecimal}, apiv1.FieldType_FIELD_TYPE_DECIMAL, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "dt", tp: mysql.TypeDatetime}, apiv1.FieldType_FIELD_TYPE_TIME, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "ts", tp: mysql.TypeTimestamp}, apiv1.FieldType_FIELD_TYPE_TIME, apiv1.FieldRole_FIELD_ROLE_NUMERIC, 0},
		{colDef{name: "dur", tp: mysql.TypeDuration}, apiv1.FieldType_FIELD_TYPE_DURATION, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY, 0},
		{colDef{name: "short", tp: mysql.TypeVarchar, flen: 32}, apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_KEYWORD, 0},
		{colDef{name: "long", tp: mysql.TypeVarchar, flen: 64}, apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_TEXT, 0},
		{colDef{name: "txt", tp: mysql.TypeBlob, flen: 65535}, apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_TEXT, 0},
		{colDef{name: "blob", tp: mysql.TypeBlob, flen: 65535, charset: "binary"}, apiv1.FieldType_FIELD_TYPE_BYTES, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY, 0},
		{colDef{name: "vb", tp: mysql.TypeVarchar, flen: 16, charset: "binary"}, apiv1.FieldType_FIELD_TYPE_BYTES, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY, 0},
		{colDef{name: "j", tp: mysql.TypeJSON}, apiv1.FieldType_FIELD_TYPE_JSON, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY, 0},
		{colDef{name: "e", tp: mysql.TypeEnum}, apiv1.FieldType_FIELD_TYPE_ENUM, apiv1.FieldRole_FIELD_ROLE_KEYWORD, 0},
		{colDef{name: "s", tp: mysql.TypeSet}, apiv1.FieldType_FIELD_TYPE_SET, apiv1.FieldRole_FIELD_ROLE_KEYWORD, 0},
		{colDef{name: "b", tp: mysql.TypeBit, flen: 8}, apiv1.FieldType_FIELD_TYPE_BIT, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY, 0},
		{colDef{name: "v", tp: mysql.TypeTiDBVectorFloat32, flen: 3}, apiv1.FieldType_FIELD_TYPE_VECTOR, apiv1.FieldRole_FIELD_ROLE_VECTOR, 3},
		{colDef{name: "vnodim", tp: mysql.TypeTiDBVectorFloat32, flen: -1}, apiv1.FieldType_FIELD_TYPE_STRING, apiv1.FieldRole_FIELD_ROLE_STORED_ONLY, 0},
	}
	var defs []colDef
	for _, c := range cases {
		defs = append(defs, c.def)
	}
	ti := intPKTable(1, "t", defs...)
	virt := column(99, len(ti.Columns), colDef{name: "virt", tp: mysql.TypeLong})
	virt.GeneratedExprString = "`i` + 1"
	hidden := column(100, len(ti.Columns)+1, colDef{name: "hid", tp: mysql.TypeLong})
	hidden.Hidden = true
	ti.Columns = append(ti.Columns, virt, hidden)
	s, err := ddlmap.BuildShape(mt(ti), RoleOverrides{"short": apiv1.FieldRole_FIELD_ROLE_TEXT, "id": apiv1.FieldRole_FIELD_ROLE_TEXT})
	require.NoError(t, err)
	byName := map[string]fieldSpec{}
	for _, f := range s.Fields {
		byName[f.Name] = f
	}
	require.NotContains(t, byName, "virt", "virtual generated columns are not stored (N16)")
	require.NotContains(t, byName, "hid")
	require.Equal(t, apiv1.FieldRole_FIELD_ROLE_PRIMARY_KEY, byName["id"].Role, "overrides never touch key fields")
	require.Equal(t, apiv1.FieldRole_FIELD_ROLE_TEXT, byName["short"].Role, "override applied (N18)")
	for _, c := range cases {
		if c.def.name == "short" {
			continue
		}
		f := byName[c.def.name]
		require.Equal(t, c.typ, f.Type, c.def.name)
		require.Equal(t, c.role, f.Role, c.def.name)
		require.Equal(t, c.dim, f.Dim, c.def.name)
	}
	// The definition the emulator gets is valid for its rules.
	def := ddlmap.Definition("d.t", s, SourceInfo{Database: "d", Table: "t", LogicalTableID: 1}, []string{"table:1"}, true)
	require.Equal(t, []string{"id"}, def.GetPrimaryKey())
	require.True(t, def.GetMetadataAux())
}

func TestBuildShapeRejectsJSONKey(t *testing.T) {
	ti := &model.TableInfo{ID: 5, Name: ci("t"), IsCommonHandle: true, State: model.StatePublic}
	ti.Columns = []*model.ColumnInfo{column(1, 0, colDef{name: "j", tp: mysql.TypeJSON})}
	ti.Indices = []*model.IndexInfo{{Primary: true, State: model.StatePublic, Columns: []*model.IndexColumn{{Offset: 0}}}}
	_, err := ddlmap.BuildShape(mt(ti), nil)
	require.ErrorContains(t, err, "cannot be a key")
	_, err = ddlmap.BuildShape(nil, nil)
	require.Error(t, err)
	bad := intPKTable(6, "t", colDef{name: "g", tp: mysql.TypeGeometry})
	_, err = ddlmap.BuildShape(mt(bad), nil)
	require.ErrorContains(t, err, "unsupported column type")
}

// TestN17ValueLowering checks the owned values and their wire form.
func TestN17ValueLowering(t *testing.T) {
	dec, err := value.NewDecimalDatum(value.MustParseDecimal("12.50"), 6, 2)
	require.NoError(t, err)
	vec := []byte{2, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}
	cases := []struct {
		ft   apiv1.FieldType
		d    value.Datum
		want *apiv1.Value
	}{
		{apiv1.FieldType_FIELD_TYPE_INT, value.NewIntDatum(-3), &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: -3}}},
		{apiv1.FieldType_FIELD_TYPE_INT, value.NewYearDatum(2024), &apiv1.Value{Kind: &apiv1.Value_Int64Value{Int64Value: 2024}}},
		{apiv1.FieldType_FIELD_TYPE_UINT, value.NewUintDatum(1 << 63), &apiv1.Value{Kind: &apiv1.Value_Uint64Value{Uint64Value: 1 << 63}}},
		{apiv1.FieldType_FIELD_TYPE_BIT, value.NewBitDatum(5, 1), &apiv1.Value{Kind: &apiv1.Value_Uint64Value{Uint64Value: 5}}},
		{apiv1.FieldType_FIELD_TYPE_FLOAT, value.NewFloat32Datum(0.1), &apiv1.Value{Kind: &apiv1.Value_DoubleValue{DoubleValue: 0.1}}},
		{apiv1.FieldType_FIELD_TYPE_DECIMAL, dec, &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: "12.50"}}},
		{apiv1.FieldType_FIELD_TYPE_DURATION, value.NewDurationDatum(3_723_000_000_000, 0), &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: "01:02:03"}}},
		{apiv1.FieldType_FIELD_TYPE_ENUM, value.NewEnumDatum(2, "b"), &apiv1.Value{Kind: &apiv1.Value_StringValue{StringValue: "b"}}},
		{apiv1.FieldType_FIELD_TYPE_BYTES, value.NewBytesDatum([]byte{1, 2}), &apiv1.Value{Kind: &apiv1.Value_BytesValue{BytesValue: []byte{1, 2}}}},
		{apiv1.FieldType_FIELD_TYPE_VECTOR, value.NewVectorFloat32Datum(vec), &apiv1.Value{Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: []float32{1, 2}}}}},
		{apiv1.FieldType_FIELD_TYPE_STRING, value.NewNullDatum(), &apiv1.Value{Kind: &apiv1.Value_NullValue{NullValue: true}}},
	}
	for _, c := range cases {
		var rc rowCopier
		f := fieldSpec{Name: "x", Type: c.ft}
		v, err := rc.lower(&f, (*minicdc.Value)(&c.d))
		require.NoError(t, err, c.ft.String())
		m := Mutation{Kind: apiv1.MutationKind_MUTATION_KIND_UPSERT, shape: &shape{Fields: []fieldSpec{f}}, vals: []ownedVal{v}, data: rc.scratch, pkOff: uint32(len(rc.scratch))}
		var a protoAlloc
		got := a.toProto(&m, 1, string(m.data), append([]byte(nil), m.data...)).GetFields()["x"]
		require.Equal(t, c.want.String(), got.String(), c.ft.String())
	}
	var rc rowCopier
	d := value.NewIntDatum(-1)
	_, err = rc.lower(&fieldSpec{Type: apiv1.FieldType_FIELD_TYPE_UINT}, (*minicdc.Value)(&d))
	require.ErrorContains(t, err, "negative")
	d = value.NewStringDatum("x")
	_, err = rc.lower(&fieldSpec{Type: apiv1.FieldType_FIELD_TYPE_INT}, (*minicdc.Value)(&d))
	require.ErrorContains(t, err, "does not fit")
	d = value.NewVectorFloat32Datum([]byte{3, 0, 0, 0, 1})
	_, err = rc.lower(&fieldSpec{Type: apiv1.FieldType_FIELD_TYPE_VECTOR}, (*minicdc.Value)(&d))
	require.ErrorContains(t, err, "does not match")
}

func TestMutationStaysSmall(t *testing.T) {
	// The reorder buffer copies Mutation by value once per row each way.
	require.LessOrEqual(t, int(unsafe.Sizeof(Mutation{})), 80)
}
