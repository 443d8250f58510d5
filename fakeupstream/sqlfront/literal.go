package sqlfront

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// litKind says what a SQL literal was written as.
type litKind int

const (
	litNull litKind = iota
	litInt
	litUint
	litFloat
	litDecimal // exact numeric text, e.g. 12.50
	litString
	litBinary // 0x.. / b'..' literals
	litDatum  // a stored datum copied as is (INSERT ... SELECT of a same-typed column)
)

// literal is a constant SQL expression after evaluation.
type literal struct {
	kind litKind
	i    int64
	u    uint64
	f    float64
	s    string // decimal text, string or binary bytes
	// datum is the value of a litDatum.
	datum *value.Datum
}

// zeroDatum: a copied NULL or 0, which an AUTO_INCREMENT column replaces
// by a generated id (as the literals NULL and 0).
func (l literal) zeroDatum() bool {
	if l.kind != litDatum {
		return false
	}
	d := l.datum
	return d.IsNull() || (d.Kind() == value.KindInt64 && d.GetInt64() == 0) || (d.Kind() == value.KindUint64 && d.GetUint64() == 0)
}

func (l literal) String() string {
	switch l.kind {
	case litNull:
		return "NULL"
	case litInt:
		return strconv.FormatInt(l.i, 10)
	case litUint:
		return strconv.FormatUint(l.u, 10)
	case litFloat:
		return strconv.FormatFloat(l.f, 'g', -1, 64)
	case litBinary:
		return fmt.Sprintf("0x%x", l.s)
	case litDatum:
		return l.datum.String()
	default:
		return l.s
	}
}

// evalLiteral evaluates the constant expressions the SQL front accepts:
// literals, unary minus/plus, and parenthesised literals.
func evalLiteral(e ast.ExprNode) (literal, error) {
	switch x := e.(type) {
	case *test_driver.ValueExpr:
		switch v := x.Datum.GetValue().(type) {
		case nil:
			return literal{kind: litNull}, nil
		case int64:
			return literal{kind: litInt, i: v}, nil
		case uint64:
			return literal{kind: litUint, u: v}, nil
		case float64:
			return literal{kind: litFloat, f: v}, nil
		case float32:
			return literal{kind: litFloat, f: float64(v)}, nil
		case string:
			return literal{kind: litString, s: v}, nil
		case []byte:
			return literal{kind: litString, s: string(v)}, nil
		case *test_driver.MyDecimal:
			return literal{kind: litDecimal, s: v.String()}, nil
		case test_driver.BinaryLiteral:
			return literal{kind: litBinary, s: string(v)}, nil
		default:
			return literal{}, fmt.Errorf("unsupported literal %T", v)
		}
	case *ast.ParenthesesExpr:
		return evalLiteral(x.Expr)
	case *ast.UnaryOperationExpr:
		v, err := evalLiteral(x.V)
		if err != nil {
			return v, err
		}
		switch x.Op {
		case opcode.Plus:
			return v, nil
		case opcode.Minus:
			return negate(v)
		}
		return literal{}, fmt.Errorf("unsupported unary operator %s", x.Op)
	}
	return literal{}, fmt.Errorf("unsupported expression %T (only literals are accepted here)", e)
}

func negate(v literal) (literal, error) {
	switch v.kind {
	case litInt:
		if v.i == math.MinInt64 {
			return literal{kind: litDecimal, s: "9223372036854775808"}, nil
		}
		return literal{kind: litInt, i: -v.i}, nil
	case litUint:
		if v.u == 1<<63 {
			return literal{kind: litInt, i: math.MinInt64}, nil
		}
		return literal{kind: litDecimal, s: "-" + strconv.FormatUint(v.u, 10)}, nil
	case litFloat:
		return literal{kind: litFloat, f: -v.f}, nil
	case litDecimal:
		if strings.HasPrefix(v.s, "-") {
			return literal{kind: litDecimal, s: v.s[1:]}, nil
		}
		return literal{kind: litDecimal, s: "-" + v.s}, nil
	case litNull:
		return v, nil
	}
	return literal{}, fmt.Errorf("cannot negate %s", v)
}

