package mysqlfront

import (
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// expand applies an UPDATE or DELETE that the SQL front rejected as
// unsupported (MY-D1): the table is read at the current ts, WHERE / SET /
// ORDER BY / LIMIT are evaluated here, and the result is written as one
// transaction of per-row statements keyed by the primary key, which the SQL
// front does support. Only in autocommit mode (a read at the current ts
// would not see the open transaction's own writes) and only for tables with
// a primary key. The caller holds execMu, so no other statement of this
// server interleaves.
func (c *conn) expand(st ast.StmtNode, orig error) (sqlfront.Result, error) {
	if c.sess.InTxn() {
		return sqlfront.Result{}, fmt.Errorf("%w (sfemu mysqlfront evaluates such statements itself only outside an explicit transaction)", orig)
	}
	var (
		refs  *ast.TableRefsClause
		where ast.ExprNode
		order *ast.OrderByClause
		limit *ast.Limit
		sets  []*ast.Assignment
	)
	switch x := st.(type) {
	case *ast.UpdateStmt:
		if x.MultipleTable {
			return sqlfront.Result{}, orig
		}
		refs, where, order, limit, sets = x.TableRefs, x.Where, x.Order, x.Limit, x.List
	case *ast.DeleteStmt:
		if x.IsMultiTable {
			return sqlfront.Result{}, orig
		}
		refs, where, order, limit = x.TableRefs, x.Where, x.Order, x.Limit
	default:
		return sqlfront.Result{}, orig
	}
	if refs == nil || refs.TableRefs == nil || refs.TableRefs.Right != nil {
		return sqlfront.Result{}, orig
	}
	src, ok := refs.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return sqlfront.Result{}, orig
	}
	tn, ok := src.Source.(*ast.TableName)
	if !ok {
		return sqlfront.Result{}, orig
	}
	db := tn.Schema.O
	if db == "" {
		db = c.db
	}
	if db == "" {
		return sqlfront.Result{}, newError(ErNoDB, "3D000", "No database selected")
	}
	ts, err := c.srv.sql.Cluster().CurrentTs(c.ctx)
	if err != nil {
		return sqlfront.Result{}, err
	}
	snap, err := sqlfront.ReadTable(c.ctx, c.srv.sql.Cluster(), db, tn.Name.O, ts)
	if err != nil {
		return sqlfront.Result{}, err
	}
	ti := snap.Table
	hi, err := ti.HandleColumns()
	if err != nil {
		return sqlfront.Result{}, err
	}
	if hi.Kind == model.HandleRowID {
		return sqlfront.Result{}, fmt.Errorf("%w (sfemu mysqlfront can evaluate it itself only for tables with a primary key)", orig)
	}
	qual := tn.Name.L
	if src.AsName.L != "" {
		qual = src.AsName.L
	}
	var cols []relCol
	for _, col := range ti.Columns {
		ft := col.FieldType
		cols = append(cols, relCol{name: col.Name.O, schema: db, table: tn.Name.O, orgTable: ti.Name.O, qual: qual, ft: &ft})
	}
	e := &env{c: c, cols: cols}
	var matched [][]value.Datum
	for _, r := range snap.Rows {
		e.row = r.Values
		if where != nil {
			v, err := e.eval(where)
			if err != nil {
				return sqlfront.Result{}, err
			}
			if t, isNull := v.truth(); !t || isNull {
				continue
			}
		}
		matched = append(matched, r.Values)
	}
	if order != nil {
		keys := make([][]val, len(matched))
		for i, r := range matched {
			e.row = r
			for _, it := range order.Items {
				v, err := e.eval(it.Expr)
				if err != nil {
					return sqlfront.Result{}, err
				}
				keys[i] = append(keys[i], v)
			}
		}
		idx := make([]int, len(matched))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			for ii, it := range order.Items {
				x, y := keys[idx[a]][ii], keys[idx[b]][ii]
				cmp := 0
				switch {
				case x.k == vNull && y.k != vNull:
					cmp = -1
				case x.k != vNull && y.k == vNull:
					cmp = 1
				case x.k != vNull:
					cmp = compareVals(x, y)
				}
				if it.Desc {
					cmp = -cmp
				}
				if cmp != 0 {
					return cmp < 0
				}
			}
			return false
		})
		sorted := make([][]value.Datum, len(idx))
		for i, j := range idx {
			sorted[i] = matched[j]
		}
		matched = sorted
	}
	if limit != nil {
		n, err := c.constInt(limit.Count)
		if err != nil {
			return sqlfront.Result{}, err
		}
		if n >= 0 && n < int64(len(matched)) {
			matched = matched[:n]
		}
	}
	if len(matched) == 0 {
		return sqlfront.Result{}, nil
	}
	target := quoteIdent(db) + "." + quoteIdent(ti.Name.O)
	stmts := make([]string, 0, len(matched))
	for _, r := range matched {
		var cond []string
		for _, hc := range hi.Columns {
			lit, err := datumLiteral(r[hc.Column.Offset])
			if err != nil {
				return sqlfront.Result{}, err
			}
			cond = append(cond, quoteIdent(hc.Column.Name.O)+" = "+lit)
		}
		whereSQL := strings.Join(cond, " AND ")
		if sets == nil {
			stmts = append(stmts, "DELETE FROM "+target+" WHERE "+whereSQL)
			continue
		}
		e.row = r
		var assigns []string
		for _, a := range sets {
			col := ti.ColumnByName(a.Column.Name.O)
			if col == nil {
				return sqlfront.Result{}, newError(ErBadField, "42S22", "Unknown column '%s' in 'field list'", a.Column.Name.O)
			}
			var lit string
			if _, isDefault := a.Expr.(*ast.DefaultExpr); isDefault {
				lit = "DEFAULT"
			} else {
				v, err := e.eval(a.Expr)
				if err != nil {
					return sqlfront.Result{}, err
				}
				lit = valLiteral(v)
			}
			assigns = append(assigns, quoteIdent(col.Name.O)+" = "+lit)
		}
		stmts = append(stmts, "UPDATE "+target+" SET "+strings.Join(assigns, ", ")+" WHERE "+whereSQL)
	}
	if _, err := c.sess.Exec(c.ctx, "BEGIN"); err != nil {
		return sqlfront.Result{}, err
	}
	n := 0
	for _, q := range stmts {
		res, err := c.sess.Exec(c.ctx, q)
		if err != nil {
			_, _ = c.sess.Exec(c.ctx, "ROLLBACK")
			return sqlfront.Result{}, err
		}
		n += res.RowsAffected
	}
	res, err := c.sess.Exec(c.ctx, "COMMIT")
	if err != nil {
		return sqlfront.Result{}, err
	}
	res.RowsAffected = n
	return res, nil
}

