package sqlfront

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// condKind is what one AND-ed condition of a WHERE tests.
type condKind int

const (
	condCmp     condKind = iota // op against vals[0]
	condIn                      // equal to one of vals
	condBetween                 // vals[0] <= x <= vals[1]
	condIsNull
	condNotNull
	condFalse // compared with NULL: never true
)

// cond is one conjunct: a column (or the hidden _tidb_rowid) against
// literals already converted to the column's type.
type cond struct {
	kind  condKind
	col   *model.ColumnInfo // nil when rowID
	rowID bool
	op    opcode.Op // condCmp only
	vals  []value.Datum
}

// filter is a compiled WHERE: AND-ed conditions (S2).
type filter struct {
	conds []cond
}

// rowIDName is TiDB's hidden handle column of tables without an integer or
// clustered primary key.
const rowIDName = "_tidb_rowid"

var rowIDType = func() *types.FieldType {
	ft := types.NewFieldType(mysql.TypeLonglong)
	ft.SetFlen(20)
	return ft
}()

// compileWhere accepts AND-ed conditions on a column (or `_tidb_rowid` of a
// table keyed by it): comparisons with a literal (= != < <= > >=, either
// side), IN (literals), BETWEEN literal AND literal, IS [NOT] NULL; and no
// WHERE at all. Anything else is unsupported.
func compileWhere(ti *model.TableInfo, e ast.ExprNode) (*filter, error) {
	f := &filter{}
	if e == nil {
		return f, nil
	}
	return f, f.add(ti, e)
}

func (f *filter) add(ti *model.TableInfo, e ast.ExprNode) error {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return f.add(ti, x.Expr)
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicAnd {
			if err := f.add(ti, x.L); err != nil {
				return err
			}
			return f.add(ti, x.R)
		}
		switch x.Op {
		case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
		default:
			return unsupported("WHERE operator %s", x.Op)
		}
		colExpr, lit, op := x.L, x.R, x.Op
		if _, ok := colExpr.(*ast.ColumnNameExpr); !ok {
			colExpr, lit, op = x.R, x.L, flip(x.Op)
		}
		c, ft, err := whereColumn(ti, colExpr)
		if err != nil {
			return err
		}
		c.kind, c.op = condCmp, op
		d, null, err := whereLiteral(c, ft, lit)
		if err != nil {
			return err
		}
		if null {
			c.kind = condFalse
		} else {
			c.vals = []value.Datum{d}
		}
		f.conds = append(f.conds, c)
		return nil
	case *ast.PatternInExpr:
		if x.Not || x.Sel != nil {
			return unsupported("WHERE NOT IN / IN (subquery)")
		}
		c, ft, err := whereColumn(ti, x.Expr)
		if err != nil {
			return err
		}
		c.kind = condIn
		for _, it := range x.List {
			d, null, err := whereLiteral(c, ft, it)
			if err != nil {
				return err
			}
			if !null { // x IN (.., NULL) is never true through the NULL
				c.vals = append(c.vals, d)
			}
		}
		f.conds = append(f.conds, c)
		return nil
	case *ast.BetweenExpr:
		if x.Not {
			return unsupported("WHERE NOT BETWEEN")
		}
		c, ft, err := whereColumn(ti, x.Expr)
		if err != nil {
			return err
		}
		lo, null1, err := whereLiteral(c, ft, x.Left)
		if err != nil {
			return err
		}
		hi, null2, err := whereLiteral(c, ft, x.Right)
		if err != nil {
			return err
		}
		if null1 || null2 {
			c.kind = condFalse
		} else {
			c.kind, c.vals = condBetween, []value.Datum{lo, hi}
		}
		f.conds = append(f.conds, c)
		return nil
	case *ast.IsNullExpr:
		c, _, err := whereColumn(ti, x.Expr)
		if err != nil {
			return err
		}
		c.kind = condIsNull
		if x.Not {
			c.kind = condNotNull
		}
		f.conds = append(f.conds, c)
		return nil
	}
	return unsupported("WHERE expression %T", e)
}

func whereColumn(ti *model.TableInfo, e ast.ExprNode) (cond, *types.FieldType, error) {
	cn, ok := e.(*ast.ColumnNameExpr)
	if !ok {
		return cond{}, nil, unsupported("WHERE condition without a column: %T", e)
	}
	name := cn.Name.Name.O
	if col := ti.ColumnByName(name); col != nil {
		return cond{col: col}, &col.FieldType, nil
	}
	if lower(name) == rowIDName {
		if hi, err := ti.HandleColumns(); err == nil && hi.Kind == model.HandleRowID {
			return cond{rowID: true}, rowIDType, nil
		}
	}
	return cond{}, nil, fmt.Errorf("sqlfront: unknown column %q in where clause of table %q", name, ti.Name.O)
}

func (c *cond) name() string {
	if c.rowID {
		return rowIDName
	}
	return c.col.Name.O
}

// whereLiteral converts a literal to the column's type; null reports a
// NULL literal.
func whereLiteral(c cond, ft *types.FieldType, e ast.ExprNode) (value.Datum, bool, error) {
	l, err := evalLiteral(e)
	if err != nil {
		return value.Datum{}, false, unsupported("WHERE %s: %v", c.name(), err)
	}
	if l.kind == litNull {
		return value.Datum{}, true, nil
	}
	d, err := toDatum(l, withoutNotNull(ft), c.name())
	if err != nil {
		return value.Datum{}, false, fmt.Errorf("sqlfront: %w", err)
	}
	return d, false, nil
}

// value is the datum the condition tests in r.
func (c *cond) value(r *row) value.Datum {
	if c.rowID {
		return value.NewIntDatum(r.handle.IntValue())
	}
	return r.datums[c.col.Offset]
}

// match evaluates every condition on r.
func (f *filter) match(r *row) (bool, error) {
	for i := range f.conds {
		ok, err := f.conds[i].match(r)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (c *cond) match(r *row) (bool, error) {
	d := c.value(r)
	switch c.kind {
	case condIsNull:
		return d.IsNull(), nil
	case condNotNull:
		return !d.IsNull(), nil
	case condFalse:
		return false, nil
	}
	if d.IsNull() {
		return false, nil
	}
	switch c.kind {
	case condIn:
		for i := range c.vals {
			if n, err := compareDatums(&d, &c.vals[i]); err != nil || n == 0 {
				return err == nil, err
			}
		}
		return false, nil
	case condBetween:
		lo, err := compareDatums(&d, &c.vals[0])
		if err != nil || lo < 0 {
			return false, err
		}
		hi, err := compareDatums(&d, &c.vals[1])
		return hi <= 0, err
	}
	n, err := compareDatums(&d, &c.vals[0])
	if err != nil {
		return false, err
	}
	switch c.op {
	case opcode.EQ:
		return n == 0, nil
	case opcode.NE:
		return n != 0, nil
	case opcode.LT:
		return n < 0, nil
	case opcode.LE:
		return n <= 0, nil
	case opcode.GT:
		return n > 0, nil
	case opcode.GE:
		return n >= 0, nil
	}
	return false, unsupported("WHERE operator %s", c.op)
}

func flip(op opcode.Op) opcode.Op {
	switch op {
	case opcode.LT:
		return opcode.GT
	case opcode.LE:
		return opcode.GE
	case opcode.GT:
		return opcode.LT
	case opcode.GE:
		return opcode.LE
	}
	return op
}
