package sqlfront

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// stagedWrites buffers one statement's writes so a failing statement
// leaves its transaction untouched; reads see them first.
type stagedWrites struct {
	keys []string
	vals map[string][]byte // nil value = delete
}

func (w *stagedWrites) set(k, v []byte) {
	if w.vals == nil {
		w.vals = map[string][]byte{}
	}
	ks := string(k)
	if _, ok := w.vals[ks]; !ok {
		w.keys = append(w.keys, ks)
	}
	w.vals[ks] = v
}

func (w *stagedWrites) get(k []byte) ([]byte, bool) {
	v, ok := w.vals[string(k)]
	return v, ok
}

func (w *stagedWrites) applyTo(txn *fakeupstream.Txn) {
	for _, k := range w.keys {
		if v := w.vals[k]; v == nil {
			txn.Delete([]byte(k))
		} else {
			txn.Set([]byte(k), v)
		}
	}
}

// row is one decoded row: datums by column offset, plus where it lives.
type row struct {
	physID int64
	key    []byte
	datums []value.Datum
}

func (s *Server) dmlTable(ss *Session, refs *ast.TableRefsClause) (*model.DBInfo, *tableEntry, error) {
	if refs == nil || refs.TableRefs == nil || refs.TableRefs.Right != nil {
		return nil, nil, unsupported("multi-table DML")
	}
	src, ok := refs.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return nil, nil, unsupported("DML on a non-table source")
	}
	tn, ok := src.Source.(*ast.TableName)
	if !ok {
		return nil, nil, unsupported("DML on a subquery")
	}
	return s.tableFor(ss, tn)
}

func (s *Server) runDML(ss *Session, txn *fakeupstream.Txn, w *stagedWrites, st ast.StmtNode) (int, error) {
	switch x := st.(type) {
	case *ast.InsertStmt:
		if x.Select != nil || len(x.OnDuplicate) > 0 || x.Setlist || x.IgnoreErr {
			return 0, unsupported("INSERT ... SELECT / ON DUPLICATE KEY UPDATE / SET / IGNORE")
		}
		_, e, err := s.dmlTable(ss, x.Table)
		if err != nil {
			return 0, err
		}
		return s.insert(txn, w, e, x)
	case *ast.UpdateStmt:
		if x.MultipleTable || x.Order != nil || x.Limit != nil {
			return 0, unsupported("multi-table UPDATE, ORDER BY or LIMIT")
		}
		_, e, err := s.dmlTable(ss, x.TableRefs)
		if err != nil {
			return 0, err
		}
		return s.update(txn, w, e, x)
	case *ast.DeleteStmt:
		if x.IsMultiTable || x.Order != nil || x.Limit != nil {
			return 0, unsupported("multi-table DELETE, ORDER BY or LIMIT")
		}
		_, e, err := s.dmlTable(ss, x.TableRefs)
		if err != nil {
			return 0, err
		}
		return s.delete(txn, w, e, x.Where)
	}
	return 0, unsupported("statement %T", st)
}

