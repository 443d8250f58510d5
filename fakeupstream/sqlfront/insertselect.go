package sqlfront

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// insertSelect runs INSERT/REPLACE ... SELECT (S22): the SELECT reads one
// table (or none: a row of constants) with a WHERE the front compiles and
// an optional LIMIT; each field is `*`, `t.*`, a column, a literal or
// + - * of those. Rows are produced a scan page at a time and written
// straight into the transaction, so a bulk copy is held once (in the
// transaction's buffer). Reading the table being written collects the
// matching rows first, so the statement never reads its own rows.
func (s *Server) insertSelect(ss *Session, txn *fakeupstream.Txn, e *tableEntry, st *ast.InsertStmt) (int, int64, error) {
	sel, ok := st.Select.(*ast.SelectStmt)
	if !ok || sel.Kind != ast.SelectStmtKindSelect {
		return 0, 0, unsupported("INSERT ... %T (only a plain SELECT)", st.Select)
	}
	if sel.Distinct || sel.GroupBy != nil || sel.Having != nil || sel.OrderBy != nil || len(sel.WindowSpecs) > 0 || sel.LockInfo != nil || sel.With != nil {
		return 0, 0, unsupported("INSERT ... SELECT with DISTINCT, GROUP BY, HAVING, ORDER BY, windows, locks or WITH")
	}
	ti := e.info
	cols, err := insertColumns(ti, st.Columns)
	if err != nil {
		return 0, 0, err
	}
	limit := int64(-1)
	if sel.Limit != nil {
		if sel.Limit.Offset != nil {
			return 0, 0, unsupported("INSERT ... SELECT with a LIMIT offset")
		}
		l, err := evalLiteral(sel.Limit.Count)
		if err != nil || l.kind != litInt && l.kind != litUint {
			return 0, 0, unsupported("INSERT ... SELECT LIMIT %v", sel.Limit.Count)
		}
		limit = l.i
		if l.kind == litUint {
			limit = int64(min(l.u, 1<<62))
		}
	}
	n, first := 0, int64(0)
	write := func(given map[int64]literal) error {
		k, gen, err := s.insertGiven(txn, ti, given, st.IsReplace)
		if err != nil {
			return err
		}
		if first == 0 {
			first = gen
		}
		n += k
		return nil
	}
	if sel.From == nil {
		if limit == 0 {
			return 0, 0, nil
		}
		fields, err := expandFields(nil, sel.Fields)
		if err != nil {
			return 0, 0, err
		}
		given, err := selectRow(ti, cols, fields, nil, nil)
		if err != nil {
			return 0, 0, err
		}
		if err := write(given); err != nil {
			return 0, 0, err
		}
		return n, first, nil
	}
	_, src, err := s.dmlTable(ss, sel.From)
	if err != nil {
		return 0, 0, err
	}
	f, err := compileWhere(src.info, sel.Where)
	if err != nil {
		return 0, 0, err
	}
	// Resolve the field list once, before reading anything.
	fields, err := expandFields(src.info, sel.Fields)
	if err != nil {
		return 0, 0, err
	}
	if len(fields) != len(cols) {
		return 0, 0, fmt.Errorf("sqlfront: INSERT INTO %q names %d columns but the SELECT gives %d", ti.Name.O, len(cols), len(fields))
	}
	produce := func(r *row) error {
		given, err := selectRow(ti, cols, fields, src.info, r.datums)
		if err != nil {
			return err
		}
		return write(given)
	}
	if limit == 0 {
		return 0, 0, nil
	}
	if src.info.ID == ti.ID {
		rows, err := s.matchRows(txn, src.info, f)
		if err != nil {
			return 0, 0, err
		}
		for i, r := range rows {
			if limit >= 0 && int64(i) >= limit {
				break
			}
			if err := produce(r); err != nil {
				return 0, 0, err
			}
		}
		return n, first, nil
	}
	p, err := s.planAccess(src.info, f)
	if err != nil {
		return 0, 0, err
	}
	taken := int64(0)
	errLimit := fmt.Errorf("limit reached")
	err = s.eachRow(txn, src.info, p, func(r *row) error {
		ok, err := f.match(r)
		if err != nil || !ok {
			return err
		}
		if limit >= 0 && taken >= limit {
			return errLimit
		}
		taken++
		return produce(r)
	})
	if err != nil && err != errLimit {
		return 0, 0, err
	}
	return n, first, nil
}