// toDatum converts a literal to the column's stored value, rejecting values
// that do not fit the column type (strict SQL mode).
func toDatum(l literal, ft *types.FieldType, col string) (value.Datum, error) {
	bad := func(why string) (value.Datum, error) {
		return value.Datum{}, fmt.Errorf("column %q (%s): value %s %s", col, ft.String(), l, why)
	}
	if l.kind == litNull {
		if mysql.HasNotNullFlag(ft.GetFlag()) {
			return bad("is NULL but the column is NOT NULL")
		}
		return value.NewNullDatum(), nil
	}
	unsigned := mysql.HasUnsignedFlag(ft.GetFlag())
	switch tp := ft.GetType(); tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		var lo, hi int64
		var uhi uint64
		switch tp {
		case mysql.TypeTiny:
			lo, hi, uhi = math.MinInt8, math.MaxInt8, math.MaxUint8
		case mysql.TypeShort:
			lo, hi, uhi = math.MinInt16, math.MaxInt16, math.MaxUint16
		case mysql.TypeInt24:
			lo, hi, uhi = -1<<23, 1<<23-1, 1<<24-1
		case mysql.TypeLong:
			lo, hi, uhi = math.MinInt32, math.MaxInt32, math.MaxUint32
		default:
			lo, hi, uhi = math.MinInt64, math.MaxInt64, math.MaxUint64
		}
		i, u, neg, err := integerOf(l)
		if err != nil {
			return bad(err.Error())
		}
		if unsigned {
			if neg || u > uhi {
				return bad("is out of range")
			}
			return value.NewUintDatum(u), nil
		}
		if neg {
			if i < lo {
				return bad("is out of range")
			}
			return value.NewIntDatum(i), nil
		}
		if u > uint64(hi) {
			return bad("is out of range")
		}
		return value.NewIntDatum(int64(u)), nil
	case mysql.TypeYear:
		i, _, neg, err := integerOf(l)
		if err != nil {
			return bad(err.Error())
		}
		if !neg && i == 0 {
			return value.NewYearDatum(0), nil
		}
		if neg || i < 1901 || i > 2155 {
			if !neg && i >= 1 && i <= 69 {
				return value.NewYearDatum(2000 + i), nil
			}
			if !neg && i >= 70 && i <= 99 {
				return value.NewYearDatum(1900 + i), nil
			}
			return bad("is not a valid YEAR")
		}
		return value.NewYearDatum(i), nil
	case mysql.TypeFloat, mysql.TypeDouble:
		f, err := floatOf(l)
		if err != nil {
			return bad(err.Error())
		}
		if tp == mysql.TypeFloat {
			if math.Abs(f) > math.MaxFloat32 {
				return bad("is out of range for FLOAT")
			}
			return value.NewFloat32Datum(float32(f)), nil
		}
		return value.NewFloat64Datum(f), nil
	case mysql.TypeNewDecimal:
		text := l.String()
		if l.kind == litString {
			text = strings.TrimSpace(l.s)
		}
		dec, err := value.ParseDecimal(text)
		if err != nil {
			return bad("is not a decimal: " + err.Error())
		}
		d, err := value.NewDecimalDatum(dec, ft.GetFlen(), ft.GetDecimal())
		if err != nil {
			return bad(err.Error())
		}
		return d, nil
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		if l.kind != litString {
			return bad("must be a quoted date/time string")
		}
		t, err := value.ParseTime(l.s, tp, fspOf(ft))
		if err != nil {
			return bad(err.Error())
		}
		return value.NewTimeDatum(t.Pack(), tp, fspOf(ft)), nil
	case mysql.TypeDuration:
		text := l.String()
		if l.kind == litString {
			text = l.s
		}
		d, err := value.ParseDuration(text, fspOf(ft))
		if err != nil {
			return bad(err.Error())
		}
		return value.NewDurationDatum(d.Nanos, fspOf(ft)), nil
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeVarString, mysql.TypeBlob, mysql.TypeTinyBlob,
		mysql.TypeMediumBlob, mysql.TypeLongBlob:
		s := l.s
		if l.kind != litString && l.kind != litBinary {
			s = l.String()
		}
		if flen := ft.GetFlen(); flen > 0 && tp != mysql.TypeBlob && tp != mysql.TypeTinyBlob &&
			tp != mysql.TypeMediumBlob && tp != mysql.TypeLongBlob {
			n := len(s)
			if !isBinaryStr(ft) {
				n = len([]rune(s))
			}
			if n > flen {
				return bad(fmt.Sprintf("is too long (%d > %d)", n, flen))
			}
		}
		if tp == mysql.TypeString && isBinaryStr(ft) && len(s) < ft.GetFlen() {
			// BINARY(n) pads with zero bytes.
			s += strings.Repeat("\x00", ft.GetFlen()-len(s))
		}
		return value.NewStringDatum(s), nil
	case mysql.TypeEnum:
		if l.kind == litInt || l.kind == litUint {
			idx := l.u
			if l.kind == litInt {
				idx = uint64(l.i)
			}
			name, err := value.EnumName(ft.GetElems(), idx)
			if err != nil {
				return bad(err.Error())
			}
			return value.NewEnumDatum(idx, name), nil
		}
		idx, err := value.EnumIndex(ft.GetElems(), l.s)
		if err != nil {
			return bad(err.Error())
		}
		name, _ := value.EnumName(ft.GetElems(), idx)
		return value.NewEnumDatum(idx, name), nil
	case mysql.TypeSet:
		bits, err := value.SetBits(ft.GetElems(), l.s)
		if err != nil {
			return bad(err.Error())
		}
		names, _ := value.SetNames(ft.GetElems(), bits)
		return value.NewSetDatum(bits, names), nil
	case mysql.TypeBit:
		var v uint64
		switch l.kind {
		case litBinary:
			b, err := value.BitValue([]byte(l.s))
			if err != nil {
				return bad(err.Error())
			}
			v = b
		default:
			i, u, neg, err := integerOf(l)
			if err != nil || neg {
				return bad("is not a BIT value")
			}
			_ = i
			v = u
		}
		width := ft.GetFlen()
		if width < 64 && v >= 1<<uint(width) {
			return bad(fmt.Sprintf("does not fit BIT(%d)", width))
		}
		return value.NewBitDatum(v, width), nil
	case mysql.TypeJSON:
		if l.kind != litString {
			return bad("must be a JSON string")
		}
		j, err := value.ParseJSON([]byte(l.s))
		if err != nil {
			return bad("is not valid JSON: " + err.Error())
		}
		return value.NewJSONDatum(j.AppendTyped(nil)), nil
	case mysql.TypeTiDBVectorFloat32:
		if l.kind != litString {
			return bad("must be a vector string like '[1,2,3]'")
		}
		elems, err := value.ParseVectorFloat32(l.s)
		if err != nil {
			return bad(err.Error())
		}
		if dim := ft.GetFlen(); dim > 0 && len(elems) != dim {
			return bad(fmt.Sprintf("has %d dimensions, the column has %d", len(elems), dim))
		}
		b, err := value.AppendVectorFloat32(nil, elems)
		if err != nil {
			return bad(err.Error())
		}
		return value.NewVectorFloat32Datum(b), nil
	}
	return bad("has a column type the SQL front does not support")
}

