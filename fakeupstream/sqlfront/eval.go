package sqlfront

import (
	"bytes"
	"cmp"
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

func withoutNotNull(ft *types.FieldType) *types.FieldType {
	c := ft.Clone()
	c.DelFlag(mysql.NotNullFlag)
	return c
}

// compareDatums orders two non-NULL datums of the same column type.
func compareDatums(a, b *value.Datum) (int, error) {
	switch a.Kind() {
	case value.KindInt64:
		if b.Kind() == value.KindUint64 {
			if a.GetInt64() < 0 {
				return -1, nil
			}
			return cmp.Compare(uint64(a.GetInt64()), b.GetUint64()), nil
		}
		return cmp.Compare(a.GetInt64(), b.GetInt64()), nil
	case value.KindUint64:
		if b.Kind() == value.KindInt64 {
			if b.GetInt64() < 0 {
				return 1, nil
			}
			return cmp.Compare(a.GetUint64(), uint64(b.GetInt64())), nil
		}
		return cmp.Compare(a.GetUint64(), b.GetUint64()), nil
	case value.KindFloat32, value.KindFloat64:
		return cmp.Compare(a.GetFloat64(), b.GetFloat64()), nil
	case value.KindString, value.KindBytes:
		return bytes.Compare(a.GetBytes(), b.GetBytes()), nil
	case value.KindDecimal:
		da, err := a.GetDecimal()
		if err != nil {
			return 0, err
		}
		db, err := b.GetDecimal()
		if err != nil {
			return 0, err
		}
		return da.Compare(&db), nil
	}
	if a.Equal(b) {
		return 0, nil
	}
	// Other kinds (time, enum, set, bit, ...) compare by their packed
	// numeric payload, which orders like the SQL value.
	sa, sb := a.String(), b.String()
	if a.Kind() != b.Kind() {
		return 0, fmt.Errorf("cannot compare %s with %s", sa, sb)
	}
	return cmp.Compare(sa, sb), nil
}

// evalRowExpr evaluates the right side of SET: a literal, a column of the
// row, or + - * of those on numbers.
func evalRowExpr(e ast.ExprNode, ti *model.TableInfo, row []value.Datum) (literal, error) {
	switch x := e.(type) {
	case *ast.ColumnNameExpr:
		c := ti.ColumnByName(x.Name.Name.O)
		if c == nil {
			return literal{}, fmt.Errorf("unknown column %q", x.Name.Name.O)
		}
		return datumLiteral(row[c.Offset])
	case *ast.ParenthesesExpr:
		return evalRowExpr(x.Expr, ti, row)
	case *ast.BinaryOperationExpr:
		l, err := evalRowExpr(x.L, ti, row)
		if err != nil {
			return l, err
		}
		r, err := evalRowExpr(x.R, ti, row)
		if err != nil {
			return r, err
		}
		return arith(x.Op, l, r)
	}
	return evalLiteral(e)
}

func datumLiteral(d value.Datum) (literal, error) {
	switch d.Kind() {
	case value.KindNull:
		return literal{kind: litNull}, nil
	case value.KindInt64:
		return literal{kind: litInt, i: d.GetInt64()}, nil
	case value.KindUint64:
		return literal{kind: litUint, u: d.GetUint64()}, nil
	case value.KindFloat32, value.KindFloat64:
		return literal{kind: litFloat, f: d.GetFloat64()}, nil
	case value.KindDecimal:
		return literal{kind: litDecimal, s: d.String()}, nil
	}
	return literal{kind: litString, s: d.String()}, nil
}

func arith(op opcode.Op, l, r literal) (literal, error) {
	if l.kind == litNull || r.kind == litNull {
		return literal{kind: litNull}, nil
	}
	if l.kind == litInt && r.kind == litInt {
		switch op {
		case opcode.Plus:
			return literal{kind: litInt, i: l.i + r.i}, nil
		case opcode.Minus:
			return literal{kind: litInt, i: l.i - r.i}, nil
		case opcode.Mul:
			return literal{kind: litInt, i: l.i * r.i}, nil
		}
	}
	lf, err := floatOf(l)
	if err != nil {
		return literal{}, err
	}
	rf, err := floatOf(r)
	if err != nil {
		return literal{}, err
	}
	switch op {
	case opcode.Plus:
		return literal{kind: litFloat, f: lf + rf}, nil
	case opcode.Minus:
		return literal{kind: litFloat, f: lf - rf}, nil
	case opcode.Mul:
		return literal{kind: litFloat, f: lf * rf}, nil
	}
	return literal{}, fmt.Errorf("operator %s is not supported", op)
}
