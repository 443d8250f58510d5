package mysqlfront

import (
	"encoding/binary"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

const (
	opPlus = opcode.Plus
	opDiv  = opcode.Div
)

// collationIDs maps collation names to the ids column definitions carry.
var collationIDs = map[string]uint16{
	"utf8mb4_bin": 46, "utf8mb4_general_ci": 45, "utf8mb4_unicode_ci": 224, "utf8mb4_0900_ai_ci": 255,
	"utf8mb4_0900_bin": 309, "utf8_bin": 83, "utf8_general_ci": 33, "utf8_unicode_ci": 192,
	"latin1_bin": 47, "latin1_swedish_ci": 8, "ascii_bin": 65, "ascii_general_ci": 11, "binary": 63,
	"gbk_bin": 87, "gbk_chinese_ci": 28,
}

// columnOf is the column definition of a stored column (MY-T1): the wire type
// MySQL uses for the column type, its flags, collation, display length in
// bytes and decimals.
func columnOf(ft *types.FieldType, name, orgName, table, orgTable, schema string) column {
	col := column{schema: schema, table: table, orgTable: orgTable, name: name, orgName: orgName}
	tp := ft.GetType()
	flags := uint16(ft.GetFlag())
	switch tp {
	case mysql.TypeVarchar:
		tp = mysql.TypeVarString
	case mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob, mysql.TypeBlob:
		tp = mysql.TypeBlob
		flags |= uint16(mysql.BlobFlag)
	case mysql.TypeEnum:
		tp = mysql.TypeString
		flags |= uint16(mysql.EnumFlag)
	case mysql.TypeSet:
		tp = mysql.TypeString
		flags |= uint16(mysql.SetFlag)
	case mysql.TypeTiDBVectorFloat32:
		tp = mysql.TypeVarString
	}
	col.tp = tp
	col.flags = flags
	col.charset = collationBinary
	if id, ok := collationIDs[ft.GetCollate()]; ok {
		col.charset = id
	} else if ft.GetCharset() != "binary" && ft.GetCharset() != "" {
		col.charset = collationUTF8MB4Bin
	}
	flen := ft.GetFlen()
	if flen < 0 {
		flen = 0
	}
	if col.charset != collationBinary && isStringType(ft.GetType()) {
		flen *= 4 // utf8mb4: display length in bytes
	}
	if tp == mysql.TypeNewDecimal && flen > 0 {
		// MySQL counts the sign and, with a scale, the point.
		flen++
		if ft.GetDecimal() > 0 {
			flen++
		}
	}
	col.length = uint32(flen)
	dec := ft.GetDecimal()
	switch {
	case dec >= 0 && dec <= 31:
		col.decimals = byte(dec)
	case tp == mysql.TypeFloat || tp == mysql.TypeDouble:
		col.decimals = 31
	}
	return col
}

// columnOfVal is the definition of a computed column, from the kind of its
// first non-NULL value.
func columnOfVal(v val, name string) column {
	col := column{name: name, charset: collationBinary}
	switch v.k {
	case vInt:
		col.tp, col.length, col.flags = mysql.TypeLonglong, 21, uint16(mysql.BinaryFlag)
	case vUint:
		col.tp, col.length, col.flags = mysql.TypeLonglong, 20, uint16(mysql.BinaryFlag|mysql.UnsignedFlag)
	case vFloat:
		col.tp, col.length, col.decimals, col.flags = mysql.TypeDouble, 22, 31, uint16(mysql.BinaryFlag)
	case vDec:
		col.tp, col.length, col.decimals, col.flags = mysql.TypeNewDecimal, 65, byte(min(v.scale, 30)), uint16(mysql.BinaryFlag)
	case vBytes:
		col.tp, col.length, col.flags = mysql.TypeVarString, uint32(max(len(v.s), 1)), uint16(mysql.BinaryFlag)
	case vStr:
		col.tp, col.charset, col.length = mysql.TypeVarString, collationUTF8MB4Bin, uint32(max(4*len(v.s), 256))
		if v.tp == mysql.TypeDatetime {
			col.tp, col.charset, col.length, col.decimals, col.flags = mysql.TypeDatetime, collationBinary, 26, byte(v.scale), uint16(mysql.BinaryFlag)
		}
	default:
		col.tp = mysql.TypeNull
	}
	return col
}

// renderDatum is the text-protocol form of a stored value (MY-T2): binary
// strings and BIT values as their raw bytes, everything else in TiDB's
// canonical text (decimals with their scale, datetimes with their fsp, JSON
// as TiDB prints it); NULL is nil.
func renderDatum(d value.Datum) ([]byte, error) {
	switch d.Kind() {
	case value.KindNull:
		return nil, nil
	case value.KindBytes:
		return append([]byte{}, d.GetBytes()...), nil
	case value.KindBit:
		w := d.BitWidth()
		if w <= 0 || w > 8 {
			w = 8
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], d.GetUint64())
		return append([]byte{}, buf[8-w:]...), nil
	}
	return d.AppendText([]byte{})
}

func isStringType(tp byte) bool {
	switch tp {
	case mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeString, mysql.TypeTinyBlob, mysql.TypeMediumBlob,
		mysql.TypeLongBlob, mysql.TypeBlob, mysql.TypeEnum, mysql.TypeSet:
		return true
	}
	return false
}
