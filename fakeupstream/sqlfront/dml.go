package sqlfront

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// row is one decoded row: datums by column offset, plus where it lives.
type row struct {
	physID int64
	key    []byte
	handle tablecodec.Handle
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

// runDML runs one DML statement's writes into txn. lastID is the first
// auto-increment value the statement generated (0: none).
func (s *Server) runDML(ss *Session, txn *fakeupstream.Txn, st ast.StmtNode) (n int, lastID int64, err error) {
	switch x := st.(type) {
	case *ast.InsertStmt:
		if len(x.OnDuplicate) > 0 || x.Setlist || x.IgnoreErr {
			return 0, 0, unsupported("INSERT ... ON DUPLICATE KEY UPDATE / SET / IGNORE")
		}
		_, e, err := s.dmlTable(ss, x.Table)
		if err != nil {
			return 0, 0, err
		}
		if x.Select != nil {
			return s.insertSelect(ss, txn, e, x)
		}
		return s.insert(txn, e, x)
	case *ast.UpdateStmt:
		if x.MultipleTable || x.Order != nil || x.Limit != nil {
			return 0, 0, unsupported("multi-table UPDATE, ORDER BY or LIMIT")
		}
		_, e, err := s.dmlTable(ss, x.TableRefs)
		if err != nil {
			return 0, 0, err
		}
		n, err := s.update(txn, e, x)
		return n, 0, err
	case *ast.DeleteStmt:
		if x.IsMultiTable || x.Order != nil || x.Limit != nil {
			return 0, 0, unsupported("multi-table DELETE, ORDER BY or LIMIT")
		}
		_, e, err := s.dmlTable(ss, x.TableRefs)
		if err != nil {
			return 0, 0, err
		}
		n, err := s.delete(txn, e, x.Where)
		return n, 0, err
	}
	return 0, 0, unsupported("statement %T", st)
}

// insertColumns resolves an INSERT's column list (all columns when empty).
func insertColumns(ti *model.TableInfo, names []*ast.ColumnName) ([]*model.ColumnInfo, error) {
	if len(names) == 0 {
		return ti.Columns, nil
	}
	cols := make([]*model.ColumnInfo, 0, len(names))
	for _, cn := range names {
		c := ti.ColumnByName(cn.Name.O)
		if c == nil {
			return nil, fmt.Errorf("sqlfront: unknown column %q in field list of table %q", cn.Name.O, ti.Name.O)
		}
		cols = append(cols, c)
	}
	return cols, nil
}

func (s *Server) insert(txn *fakeupstream.Txn, e *tableEntry, st *ast.InsertStmt) (int, int64, error) {
	ti := e.info
	cols, err := insertColumns(ti, st.Columns)
	if err != nil {
		return 0, 0, err
	}
	n, first := 0, int64(0)
	for ri, list := range st.Lists {
		if len(list) != len(cols) {
			return 0, 0, fmt.Errorf("sqlfront: column count doesn't match value count at row %d", ri+1)
		}
		given := make(map[int64]literal, len(cols))
		for i, c := range cols {
			lit, err := evalLiteral(list[i])
			if err != nil {
				return 0, 0, unsupported("value of column %q: %v", c.Name.O, err)
			}
			given[c.ID] = lit
		}
		k, gen, err := s.insertGiven(txn, ti, given, st.IsReplace)
		if err != nil {
			return 0, 0, fmt.Errorf("%w (row %d)", err, ri+1)
		}
		if first == 0 {
			first = gen
		}
		n += k
	}
	return n, first, nil
}

// insertGiven builds a row from the given literals and inserts it; it
// returns the rows affected and the auto-increment value generated (0:
// none).
func (s *Server) insertGiven(txn *fakeupstream.Txn, ti *model.TableInfo, given map[int64]literal, replace bool) (int, int64, error) {
	r, gen, err := s.newRow(ti, given)
	if err != nil {
		return 0, 0, err
	}
	n, err := s.insertRow(txn, ti, r, replace)
	return n, gen, err
}

// insertRow writes a new row and its index entries. A row with the same
// handle, or a unique index entry another row holds, is a duplicate
// (ErrDuplicateKey); REPLACE deletes those rows first and counts them.
func (s *Server) insertRow(txn *fakeupstream.Txn, ti *model.TableInfo, r *row, replace bool) (int, error) {
	n := 0
	old, err := txn.Get(r.key)
	if err != nil {
		return 0, err
	}
	if old != nil {
		if !replace {
			return 0, fmt.Errorf("%w of table %q", ErrDuplicateKey, ti.Name.O)
		}
		or, err := decodeRow(s.m, ti, r.physID, r.key, old)
		if err != nil {
			return 0, err
		}
		if err := s.removeRow(txn, ti, or); err != nil {
			return 0, err
		}
		n++ // REPLACE counts the deleted row too
	}
	entries, err := s.rowIndexKVs(ti, r)
	if err != nil {
		return 0, err
	}
	for i, kv := range entries {
		if !kv.distinct {
			continue
		}
		other, err := s.holder(txn, ti, kv, i, r.physID)
		if err != nil {
			return 0, err
		}
		if other == nil {
			continue
		}
		if !replace {
			return 0, duplicateIndexEntry(ti, storedIndexes(ti)[i], r.datums)
		}
		if err := s.removeRow(txn, ti, other); err != nil {
			return 0, err
		}
		n++
	}
	if err := s.putRow(txn, ti, r, entries); err != nil {
		return 0, err
	}
	return n + 1, nil
}

// holder is the row that holds the distinct index entry kv (of the i-th
// stored index), or nil.
func (s *Server) holder(txn *fakeupstream.Txn, ti *model.TableInfo, kv indexKV, i int, phys int64) (*row, error) {
	v, err := txn.Get(kv.key)
	if err != nil || v == nil {
		return nil, err
	}
	h, err := handleFromIndex(ti, storedIndexes(ti)[i], kv.key, v)
	if err != nil {
		return nil, fmt.Errorf("sqlfront: index entry %x of table %q: %w", kv.key, ti.Name.O, err)
	}
	key := tablecodec.EncodeRecordKey(nil, phys, h)
	rv, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	if rv == nil {
		return nil, fmt.Errorf("sqlfront: index entry %x of table %q points at row %x, which does not exist", kv.key, ti.Name.O, key)
	}
	return decodeRow(s.m, ti, phys, key, rv)
}

// rowIndexKVs are r's entries of every stored index, in storedIndexes
// order.
func (s *Server) rowIndexKVs(ti *model.TableInfo, r *row) ([]indexKV, error) {
	idxs := storedIndexes(ti)
	if len(idxs) == 0 {
		return nil, nil
	}
	out := make([]indexKV, len(idxs))
	for i, idx := range idxs {
		kv, err := s.encodeIndexKV(ti, idx, r.physID, r.datums, r.handle)
		if err != nil {
			return nil, err
		}
		out[i] = kv
	}
	return out, nil
}

// putRow writes the record and the given index entries.
func (s *Server) putRow(txn *fakeupstream.Txn, ti *model.TableInfo, r *row, entries []indexKV) error {
	if err := s.writeRow(txn, ti, r); err != nil {
		return err
	}
	for _, kv := range entries {
		txn.Set(kv.key, kv.value)
	}
	return nil
}

// removeRow deletes the record and its index entries (their keys are
// enough: no index value is encoded).
func (s *Server) removeRow(txn *fakeupstream.Txn, ti *model.TableInfo, r *row) error {
	txn.Delete(r.key)
	var vals []value.Datum
	for _, idx := range storedIndexes(ti) {
		vals = vals[:0]
		for _, ic := range idx.Columns {
			vals = append(vals, r.datums[ic.Offset])
		}
		key, _, err := encodeIndexKey(ti, idx, r.physID, vals, r.handle)
		if err != nil {
			return err
		}
		txn.Delete(key)
	}
	return nil
}

// newRow fills a full row from the given literals: defaults, auto ids,
// handle and partition.
func (s *Server) newRow(ti *model.TableInfo, given map[int64]literal) (*row, int64, error) {
	r := &row{datums: make([]value.Datum, len(ti.Columns))}
	gen := int64(0)
	var err error
	for _, c := range ti.Columns {
		lit, ok := given[c.ID]
		ft := &c.FieldType
		if mysql.HasAutoIncrementFlag(ft.GetFlag()) && (!ok || lit.kind == litNull || (lit.kind == litInt && lit.i == 0) || lit.zeroDatum()) {
			id := s.cat.autoIDs[ti.ID] + 1
			if err := s.takeAutoID(ti.ID, id); err != nil {
				return nil, 0, err
			}
			lit, ok = literal{kind: litInt, i: id}, true
			gen = id
		}
		if !ok {
			d, err := defaultDatum(c)
			if err != nil {
				return nil, 0, err
			}
			r.datums[c.Offset] = d
			continue
		}
		var d value.Datum
		if lit.kind == litDatum {
			d = *lit.datum // a stored value of a column of the same type
		} else if d, err = toDatum(lit, ft, c.Name.O); err != nil {
			return nil, 0, fmt.Errorf("sqlfront: %w", err)
		}
		if mysql.HasAutoIncrementFlag(ft.GetFlag()) && d.Kind() == value.KindInt64 && d.GetInt64() > s.cat.autoIDs[ti.ID] {
			if err := s.takeAutoID(ti.ID, d.GetInt64()); err != nil {
				return nil, 0, err
			}
		}
		r.datums[c.Offset] = d
	}
	return r, gen, s.locate(ti, r, 0)
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
	r.handle = h
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
func (s *Server) writeRow(w kvWriter, ti *model.TableInfo, r *row) error {
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
	w.Set(r.key, v)
	return nil
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
	key = append([]byte(nil), key...)
	_, h, err := tablecodec.DecodeRecordKey(key)
	if err != nil {
		return nil, fmt.Errorf("sqlfront: record key %x of %q: %w", key, ti.Name.O, err)
	}
	return &row{physID: phys, key: key, handle: h, datums: ds}, nil
}

func (s *Server) update(txn *fakeupstream.Txn, e *tableEntry, st *ast.UpdateStmt) (int, error) {
	ti := e.info
	f, err := compileWhere(ti, st.Where)
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
			return 0, fmt.Errorf("sqlfront: unknown column %q in field list of table %q", a.Column.Name.O, ti.Name.O)
		}
		as = append(as, assign{c, a.Expr})
	}
	rowID := false
	if hi, _ := ti.HandleColumns(); hi.Kind == model.HandleRowID {
		rowID = true
	}
	n := 0
	// Every matching row is found before any is written, so the statement
	// never sees its own changes (a moved key is not matched twice).
	err = s.forMatches(txn, ti, f, func(r *row) error {
		nr := &row{datums: append([]value.Datum(nil), r.datums...)}
		for _, a := range as {
			lit, err := evalRowExpr(a.expr, ti, r.datums)
			if err != nil {
				return unsupported("SET %s: %v", a.col.Name.O, err)
			}
			d, err := toDatum(lit, &a.col.FieldType, a.col.Name.O)
			if err != nil {
				return fmt.Errorf("sqlfront: %w", err)
			}
			nr.datums[a.col.Offset] = d
		}
		id := int64(0)
		if rowID {
			id = r.handle.IntValue()
		}
		if err := s.locate(ti, nr, id); err != nil {
			return err
		}
		if err := s.updateRow(txn, ti, r, nr); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// updateRow replaces row r by nr: when the handle or the partition changed
// the old record goes and the new one must not exist (S15); each index
// entry that changed is deleted and rewritten, a unique one checked
// against other rows first (S20).
func (s *Server) updateRow(txn *fakeupstream.Txn, ti *model.TableInfo, r, nr *row) error {
	if !bytes.Equal(nr.key, r.key) {
		// The handle or partition changed: TiDB deletes the old key and
		// writes the new one in the same transaction.
		v, err := txn.Get(nr.key)
		if err != nil {
			return err
		}
		if v != nil {
			return fmt.Errorf("%w of table %q", ErrDuplicateKey, ti.Name.O)
		}
		txn.Delete(r.key)
	}
	moved := !bytes.Equal(nr.key, r.key)
	idxs := storedIndexes(ti)
	for i, idx := range idxs {
		if !moved && sameIndexValues(idx, r.datums, nr.datums) {
			continue // untouched: TiDB writes nothing for it
		}
		o, err := s.encodeIndexKV(ti, idx, r.physID, r.datums, r.handle)
		if err != nil {
			return err
		}
		n, err := s.encodeIndexKV(ti, idx, nr.physID, nr.datums, nr.handle)
		if err != nil {
			return err
		}
		if bytes.Equal(o.key, n.key) && bytes.Equal(o.value, n.value) {
			continue // untouched: TiDB writes nothing for it
		}
		if !bytes.Equal(o.key, n.key) {
			txn.Delete(o.key)
			if n.distinct {
				other, err := s.holder(txn, ti, n, i, nr.physID)
				if err != nil {
					return err
				}
				if other != nil {
					return duplicateIndexEntry(ti, idxs[i], nr.datums)
				}
			}
		}
		txn.Set(n.key, n.value)
	}
	return s.writeRow(txn, ti, nr)
}

// sameIndexValues: idx's columns hold the same datums in a and b.
func sameIndexValues(idx *model.IndexInfo, a, b []value.Datum) bool {
	for _, ic := range idx.Columns {
		if !a[ic.Offset].Equal(&b[ic.Offset]) {
			return false
		}
	}
	return true
}

func (s *Server) delete(txn *fakeupstream.Txn, e *tableEntry, where ast.ExprNode) (int, error) {
	ti := e.info
	f, err := compileWhere(ti, where)
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.forMatches(txn, ti, f, func(r *row) error {
		n++
		return s.removeRow(txn, ti, r)
	})
	return n, err
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