// selField is one SELECT field: a source column or an expression.
type selField struct {
	col  *model.ColumnInfo
	expr ast.ExprNode
}

// expandFields resolves `*`, `t.*` and expressions against the source
// table (nil: no FROM).
func expandFields(src *model.TableInfo, fl *ast.FieldList) ([]selField, error) {
	var out []selField
	for _, fd := range fl.Fields {
		if fd.WildCard != nil {
			if src == nil {
				return nil, fmt.Errorf("sqlfront: SELECT * without a table")
			}
			if t := fd.WildCard.Table.L; t != "" && t != src.Name.L {
				return nil, fmt.Errorf("sqlfront: unknown table %q in SELECT %s.*", fd.WildCard.Table.O, fd.WildCard.Table.O)
			}
			for _, c := range src.Columns {
				out = append(out, selField{col: c})
			}
			continue
		}
		if cn, ok := fd.Expr.(*ast.ColumnNameExpr); ok && src != nil {
			c := src.ColumnByName(cn.Name.Name.O)
			if c == nil {
				return nil, fmt.Errorf("sqlfront: unknown column %q in field list of table %q", cn.Name.Name.O, src.Name.O)
			}
			out = append(out, selField{col: c})
			continue
		}
		out = append(out, selField{expr: fd.Expr})
	}
	return out, nil
}

// selectRow evaluates the fields on a source row into the literals of the
// target columns.
func selectRow(ti *model.TableInfo, cols []*model.ColumnInfo, fields []selField, src *model.TableInfo, datums []value.Datum) (map[int64]literal, error) {
	if len(fields) != len(cols) {
		return nil, fmt.Errorf("sqlfront: INSERT INTO %q names %d columns but the SELECT gives %d", ti.Name.O, len(cols), len(fields))
	}
	given := make(map[int64]literal, len(cols))
	for i, c := range cols {
		f := fields[i]
		switch {
		case f.col != nil && sameStorage(&f.col.FieldType, &c.FieldType):
			d := datums[f.col.Offset]
			given[c.ID] = literal{kind: litDatum, datum: &d}
		case f.col != nil:
			lit, err := datumLiteral(datums[f.col.Offset])
			if err != nil {
				return nil, err
			}
			given[c.ID] = lit
		default:
			var lit literal
			var err error
			if src == nil {
				lit, err = evalLiteral(f.expr)
			} else {
				lit, err = evalRowExpr(f.expr, src, datums)
			}
			if err != nil {
				return nil, unsupported("SELECT field for column %q: %v", c.Name.O, err)
			}
			given[c.ID] = lit
		}
	}
	return given, nil
}

// sameStorage: a value of a column of type a is stored unchanged in a
// column of type b (same type, length, scale, signedness, charset and
// collation, elements), so it can be copied without conversion.
func sameStorage(a, b *types.FieldType) bool {
	if a.GetType() != b.GetType() || a.GetFlen() != b.GetFlen() || a.GetDecimal() != b.GetDecimal() ||
		a.GetCharset() != b.GetCharset() || a.GetCollate() != b.GetCollate() || len(a.GetElems()) != len(b.GetElems()) {
		return false
	}
	if mysql.HasUnsignedFlag(a.GetFlag()) != mysql.HasUnsignedFlag(b.GetFlag()) {
		return false
	}
	for i, e := range a.GetElems() {
		if b.GetElems()[i] != e {
			return false
		}
	}
	// A NOT NULL target must still refuse a NULL: only copy into columns
	// at least as permissive.
	return !mysql.HasNotNullFlag(b.GetFlag()) || mysql.HasNotNullFlag(a.GetFlag())
}