func (s *Server) insert(txn *fakeupstream.Txn, w *stagedWrites, e *tableEntry, st *ast.InsertStmt) (int, error) {
	ti := e.info
	var cols []*model.ColumnInfo
	if len(st.Columns) == 0 {
		cols = ti.Columns
	} else {
		for _, cn := range st.Columns {
			c := ti.ColumnByName(cn.Name.O)
			if c == nil {
				return 0, fmt.Errorf("sqlfront: unknown column %q in field list", cn.Name.O)
			}
			cols = append(cols, c)
		}
	}
	n := 0
	for ri, list := range st.Lists {
		if len(list) != len(cols) {
			return 0, fmt.Errorf("sqlfront: column count doesn't match value count at row %d", ri+1)
		}
		given := make(map[int64]literal, len(cols))
		for i, c := range cols {
			lit, err := evalLiteral(list[i])
			if err != nil {
				return 0, unsupported("value of column %q: %v", c.Name.O, err)
			}
			given[c.ID] = lit
		}
		r, err := s.newRow(ti, given)
		if err != nil {
			return 0, fmt.Errorf("%w (row %d)", err, ri+1)
		}
		old, exists, err := s.read(txn, w, r.key)
		if err != nil {
			return 0, err
		}
		if exists {
			if !st.IsReplace {
				return 0, fmt.Errorf("%w of table %q (row %d)", ErrDuplicateKey, ti.Name.O, ri+1)
			}
			_ = old
			n++ // REPLACE counts the deleted row too
		}
		if err := s.writeRow(w, ti, r); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// newRow fills a full row from the given literals: defaults, auto ids,
// handle and partition.
func (s *Server) newRow(ti *model.TableInfo, given map[int64]literal) (*row, error) {
	r := &row{datums: make([]value.Datum, len(ti.Columns))}
	for _, c := range ti.Columns {
		lit, ok := given[c.ID]
		ft := &c.FieldType
		if mysql.HasAutoIncrementFlag(ft.GetFlag()) && (!ok || lit.kind == litNull || (lit.kind == litInt && lit.i == 0)) {
			id := s.cat.autoIDs[ti.ID] + 1
			if err := s.takeAutoID(ti.ID, id); err != nil {
				return nil, err
			}
			lit, ok = literal{kind: litInt, i: id}, true
		}
		if !ok {
			d, err := defaultDatum(c)
			if err != nil {
				return nil, err
			}
			r.datums[c.Offset] = d
			continue
		}
		d, err := toDatum(lit, ft, c.Name.O)
		if err != nil {
			return nil, fmt.Errorf("sqlfront: %w", err)
		}
		if mysql.HasAutoIncrementFlag(ft.GetFlag()) && d.Kind() == value.KindInt64 && d.GetInt64() > s.cat.autoIDs[ti.ID] {
			if err := s.takeAutoID(ti.ID, d.GetInt64()); err != nil {
				return nil, err
			}
		}
		r.datums[c.Offset] = d
	}
	return r, s.locate(ti, r, 0)
}

// defaultDatum is a column's value when an INSERT does not give one.
func defaultDatum(c *model.ColumnInfo) (value.Datum, error) {
	ft := &c.FieldType
	if c.DefaultValue == nil {
		if mysql.HasNotNullFlag(ft.GetFlag()) {
			return value.Datum{}, fmt.Errorf("sqlfront: field %q doesn't have a default value", c.Name.O)
		}
		return value.NewNullDatum(), nil
	}
	text, ok := c.DefaultValue.(string)
	if !ok {
		text = fmt.Sprint(c.DefaultValue)
	}
	if ft.GetType() == mysql.TypeBit && len(c.DefaultValueBit) > 0 {
		return toDatum(literal{kind: litBinary, s: string(c.DefaultValueBit)}, ft, c.Name.O)
	}
	return toDatum(literal{kind: litString, s: text}, ft, c.Name.O)
}

// locate computes a row's handle key and physical table. rowID is the
// existing _tidb_rowid for rows being rewritten (0 = allocate).
func (s *Server) locate(ti *model.TableInfo, r *row, rowID int64) error {
	phys, err := partitionOf(ti, r.datums)
	if err != nil {
		return err
	}
	r.physID = phys
	hi, err := ti.HandleColumns()
	if err != nil {
		return err
	}
	var h tablecodec.Handle
	switch hi.Kind {
	case model.HandleInt:
		d := r.datums[hi.Columns[0].Column.Offset]
		if d.Kind() == value.KindUint64 {
			h = tablecodec.NewIntHandle(int64(d.GetUint64()))
		} else {
			h = tablecodec.NewIntHandle(d.GetInt64())
		}
	case model.HandleCommon:
		keys := make([]value.Datum, len(hi.Columns))
		for i, hc := range hi.Columns {
			col := hc.Column
			d := r.datums[hc.Column.Offset]
			if d.Kind() == value.KindString || d.Kind() == value.KindBytes {
				sk, err := codec.SortKey(col.FieldType.GetCollate(), d.GetBytes())
				if err != nil {
					return err
				}
				d = value.NewBytesDatum(sk)
			}
			keys[i] = d
		}
		if h, err = tablecodec.CommonHandleFromDatums(keys...); err != nil {
			return err
		}
	default:
		if rowID == 0 {
			rowID = s.cat.autoIDs[ti.ID] + 1
			if err := s.takeAutoID(ti.ID, rowID); err != nil {
				return err
			}
		}
		h = tablecodec.NewIntHandle(rowID)
	}
	r.key = tablecodec.EncodeRecordKey(nil, phys, h)
	return nil
}

// partitionOf routes a row to its physical table.
func partitionOf(ti *model.TableInfo, datums []value.Datum) (int64, error) {
	pi := ti.Partition
	if pi == nil {
		return ti.ID, nil
	}
	var colName string
	if len(pi.Columns) > 0 {
		colName = pi.Columns[0].L
	} else {
		colName = trimQuotes(pi.Expr)
	}
	col := ti.ColumnByName(colName)
	if col == nil {
		return 0, fmt.Errorf("sqlfront: partition column %q of table %q not found", colName, ti.Name.O)
	}
	d := datums[col.Offset]
	if d.IsNull() {
		// NULL goes to the first partition (RANGE) / partition 0 (HASH).
		return pi.Definitions[0].ID, nil
	}
	var v int64
	var uv uint64
	unsigned := d.Kind() == value.KindUint64
	if unsigned {
		uv = d.GetUint64()
	} else {
		v = d.GetInt64()
	}
	switch pi.Type {
	case model.PartitionType(1):
		for _, def := range pi.Definitions {
			b := def.LessThan[0]
			if b == "MAXVALUE" {
				return def.ID, nil
			}
			bound, err := strconv.ParseInt(b, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("sqlfront: partition %q bound %q: %w", def.Name.O, b, err)
			}
			if unsigned {
				if bound > 0 && uv < uint64(bound) {
					return def.ID, nil
				}
			} else if v < bound {
				return def.ID, nil
			}
		}
		return 0, fmt.Errorf("sqlfront: table %q has no partition for value %s", ti.Name.O, d.String())
	case model.PartitionType(2):
		n := uint64(len(pi.Definitions))
		var idx uint64
		if unsigned {
			idx = uv % n
		} else {
			m := v % int64(n)
			if m < 0 {
				m = -m
			}
			idx = uint64(m)
		}
		return pi.Definitions[idx].ID, nil
	}
	return 0, fmt.Errorf("sqlfront: unsupported partition type %d", pi.Type)
}

func trimQuotes(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		s = s[1 : len(s)-1]
	}
	return lower(s)
}

// writeRow encodes a row as TiDB does: every stored column but an integer
// handle, in row format v2.
func (s *Server) writeRow(w *stagedWrites, ti *model.TableInfo, r *row) error {
	ids := make([]int64, 0, len(ti.Columns))
	ds := make([]value.Datum, 0, len(ti.Columns))
	for _, c := range ti.Columns {
		if canSkipColumn(ti, c, &r.datums[c.Offset]) {
			continue
		}
		ids = append(ids, c.ID)
		ds = append(ds, r.datums[c.Offset])
	}
	v, err := s.enc.EncodeV2(nil, ids, ds, nil)
	if err != nil {
		return fmt.Errorf("sqlfront: encode row of %q: %w", ti.Name.O, err)
	}
	w.set(r.key, v)
	return nil
}

func (s *Server) read(txn *fakeupstream.Txn, w *stagedWrites, key []byte) ([]byte, bool, error) {
	if v, ok := w.get(key); ok {
		return v, v != nil, nil
	}
	v, err := txn.Get(key)
	if err != nil {
		return nil, false, err
	}
	return v, v != nil, nil
}

// scanRows reads every row of the table (all partitions) visible to txn,
// staged writes included, decoded with the current TableInfo.
func (s *Server) scanRows(txn *fakeupstream.Txn, w *stagedWrites, ti *model.TableInfo) ([]*row, error) {
	m := mounter.New(mounter.Config{})
	var out []*row
	for _, phys := range ti.PhysicalIDs() {
		start := tablecodec.EncodeRecordPrefix(nil, phys)
		end := tablecodec.PrefixNext(start)
		kvs, err := txn.Scan(start, end, 0)
		if err != nil {
			return nil, err
		}
		merged := map[string][]byte{}
		for _, kv := range kvs {
			merged[string(kv.Key)] = kv.Value
		}
		for _, k := range w.keys {
			if bytes.HasPrefix([]byte(k), start) {
				merged[k] = w.vals[k]
			}
		}
		keys := make([]string, 0, len(merged))
		for k, v := range merged {
			if v != nil {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			r, err := decodeRow(m, ti, phys, []byte(k), merged[k])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func decodeRow(m *mounter.Mounter, ti *model.TableInfo, phys int64, key, val []byte) (*row, error) {
	var rc mounter.RowChange
	entry := kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: key, Value: val, CRTs: math.MaxUint64}
	if err := m.Decode(&entry, ti, &rc); err != nil {
		return nil, fmt.Errorf("sqlfront: decode row %x of %q: %w", key, ti.Name.O, err)
	}
	ds, err := rc.Row.Datums(nil)
	if err != nil {
		return nil, err
	}
	for i := range ds {
		ds[i] = ds[i].Clone()
	}
	return &row{physID: phys, key: append([]byte(nil), key...), datums: ds}, nil
}

func (s *Server) update(txn *fakeupstream.Txn, w *stagedWrites, e *tableEntry, st *ast.UpdateStmt) (int, error) {
	ti := e.info
	pred, err := compileWhere(ti, st.Where)
	if err != nil {
		return 0, err
	}
	rows, err := s.scanRows(txn, w, ti)
	if err != nil {
		return 0, err
	}
	type assign struct {
		col  *model.ColumnInfo
		expr ast.ExprNode
	}
	var as []assign
	for _, a := range st.List {
		c := ti.ColumnByName(a.Column.Name.O)
		if c == nil {
			return 0, fmt.Errorf("sqlfront: unknown column %q in field list", a.Column.Name.O)
		}
		as = append(as, assign{c, a.Expr})
	}
	n := 0
	for _, r := range rows {
		ok, err := pred(r.datums)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		nr := &row{datums: append([]value.Datum(nil), r.datums...)}
		for _, a := range as {
			lit, err := evalRowExpr(a.expr, ti, r.datums)
			if err != nil {
				return 0, unsupported("SET %s: %v", a.col.Name.O, err)
			}
			d, err := toDatum(lit, &a.col.FieldType, a.col.Name.O)
			if err != nil {
				return 0, fmt.Errorf("sqlfront: %w", err)
			}
			nr.datums[a.col.Offset] = d
		}
		rowID := int64(0)
		if hi, _ := ti.HandleColumns(); hi.Kind == model.HandleRowID {
			_, h, err := tablecodec.DecodeRecordKey(r.key)
			if err != nil {
				return 0, err
			}
			rowID = h.IntValue()
		}
		if err := s.locate(ti, nr, rowID); err != nil {
			return 0, err
		}
		if !bytes.Equal(nr.key, r.key) {
			// The handle or partition changed: TiDB deletes the old key
			// and writes the new one in the same transaction.
			if _, exists, err := s.read(txn, w, nr.key); err != nil {
				return 0, err
			} else if exists {
				return 0, fmt.Errorf("%w of table %q", ErrDuplicateKey, ti.Name.O)
			}
			w.set(r.key, nil)
		}
		if err := s.writeRow(w, ti, nr); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

func (s *Server) delete(txn *fakeupstream.Txn, w *stagedWrites, e *tableEntry, where ast.ExprNode) (int, error) {
	ti := e.info
	pred, err := compileWhere(ti, where)
	if err != nil {
		return 0, err
	}
	rows, err := s.scanRows(txn, w, ti)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		ok, err := pred(r.datums)
		if err != nil {
			return 0, err
		}
		if ok {
			w.set(r.key, nil)
			n++
		}
	}
	return n, nil
}

// compileWhere accepts AND-ed comparisons of a column with a literal
// (=, !=, <, <=, >, >=), IS [NOT] NULL, and no WHERE at all.
func compileWhere(ti *model.TableInfo, e ast.ExprNode) (func([]value.Datum) (bool, error), error) {
	if e == nil {
		return func([]value.Datum) (bool, error) { return true, nil }, nil
	}
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return compileWhere(ti, x.Expr)
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicAnd {
			l, err := compileWhere(ti, x.L)
			if err != nil {
				return nil, err
			}
			r, err := compileWhere(ti, x.R)
			if err != nil {
				return nil, err
			}
			return func(ds []value.Datum) (bool, error) {
				ok, err := l(ds)
				if err != nil || !ok {
					return false, err
				}
				return r(ds)
			}, nil
		}
		colExpr, lit, op := x.L, x.R, x.Op
		if _, ok := colExpr.(*ast.ColumnNameExpr); !ok {
			colExpr, lit, op = x.R, x.L, flip(x.Op)
		}
		cn, ok := colExpr.(*ast.ColumnNameExpr)
		if !ok {
			return nil, unsupported("WHERE comparison without a column: %T", x.L)
		}
		col := ti.ColumnByName(cn.Name.Name.O)
		if col == nil {
			return nil, fmt.Errorf("sqlfront: unknown column %q in where clause", cn.Name.Name.O)
		}
		l, err := evalLiteral(lit)
		if err != nil {
			return nil, unsupported("WHERE %s: %v", col.Name.O, err)
		}
		if l.kind == litNull {
			return func([]value.Datum) (bool, error) { return false, nil }, nil
		}
		want, err := toDatum(l, withoutNotNull(&col.FieldType), col.Name.O)
		if err != nil {
			return nil, fmt.Errorf("sqlfront: %w", err)
		}
		off := col.Offset
		return func(ds []value.Datum) (bool, error) {
			d := ds[off]
			if d.IsNull() {
				return false, nil
			}
			c, err := compareDatums(&d, &want)
			if err != nil {
				return false, err
			}
			switch op {
			case opcode.EQ:
				return c == 0, nil
			case opcode.NE:
				return c != 0, nil
			case opcode.LT:
				return c < 0, nil
			case opcode.LE:
				return c <= 0, nil
			case opcode.GT:
				return c > 0, nil
			case opcode.GE:
				return c >= 0, nil
			}
			return false, unsupported("WHERE operator %s", op)
		}, nil
	case *ast.IsNullExpr:
		cn, ok := x.Expr.(*ast.ColumnNameExpr)
		if !ok {
			return nil, unsupported("IS NULL on a non-column")
		}
		col := ti.ColumnByName(cn.Name.Name.O)
		if col == nil {
			return nil, fmt.Errorf("sqlfront: unknown column %q in where clause", cn.Name.Name.O)
		}
		off, not := col.Offset, x.Not
		return func(ds []value.Datum) (bool, error) { return ds[off].IsNull() != not, nil }, nil
	}
	return nil, unsupported("WHERE expression %T", e)
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

// canSkipColumn says whether TiDB leaves a column out of the row value:
// the integer handle column; clustered-key columns whose whole value the key
// restores (not strings, whose collation may lose their original bytes);
// and NULLs of columns whose default and origin default are NULL (a reader
// fills exactly that).
func canSkipColumn(ti *model.TableInfo, c *model.ColumnInfo, d *value.Datum) bool {
	if ti.PKIsHandle && mysql.HasPriKeyFlag(c.FieldType.GetFlag()) {
		return true
	}
	if ti.IsCommonHandle && mysql.HasPriKeyFlag(c.FieldType.GetFlag()) {
		if pk := ti.PrimaryIndex(); pk != nil {
			for _, ic := range pk.Columns {
				if ic.Offset == c.Offset {
					return ic.Length == types.UnspecifiedLength && !needsRestoredData(&c.FieldType)
				}
			}
		}
	}
	return d.IsNull() && c.DefaultValue == nil && c.OriginDefaultValue == nil
}

// needsRestoredData: a string's key form (its collation sort key) cannot
// give back the original value, so the row keeps it.
func needsRestoredData(ft *types.FieldType) bool {
	switch ft.GetType() {
	case mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeString, mysql.TypeBlob, mysql.TypeTinyBlob,
		mysql.TypeMediumBlob, mysql.TypeLongBlob:
		return ft.GetCollate() != "binary"
	}
	return false
}