func fspOf(ft *types.FieldType) int {
	if d := ft.GetDecimal(); d > 0 {
		return d
	}
	return 0
}

// integerOf reads an integer literal: i is set for negatives, u for
// non-negatives (with i = int64(u) when it fits).
func integerOf(l literal) (i int64, u uint64, neg bool, err error) {
	switch l.kind {
	case litInt:
		if l.i < 0 {
			return l.i, 0, true, nil
		}
		return l.i, uint64(l.i), false, nil
	case litUint:
		return int64(l.u), l.u, false, nil
	case litString, litDecimal:
		s := strings.TrimSpace(l.s)
		if strings.HasPrefix(s, "-") {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, 0, false, fmt.Errorf("is not an integer")
			}
			return v, 0, v < 0, nil
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false, fmt.Errorf("is not an integer")
		}
		return int64(v), v, false, nil
	case litFloat:
		if l.f != math.Trunc(l.f) {
			return 0, 0, false, fmt.Errorf("is not an integer")
		}
		if l.f < 0 {
			return int64(l.f), 0, true, nil
		}
		return int64(l.f), uint64(l.f), false, nil
	}
	return 0, 0, false, fmt.Errorf("is not an integer")
}

func floatOf(l literal) (float64, error) {
	switch l.kind {
	case litInt:
		return float64(l.i), nil
	case litUint:
		return float64(l.u), nil
	case litFloat:
		return l.f, nil
	case litDecimal, litString:
		f, err := strconv.ParseFloat(strings.TrimSpace(l.s), 64)
		if err != nil {
			return 0, fmt.Errorf("is not a number")
		}
		return f, nil
	}
	return 0, fmt.Errorf("is not a number")
}

func isBinaryStr(ft *types.FieldType) bool {
	return ft.GetCharset() == "binary" || mysql.HasBinaryFlag(ft.GetFlag()) && ft.GetCollate() == "binary"
}

func lower(s string) string { return strings.ToLower(s) }