// quoteString is a single-quoted SQL string literal.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// datumLiteral writes a stored value as an SQL literal the SQL front
// reads back to the same value.
func datumLiteral(d value.Datum) (string, error) {
	switch d.Kind() {
	case value.KindNull:
		return "NULL", nil
	case value.KindInt64, value.KindYear:
		return strconv.FormatInt(d.GetInt64(), 10), nil
	case value.KindUint64:
		return strconv.FormatUint(d.GetUint64(), 10), nil
	case value.KindFloat32:
		return strconv.FormatFloat(float64(d.GetFloat32()), 'g', -1, 32), nil
	case value.KindFloat64:
		return strconv.FormatFloat(d.GetFloat64(), 'g', -1, 64), nil
	case value.KindDecimal:
		return d.String(), nil
	case value.KindBytes:
		if len(d.GetBytes()) == 0 {
			return "''", nil
		}
		return "0x" + hex.EncodeToString(d.GetBytes()), nil
	case value.KindBit:
		return "0x" + strconv.FormatUint(d.GetUint64(), 16), nil
	case value.KindString, value.KindEnum, value.KindSet:
		return quoteString(d.GetString()), nil
	}
	b, err := d.AppendText(nil)
	if err != nil {
		return "", err
	}
	return quoteString(string(b)), nil
}

// valLiteral writes a computed value as an SQL literal.
func valLiteral(v val) string {
	switch v.k {
	case vNull:
		return "NULL"
	case vFloat:
		if math.IsInf(v.f, 0) || math.IsNaN(v.f) {
			return "NULL"
		}
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case vInt, vUint, vDec:
		return v.String()
	case vBytes:
		if v.s == "" {
			return "''"
		}
		return "0x" + hex.EncodeToString([]byte(v.s))
	}
	return quoteString(v.s)
}
