package mysqlfront

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

type mysqlFieldType = types.FieldType

var newFieldType = types.NewFieldType

func unixMilliUTC(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// relation is what a SELECT reads: columns and rows of datums.
type relation struct {
	cols []relCol
	rows [][]value.Datum
}

// selectStmt evaluates the SELECT subset (MY-R1): one table or none, WHERE,
// DISTINCT, aggregates without GROUP BY, ORDER BY, LIMIT.
func (c *conn) selectStmt(st *ast.SelectStmt) (*resultSet, error) {
	if st.GroupBy != nil || st.Having != nil {
		return nil, errUnsupported("GROUP BY / HAVING")
	}
	if st.With != nil {
		return nil, errUnsupported("WITH (common table expressions)")
	}
	rel, err := c.from(st.From)
	if err != nil {
		return nil, err
	}
	e := &env{c: c, cols: rel.cols}
	// WHERE
	rows := rel.rows[:0:0]
	for _, r := range rel.rows {
		if st.Where != nil {
			e.row = r
			v, err := e.eval(st.Where)
			if err != nil {
				return nil, err
			}
			if t, isNull := v.truth(); !t || isNull {
				continue
			}
		}
		rows = append(rows, r)
	}
	// Select list: expand wildcards.
	type field struct {
		name string
		expr ast.ExprNode
		col  int // >= 0: a relation column projected as stored
	}
	var fields []field
	for _, f := range st.Fields.Fields {
		if f.WildCard != nil {
			q := f.WildCard.Table.L
			n := 0
			for i, rc := range rel.cols {
				if q == "" || rc.qual == q {
					fields = append(fields, field{name: rc.name, col: i})
					n++
				}
			}
			if n == 0 {
				if q != "" {
					return nil, newError(1051, "42S02", "Unknown table '%s'", f.WildCard.Table.O)
				}
				return nil, newError(1096, "HY000", "No tables used")
			}
			continue
		}
		fd := field{expr: f.Expr, col: -1, name: fieldName(f)}
		if cn, ok := f.Expr.(*ast.ColumnNameExpr); ok {
			i, err := e.lookup(cn.Name)
			if err != nil {
				return nil, err
			}
			fd.col = i
		}
		fields = append(fields, fd)
	}
	// Aggregates: one output row over all filtered rows.
	aggs := collectAggs(st.Fields.Fields)
	if len(aggs) > 0 {
		e.aggs = map[*ast.AggregateFuncExpr]val{}
		for _, a := range aggs {
			v, err := e.aggregate(a, rows)
			if err != nil {
				return nil, err
			}
			e.aggs[a] = v
		}
		if len(rows) > 0 {
			rows = rows[:1]
		} else {
			rows = [][]value.Datum{nil}
		}
		for i := range fields {
			if fields[i].col >= 0 {
				fields[i].expr, fields[i].col = &ast.ColumnNameExpr{Name: &ast.ColumnName{Name: ast.NewCIStr(fields[i].name)}}, -1
				if rows[0] == nil {
					fields[i].expr = &test_driver.ValueExpr{}
				}
			}
		}
	}
	// ORDER BY: keys per row, items may name a select-list alias or a
	// position.
	if st.OrderBy != nil && len(aggs) == 0 {
		items := st.OrderBy.Items
		keys := make([][]val, len(rows))
		for ri, r := range rows {
			e.row = r
			keys[ri] = make([]val, len(items))
			for ii, it := range items {
				x := it.Expr
				if cn, ok := x.(*ast.ColumnNameExpr); ok && cn.Name.Table.L == "" {
					// A select-list alias wins over a column name.
					for _, f := range fields {
						if f.expr != nil && strings.EqualFold(f.name, cn.Name.Name.O) {
							x = f.expr
							break
						}
					}
				}
				if ve, ok := x.(*test_driver.ValueExpr); ok {
					if pos, ok := ve.Datum.GetValue().(int64); ok {
						if pos < 1 || int(pos) > len(fields) {
							return nil, newError(ErBadField, "42S22", "Unknown column '%d' in 'order clause'", pos)
						}
						f := fields[pos-1]
						if f.col >= 0 {
							v, err := fromDatum(r[f.col], rel.cols[f.col].ft)
							if err != nil {
								return nil, err
							}
							keys[ri][ii] = v
							continue
						}
						x = f.expr
					}
				}
				v, err := e.eval(x)
				if err != nil {
					return nil, err
				}
				keys[ri][ii] = v
			}
		}
		idx := make([]int, len(rows))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			for ii, it := range items {
				x, y := keys[idx[a]][ii], keys[idx[b]][ii]
				var cmp int
				switch {
				case x.k == vNull && y.k == vNull:
					cmp = 0
				case x.k == vNull:
					cmp = -1
				case y.k == vNull:
					cmp = 1
				default:
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
		sorted := make([][]value.Datum, len(rows))
		for i, j := range idx {
			sorted[i] = rows[j]
		}
		rows = sorted
	}
	// Projection.
	rs := &resultSet{cols: make([]column, len(fields))}
	computed := make([]bool, len(fields))
	for i, f := range fields {
		if f.col >= 0 {
			rc := rel.cols[f.col]
			rs.cols[i] = columnOf(rc.ft, f.name, rc.name, rc.qual, rc.orgTable, rc.schema)
		} else {
			computed[i] = true
		}
	}
	firstVal := make([]val, len(fields))
	seen := map[string]bool{}
	for _, r := range rows {
		e.row = r
		out := make([][]byte, len(fields))
		for i, f := range fields {
			if f.col >= 0 {
				b, err := renderDatum(r[f.col])
				if err != nil {
					return nil, fmt.Errorf("column %s: %w", f.name, err)
				}
				out[i] = b
				continue
			}
			v, err := e.eval(f.expr)
			if err != nil {
				return nil, err
			}
			if firstVal[i].k == vNull {
				firstVal[i] = v
			}
			out[i] = v.text()
		}
		if st.Distinct {
			key := rowKey(out)
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		rs.rows = append(rs.rows, out)
	}
	if len(rows) == 0 && len(aggs) == 0 {
		// Types of computed columns without rows: evaluate once on no
		// row for constant expressions; errors are ignored here.
		e.row = nil
		for i, f := range fields {
			if computed[i] {
				if v, err := e.eval(f.expr); err == nil {
					firstVal[i] = v
				}
			}
		}
	}
	for i, f := range fields {
		if computed[i] {
			rs.cols[i] = columnOfVal(firstVal[i], f.name)
		}
	}
	// LIMIT
	if st.Limit != nil {
		off, n := int64(0), int64(-1)
		var err error
		if st.Limit.Offset != nil {
			if off, err = c.constInt(st.Limit.Offset); err != nil {
				return nil, err
			}
		}
		if n, err = c.constInt(st.Limit.Count); err != nil {
			return nil, err
		}
		if off > int64(len(rs.rows)) {
			off = int64(len(rs.rows))
		}
		rs.rows = rs.rows[off:]
		if n >= 0 && n < int64(len(rs.rows)) {
			rs.rows = rs.rows[:n]
		}
	}
	return rs, nil
}

func rowKey(cells [][]byte) string {
	var b []byte
	for _, c := range cells {
		if c == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return string(b)
}

func (c *conn) constInt(x ast.ExprNode) (int64, error) {
	v, err := (&env{c: c}).eval(x)
	if err != nil {
		return 0, err
	}
	return v.toInt()
}

// fieldName is the column name MySQL gives a select field: its alias, a
// column's name, else the expression's text.
func fieldName(f *ast.SelectField) string {
	if f.AsName.O != "" {
		return f.AsName.O
	}
	if cn, ok := f.Expr.(*ast.ColumnNameExpr); ok {
		return cn.Name.Name.O
	}
	if t := strings.TrimSpace(f.Text()); t != "" {
		return t
	}
	if t := strings.TrimSpace(f.Expr.Text()); t != "" {
		return t
	}
	return "?"
}

type aggCollector struct{ out []*ast.AggregateFuncExpr }

func (a *aggCollector) Enter(n ast.Node) (ast.Node, bool) {
	if x, ok := n.(*ast.AggregateFuncExpr); ok {
		a.out = append(a.out, x)
		return n, true
	}
	return n, false
}

func (a *aggCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func collectAggs(fs []*ast.SelectField) []*ast.AggregateFuncExpr {
	ac := &aggCollector{}
	for _, f := range fs {
		if f.Expr != nil {
			f.Expr.Accept(ac)
		}
	}
	return ac.out
}

// aggregate evaluates COUNT, SUM, AVG, MIN, MAX over rows (MY-R1).
func (e *env) aggregate(a *ast.AggregateFuncExpr, rows [][]value.Datum) (val, error) {
	name := strings.ToLower(a.F)
	if len(a.Args) != 1 {
		return null, errUnsupported("aggregate %s with %d arguments", a.F, len(a.Args))
	}
	var (
		count int64
		acc   val
		seen  = map[string]bool{}
	)
	for _, r := range rows {
		e.row = r
		v, err := e.eval(a.Args[0])
		if err != nil {
			return null, err
		}
		if v.k == vNull {
			continue
		}
		if a.Distinct {
			k := fmt.Sprintf("%d:%s", v.k, v.String())
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		count++
		switch name {
		case "sum", "avg":
			if acc.k == vNull {
				acc = decVal(v.toRat(), v.scale)
				if v.k == vFloat || v.k == vStr || v.k == vBytes {
					acc = val{k: vFloat, f: v.toFloat()}
				}
				continue
			}
			if acc, err = arith(opPlus, acc, v); err != nil {
				return null, err
			}
		case "min", "max":
			if acc.k == vNull {
				acc = v
				continue
			}
			c := compareVals(v, acc)
			if (name == "min" && c < 0) || (name == "max" && c > 0) {
				acc = v
			}
		case "count":
		default:
			return null, errUnsupported("aggregate %s", a.F)
		}
	}
	e.row = nil
	switch name {
	case "count":
		return intVal(count), nil
	case "avg":
		if count == 0 {
			return null, nil
		}
		return arith(opDiv, acc, intVal(count))
	}
	return acc, nil
}

// from loads the relation of the FROM clause (MY-R1, MY-R2, MY-R3).
func (c *conn) from(fr *ast.TableRefsClause) (*relation, error) {
	if fr == nil {
		return &relation{rows: [][]value.Datum{{}}}, nil
	}
	j := fr.TableRefs
	if j == nil || j.Right != nil {
		return nil, errUnsupported("joins (one table per SELECT)")
	}
	ts, ok := j.Left.(*ast.TableSource)
	if !ok {
		return nil, errUnsupported("FROM %T", j.Left)
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return nil, errUnsupported("subqueries in FROM")
	}
	db := tn.Schema.O
	if db == "" {
		db = c.db
	}
	if db == "" {
		return nil, newError(ErNoDB, "3D000", "No database selected")
	}
	qual := tn.Name.L
	if ts.AsName.L != "" {
		qual = ts.AsName.L
	}
	snapTs, err := c.readTs(tn.AsOf)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(db, "information_schema") {
		return c.infoSchema(tn.Name.L, qual, snapTs)
	}
	snap, err := sqlfront.ReadTable(c.ctx, c.srv.sql.Cluster(), db, tn.Name.O, snapTs)
	if err != nil {
		return nil, err
	}
	rel := &relation{}
	ti := snap.Table
	var offs []int
	for _, col := range ti.Columns {
		if col.State != model.StatePublic || col.Hidden {
			continue
		}
		ft := col.FieldType
		rel.cols = append(rel.cols, relCol{name: col.Name.O, schema: db, table: tn.Name.O, orgTable: ti.Name.O, qual: qual, ft: &ft})
		offs = append(offs, col.Offset)
	}
	for _, r := range snap.Rows {
		row := make([]value.Datum, len(offs))
		for i, off := range offs {
			if off >= 0 && off < len(r.Values) {
				row[i] = r.Values[off]
			}
		}
		rel.rows = append(rel.rows, row)
	}
	return rel, nil
}

// readTs is the ts a SELECT reads at: AS OF TIMESTAMP, else the session's
// tidb_snapshot, else a fresh TSO (MY-R2).
func (c *conn) readTs(asOf *ast.AsOfClause) (uint64, error) {
	cl := c.srv.sql.Cluster()
	now, err := cl.CurrentTs(c.ctx)
	if err != nil {
		return 0, err
	}
	var ts uint64
	switch {
	case asOf != nil:
		e := &env{c: c}
		x := asOf.TsExpr
		var v val
		if fc, ok := x.(*ast.FuncCallExpr); ok && fc.FnName.L == "tidb_parse_tso" && len(fc.Args) == 1 {
			v, err = e.eval(fc.Args[0])
		} else {
			v, err = e.eval(x)
		}
		if err != nil {
			return 0, err
		}
		if ts, err = c.parseTs(v); err != nil {
			return 0, err
		}
	case c.vars["tidb_snapshot"] != "":
		if ts, err = c.parseTs(strVal(c.vars["tidb_snapshot"])); err != nil {
			return 0, err
		}
	default:
		return now, nil
	}
	if ts > now {
		return 0, newError(8135, "HY000", "can not set read timestamp to a future time (%d > current %d)", ts, now)
	}
	if sp, err := cl.GCSafePoint(c.ctx); err == nil && ts < sp {
		return 0, newError(9006, "HY000", "GC life time is shorter than transaction duration: read ts %d is below the GC safe point %d", ts, sp)
	}
	return ts, nil
}

// ---- catalog from the meta keys ----

type catDB struct {
	info   model.DBInfo
	tables []*model.TableInfo
}

// readCatalog lists databases and tables from the meta hash keys at ts,
// as TiDB's infoschema would load them (MY-R3).
func (c *conn) readCatalog(ts uint64) ([]catDB, error) {
	cl := c.srv.sql.Cluster()
	scan := func(name string) ([][2][]byte, error) {
		prefix := tablecodec.EncodeHashDataPrefix(nil, name)
		kvs, err := cl.Scan(c.ctx, prefix, tablecodec.PrefixNext(prefix), ts, 0)
		if err != nil {
			return nil, fmt.Errorf("read meta hash %s at %d: %w", name, ts, err)
		}
		out := make([][2][]byte, 0, len(kvs))
		for _, kv := range kvs {
			_, field, err := codec.DecodeBytes(kv.Key[len(prefix):], nil)
			if err != nil {
				return nil, fmt.Errorf("meta key %x: %w", kv.Key, err)
			}
			out = append(out, [2][]byte{field, kv.Value})
		}
		return out, nil
	}
	dbs, err := scan("DBs")
	if err != nil {
		return nil, err
	}
	var out []catDB
	for _, f := range dbs {
		var d model.DBInfo
		if err := json.Unmarshal(f[1], &d); err != nil {
			return nil, fmt.Errorf("DBInfo %s: %w", f[0], err)
		}
		cd := catDB{info: d}
		fields, err := scan(fmt.Sprintf("DB:%d", d.ID))
		if err != nil {
			return nil, err
		}
		for _, tf := range fields {
			if !strings.HasPrefix(string(tf[0]), "Table:") {
				continue
			}
			ti, err := model.ParseTableInfo(tf[1])
			if err != nil {
				return nil, fmt.Errorf("TableInfo %s of database %s: %w", tf[0], d.Name.O, err)
			}
			cd.tables = append(cd.tables, ti)
		}
		sort.Slice(cd.tables, func(i, j int) bool { return cd.tables[i].Name.L < cd.tables[j].Name.L })
		out = append(out, cd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].info.Name.L < out[j].info.Name.L })
	return out, nil
}

// infoSchema serves information_schema.tables and .schemata (MY-R3).
func (c *conn) infoSchema(table, qual string, ts uint64) (*relation, error) {
	cat, err := c.readCatalog(ts)
	if err != nil {
		return nil, err
	}
	mk := func(names ...string) []relCol {
		out := make([]relCol, len(names))
		for i, n := range names {
			ft := stringFT()
			if strings.HasPrefix(n, "TIDB_TABLE_ID") {
				ft = bigintFT()
			}
			out[i] = relCol{name: n, schema: "information_schema", table: strings.ToUpper(table), orgTable: strings.ToUpper(table), qual: qual, ft: ft}
		}
		return out
	}
	s := value.NewStringDatum
	switch table {
	case "tables":
		rel := &relation{cols: mk("TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "ENGINE", "TABLE_COLLATION", "TIDB_TABLE_ID", "TIDB_PK_TYPE")}
		for _, d := range cat {
			for _, t := range d.tables {
				pk := "NONCLUSTERED"
				if t.PKIsHandle || t.IsCommonHandle {
					pk = "CLUSTERED"
				}
				coll := t.Collate
				if coll == "" {
					coll = "utf8mb4_bin"
				}
				rel.rows = append(rel.rows, []value.Datum{s("def"), s(d.info.Name.O), s(t.Name.O), s("BASE TABLE"), s("InnoDB"), s(coll), value.NewIntDatum(t.ID), s(pk)})
			}
		}
		return rel, nil
	case "schemata":
		rel := &relation{cols: mk("CATALOG_NAME", "SCHEMA_NAME", "DEFAULT_CHARACTER_SET_NAME", "DEFAULT_COLLATION_NAME")}
		rel.rows = append(rel.rows, []value.Datum{s("def"), s("INFORMATION_SCHEMA"), s("utf8mb4"), s("utf8mb4_bin")})
		for _, d := range cat {
			cs, co := d.info.Charset, d.info.Collate
			if cs == "" {
				cs, co = "utf8mb4", "utf8mb4_bin"
			}
			rel.rows = append(rel.rows, []value.Datum{s("def"), s(d.info.Name.O), s(cs), s(co)})
		}
		return rel, nil
	}
	return nil, newError(ErNoSuchTable, "42S02", "Table 'information_schema.%s' doesn't exist (sfemu serves tables and schemata)", table)
}

// ---- SHOW ----

func (c *conn) show(st *ast.ShowStmt) (*resultSet, error) {
	one := func(name string) []column { return []column{columnOfVal(strVal(""), name)} }
	like := func(s string) (bool, error) {
		if st.Pattern == nil {
			return true, nil
		}
		p, err := (&env{c: c}).eval(st.Pattern.Pattern)
		if err != nil {
			return false, err
		}
		return likeMatch(strings.ToLower(s), strings.ToLower(p.String()), '\\'), nil
	}
	now, err := c.srv.sql.Cluster().CurrentTs(c.ctx)
	if err != nil {
		return nil, err
	}
	switch st.Tp {
	case ast.ShowDatabases:
		cat, err := c.readCatalog(now)
		if err != nil {
			return nil, err
		}
		rs := &resultSet{cols: one("Database")}
		names := []string{"INFORMATION_SCHEMA"}
		for _, d := range cat {
			names = append(names, d.info.Name.O)
		}
		for _, n := range names {
			if ok, err := like(n); err != nil {
				return nil, err
			} else if ok {
				rs.rows = append(rs.rows, [][]byte{[]byte(n)})
			}
		}
		return rs, nil
	case ast.ShowTables:
		db := st.DBName
		if db == "" {
			db = c.db
		}
		if db == "" {
			return nil, newError(ErNoDB, "3D000", "No database selected")
		}
		cat, err := c.readCatalog(now)
		if err != nil {
			return nil, err
		}
		var found *catDB
		for i := range cat {
			if strings.EqualFold(cat[i].info.Name.O, db) {
				found = &cat[i]
			}
		}
		if found == nil {
			return nil, newError(ErBadDB, "42000", "Unknown database '%s'", db)
		}
		rs := &resultSet{cols: one("Tables_in_" + db)}
		if st.Full {
			rs.cols = append(rs.cols, columnOfVal(strVal(""), "Table_type"))
		}
		for _, t := range found.tables {
			if ok, err := like(t.Name.O); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			row := [][]byte{[]byte(t.Name.O)}
			if st.Full {
				row = append(row, []byte("BASE TABLE"))
			}
			rs.rows = append(rs.rows, row)
		}
		return rs, nil
	case ast.ShowVariables:
		rs := &resultSet{cols: append(one("Variable_name"), columnOfVal(strVal(""), "Value"))}
		names := []string{"autocommit", "tidb_current_ts"}
		for n := range sysVarDefaults {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if ok, err := like(n); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			v, err := c.sysVar(n)
			if err != nil {
				return nil, err
			}
			rs.rows = append(rs.rows, [][]byte{[]byte(n), append([]byte{}, v.String()...)})
		}
		return rs, nil
	case ast.ShowWarnings, ast.ShowErrors:
		return &resultSet{cols: []column{columnOfVal(strVal(""), "Level"), columnOfVal(intVal(0), "Code"), columnOfVal(strVal(""), "Message")}}, nil
	case ast.ShowColumns:
		db := st.Table.Schema.O
		if db == "" {
			db = st.DBName
		}
		if db == "" {
			db = c.db
		}
		snap, err := sqlfront.ReadTable(c.ctx, c.srv.sql.Cluster(), db, st.Table.Name.O, now)
		if err != nil {
			return nil, err
		}
		rs := &resultSet{}
		for _, n := range []string{"Field", "Type", "Null", "Key", "Default", "Extra"} {
			rs.cols = append(rs.cols, columnOfVal(strVal(""), n))
		}
		for _, col := range snap.Table.Columns {
			if col.State != model.StatePublic || col.Hidden {
				continue
			}
			ft := &col.FieldType
			nullable, key, extra := "YES", "", ""
			if mysql.HasNotNullFlag(ft.GetFlag()) {
				nullable = "NO"
			}
			switch {
			case mysql.HasPriKeyFlag(ft.GetFlag()):
				key = "PRI"
			case mysql.HasUniKeyFlag(ft.GetFlag()):
				key = "UNI"
			case mysql.HasMultipleKeyFlag(ft.GetFlag()):
				key = "MUL"
			}
			if mysql.HasAutoIncrementFlag(ft.GetFlag()) {
				extra = "auto_increment"
			}
			var def []byte
			if col.DefaultValue != nil {
				def = fmt.Append(nil, col.DefaultValue)
			}
			rs.rows = append(rs.rows, [][]byte{[]byte(col.Name.O), []byte(ft.InfoSchemaStr()), []byte(nullable), []byte(key), def, []byte(extra)})
		}
		return rs, nil
	case ast.ShowStatus, ast.ShowEngines, ast.ShowCharset, ast.ShowCollation, ast.ShowProcessList:
		return &resultSet{cols: append(one("Variable_name"), columnOfVal(strVal(""), "Value"))}, nil
	}
	return nil, errUnsupported("this SHOW statement")
}
