package sqlfront

import (
	"context"
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// addedIndexes lists the stored indexes of next that prev lacks.
func addedIndexes(prev, next *model.TableInfo) []*model.IndexInfo {
	had := map[int64]bool{}
	for _, idx := range prev.Indices {
		had[idx.ID] = true
	}
	var out []*model.IndexInfo
	for _, idx := range storedIndexes(next) {
		if !had[idx.ID] {
			out = append(out, idx)
		}
	}
	return out
}

// backfillIndexes writes the entries of the given new indexes of ti for
// every row txn sees (TiDB's ADD INDEX backfill; S20). A unique index over
// duplicate values fails with ErrDuplicateKey.
func (s *Server) backfillIndexes(txn *fakeupstream.Txn, ti *model.TableInfo, idxs []*model.IndexInfo) error {
	return s.eachRow(txn, ti, &accessPlan{full: true}, func(r *row) error {
		for _, idx := range idxs {
			kv, err := s.encodeIndexKV(ti, idx, r.physID, r.datums, r.handle)
			if err != nil {
				return err
			}
			if kv.distinct {
				v, err := txn.Get(kv.key)
				if err != nil {
					return err
				}
				if v != nil {
					return duplicateIndexEntry(ti, idx, r.datums)
				}
			}
			txn.Set(kv.key, kv.value)
		}
		return nil
	})
}

// Action type numbers (TiDB's ActionType; see tidb-data-formats.md §7.8).
const (
	actCreateSchema      model.ActionType = 1
	actDropSchema        model.ActionType = 2
	actCreateTable       model.ActionType = 3
	actDropTable         model.ActionType = 4
	actAddColumn         model.ActionType = 5
	actDropColumn        model.ActionType = 6
	actAddIndex          model.ActionType = 7
	actDropIndex         model.ActionType = 8
	actTruncateTable     model.ActionType = 11
	actModifyColumn      model.ActionType = 12
	actRenameTable       model.ActionType = 14
	actAddPartition      model.ActionType = 19
	actDropPartition     model.ActionType = 20
	actTruncatePartition model.ActionType = 23
	actAddPrimaryKey     model.ActionType = 32
	actDropPrimaryKey    model.ActionType = 33
)

func (s *Server) currentDB(sess *Session, name string) (*model.DBInfo, error) {
	if name == "" {
		name = sess.db
	}
	if name == "" {
		return nil, fmt.Errorf("sqlfront: no database selected")
	}
	d := s.cat.dbByName(name)
	if d == nil {
		return nil, fmt.Errorf("sqlfront: unknown database %q", name)
	}
	if systemSchemas[d.Name.L] {
		return nil, fmt.Errorf("sqlfront: system schema %q cannot be changed through SQL", d.Name.O)
	}
	return d, nil
}

func (s *Server) execCreateDatabase(ctx context.Context, st *ast.CreateDatabaseStmt, query string) (uint64, error) {
	if s.cat.dbByName(st.Name.O) != nil {
		if st.IfNotExists {
			return 0, nil
		}
		return 0, fmt.Errorf("sqlfront: database %q exists", st.Name.O)
	}
	charset, collate := "utf8mb4", "utf8mb4_bin"
	for _, o := range st.Options {
		switch o.Tp {
		case ast.DatabaseOptionCharset:
			charset = o.Value
		case ast.DatabaseOptionCollate:
			collate = o.Value
		default:
			return 0, unsupported("database option %d", o.Tp)
		}
	}
	job := &model.Job{Type: actCreateSchema, SchemaName: st.Name.O, Query: query}
	return s.runJob(ctx, &ddlChange{job: job, apply: func(w kvWriter, c *catalog) error {
		d := &model.DBInfo{ID: c.allocID(), Name: cistr(st.Name.O), Charset: charset, Collate: collate, State: model.StatePublic}
		job.SchemaID = d.ID
		job.SchemaState = model.StatePublic
		job.BinlogInfo = &model.HistoryInfo{DBInfo: d}
		c.dbs[d.ID] = d
		return s.putDB(w, d)
	}, schemaIDs: nil})
}

func (s *Server) execDropDatabase(ctx context.Context, st *ast.DropDatabaseStmt, query string) (uint64, error) {
	d := s.cat.dbByName(st.Name.O)
	if d == nil {
		if st.IfExists {
			return 0, nil
		}
		return 0, fmt.Errorf("sqlfront: unknown database %q", st.Name.O)
	}
	if systemSchemas[d.Name.L] {
		return 0, fmt.Errorf("sqlfront: system schema %q cannot be dropped", d.Name.O)
	}
	job := &model.Job{Type: actDropSchema, SchemaID: d.ID, SchemaName: d.Name.O, Query: query}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: []int64{d.ID}, apply: func(w kvWriter, c *catalog) error {
		for _, e := range c.tablesOf(d.ID) {
			delete(c.tables, e.info.ID)
		}
		delete(c.dbs, d.ID)
		dropped := *d
		dropped.State = model.StateNone
		job.SchemaState = model.StateNone
		job.BinlogInfo = &model.HistoryInfo{DBInfo: &dropped}
		w.Delete(tablecodecDBKey(d.ID))
		// TiDB also removes the DB:<id> hash; its table fields go with it.
		for _, e := range s.cat.tablesOf(d.ID) {
			w.Delete(tablecodecTableKey(d.ID, e.info.ID))
		}
		return nil
	}})
}

func (s *Server) execCreateTable(ctx context.Context, sess *Session, st *ast.CreateTableStmt, query string) (uint64, error) {
	d, err := s.currentDB(sess, st.Table.Schema.O)
	if err != nil {
		return 0, err
	}
	if _, _, err := s.cat.lookupTable(d.Name.O, st.Table.Name.O); err == nil {
		if st.IfNotExists {
			return 0, nil
		}
		return 0, fmt.Errorf("sqlfront: table %s.%s already exists", d.Name.O, st.Table.Name.O)
	}
	// Validate the definition before any job is written.
	if _, err := buildTable(s.cat.clone(), st, d); err != nil {
		return 0, err
	}
	job := &model.Job{Type: actCreateTable, SchemaID: d.ID, SchemaName: d.Name.O, TableName: st.Table.Name.O, Query: query}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: []int64{d.ID}, apply: func(w kvWriter, c *catalog) error {
		ti, err := buildTable(c, st, d)
		if err != nil {
			return err
		}
		job.TableID = ti.ID
		job.SchemaState = model.StatePublic
		job.BinlogInfo = &model.HistoryInfo{TableInfo: ti}
		c.tables[ti.ID] = &tableEntry{dbID: d.ID, info: ti}
		return s.putTable(w, d.ID, ti)
	}})
}

func (s *Server) tableFor(sess *Session, tn *ast.TableName) (*model.DBInfo, *tableEntry, error) {
	d, err := s.currentDB(sess, tn.Schema.O)
	if err != nil {
		return nil, nil, err
	}
	_, e, err := s.cat.lookupTable(d.Name.O, tn.Name.O)
	if err != nil {
		return nil, nil, err
	}
	return d, e, nil
}

func (s *Server) execDropTable(ctx context.Context, sess *Session, st *ast.DropTableStmt, query string) (uint64, error) {
	if st.IsView || len(st.Tables) != 1 {
		return 0, unsupported("DROP VIEW or dropping several tables in one statement")
	}
	d, e, err := s.tableFor(sess, st.Tables[0])
	if err != nil {
		if st.IfExists {
			return 0, nil
		}
		return 0, err
	}
	job := &model.Job{Type: actDropTable, SchemaID: d.ID, TableID: e.info.ID, SchemaName: d.Name.O, TableName: e.info.Name.O, Query: query}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: []int64{d.ID}, tableIDs: []int64{e.info.ID}, apply: func(w kvWriter, c *catalog) error {
		delete(c.tables, e.info.ID)
		dropped := e.info.Clone()
		dropped.State = model.StateNone
		job.SchemaState = model.StateNone
		job.BinlogInfo = &model.HistoryInfo{TableInfo: dropped}
		w.Delete(tablecodecTableKey(d.ID, e.info.ID))
		return nil
	}})
}

func (s *Server) execTruncateTable(ctx context.Context, sess *Session, st *ast.TruncateTableStmt, query string) (uint64, error) {
	d, e, err := s.tableFor(sess, st.Table)
	if err != nil {
		return 0, err
	}
	job := &model.Job{Type: actTruncateTable, SchemaID: d.ID, TableID: e.info.ID, SchemaName: d.Name.O, TableName: e.info.Name.O, Query: query}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: []int64{d.ID}, tableIDs: []int64{e.info.ID}, apply: func(w kvWriter, c *catalog) error {
		ti := e.info.Clone()
		ti.ID = c.allocID()
		if ti.Partition != nil {
			for i := range ti.Partition.Definitions {
				ti.Partition.Definitions[i].ID = c.allocID()
			}
		}
		delete(c.tables, e.info.ID)
		c.tables[ti.ID] = &tableEntry{dbID: d.ID, info: ti}
		job.SchemaState = model.StatePublic
		job.BinlogInfo = &model.HistoryInfo{TableInfo: ti}
		w.Delete(tablecodecTableKey(d.ID, e.info.ID))
		return s.putTable(w, d.ID, ti)
	}})
}

func (s *Server) execRenameTable(ctx context.Context, sess *Session, st *ast.RenameTableStmt, query string) (uint64, error) {
	if len(st.TableToTables) != 1 {
		return s.renameTables(ctx, sess, st, query)
	}
	return s.renameTable(ctx, sess, st.TableToTables[0].OldTable, st.TableToTables[0].NewTable, query)
}

func (s *Server) renameTable(ctx context.Context, sess *Session, from, to *ast.TableName, query string) (uint64, error) {
	oldDB, e, err := s.tableFor(sess, from)
	if err != nil {
		return 0, err
	}
	newDB, err := s.currentDB(sess, to.Schema.O)
	if err != nil {
		return 0, err
	}
	if _, _, err := s.cat.lookupTable(newDB.Name.O, to.Name.O); err == nil {
		return 0, fmt.Errorf("sqlfront: table %s.%s already exists", newDB.Name.O, to.Name.O)
	}
	job := &model.Job{Type: actRenameTable, SchemaID: newDB.ID, TableID: e.info.ID, SchemaName: newDB.Name.O, TableName: to.Name.O, Query: query}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: []int64{oldDB.ID, newDB.ID}, tableIDs: []int64{e.info.ID}, apply: func(w kvWriter, c *catalog) error {
		ti := e.info.Clone()
		ti.Name = cistr(to.Name.O)
		for _, idx := range ti.Indices {
			idx.Table = ti.Name
		}
		if oldDB.ID != newDB.ID {
			ti.OldSchemaID = oldDB.ID
		}
		c.tables[ti.ID] = &tableEntry{dbID: newDB.ID, info: ti}
		job.SchemaState = model.StatePublic
		job.BinlogInfo = &model.HistoryInfo{TableInfo: ti}
		if oldDB.ID != newDB.ID {
			w.Delete(tablecodecTableKey(oldDB.ID, ti.ID))
		}
		stored := ti.Clone()
		stored.OldSchemaID = 0
		return s.putTable(w, newDB.ID, stored)
	}})
}

// execAlterTable runs one ALTER TABLE with a single spec as one job.
func (s *Server) execAlterTable(ctx context.Context, sess *Session, st *ast.AlterTableStmt, query string) (uint64, error) {
	if len(st.Specs) != 1 {
		return 0, unsupported("ALTER TABLE with %d specifications (multi-schema change)", len(st.Specs))
	}
	spec := st.Specs[0]
	if spec.Tp == ast.AlterTableRenameTable {
		return s.renameTable(ctx, sess, st.Table, spec.NewTable, query)
	}
	d, e, err := s.tableFor(sess, st.Table)
	if err != nil {
		return 0, err
	}
	job := &model.Job{SchemaID: d.ID, TableID: e.info.ID, SchemaName: d.Name.O, TableName: e.info.Name.O, Query: query}
	// mutate builds the new TableInfo from a clone; validated first on a
	// scratch catalog so that nothing is written on error.
	var mutate func(ti *model.TableInfo, c *catalog) error
	finalState := model.StatePublic
	switch spec.Tp {
	case ast.AlterTableAddColumns:
		if len(spec.NewColumns) != 1 {
			return 0, unsupported("adding several columns in one statement")
		}
		job.Type = actAddColumn
		mutate = func(ti *model.TableInfo, c *catalog) error { return addColumn(ti, spec) }
	case ast.AlterTableDropColumn:
		job.Type = actDropColumn
		finalState = model.StateNone
		mutate = func(ti *model.TableInfo, c *catalog) error { return dropColumn(ti, spec.OldColumnName.Name.O) }
	case ast.AlterTableModifyColumn:
		job.Type = actModifyColumn
		mutate = func(ti *model.TableInfo, c *catalog) error { return modifyColumn(ti, spec) }
	case ast.AlterTableAddConstraint:
		cons := spec.Constraint
		var cols []string
		for _, k := range cons.Keys {
			if k.Column == nil {
				return 0, unsupported("expression index")
			}
			cols = append(cols, k.Column.Name.O)
		}
		switch cons.Tp {
		case ast.ConstraintKey, ast.ConstraintIndex:
			job.Type = actAddIndex
			mutate = func(ti *model.TableInfo, c *catalog) error {
				_, err := addIndex(ti, cons.Name, cols, false, false)
				return err
			}
		case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
			job.Type = actAddIndex
			mutate = func(ti *model.TableInfo, c *catalog) error {
				_, err := addIndex(ti, cons.Name, cols, true, false)
				return err
			}
		default:
			return 0, unsupported("ALTER TABLE ADD constraint type %d", cons.Tp)
		}
	case ast.AlterTableDropIndex:
		job.Type = actDropIndex
		finalState = model.StateNone
		mutate = func(ti *model.TableInfo, c *catalog) error { return dropIndex(ti, spec.Name) }
	case ast.AlterTableAddPartitions:
		job.Type = actAddPartition
		mutate = func(ti *model.TableInfo, c *catalog) error { return addPartitions(ti, spec, c) }
	case ast.AlterTableDropPartition:
		job.Type = actDropPartition
		finalState = model.StateNone
		mutate = func(ti *model.TableInfo, c *catalog) error { return dropPartitions(ti, spec.PartitionNames) }
	case ast.AlterTableTruncatePartition:
		job.Type = actTruncatePartition
		mutate = func(ti *model.TableInfo, c *catalog) error { return truncatePartitions(ti, spec.PartitionNames, c) }
	default:
		return 0, unsupported("ALTER TABLE specification type %d", spec.Tp)
	}
	probe := e.info.Clone()
	if err := mutate(probe, s.cat.clone()); err != nil {
		return 0, err
	}
	// New indexes get entries for the existing rows (TiDB's backfill); a
	// unique one over duplicate values fails here, before any job row.
	if added := addedIndexes(e.info, probe); len(added) > 0 {
		scratch := s.cluster.Begin()
		err := s.backfillIndexes(scratch, probe, added)
		_ = scratch.Discard()
		if err != nil {
			return 0, err
		}
	}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: []int64{d.ID}, tableIDs: []int64{e.info.ID}, apply: func(w kvWriter, c *catalog) error {
		ti := e.info.Clone()
		if err := mutate(ti, c); err != nil {
			return err
		}
		if added := addedIndexes(e.info, ti); len(added) > 0 {
			txn, ok := w.(*fakeupstream.Txn)
			if !ok {
				return fmt.Errorf("sqlfront: backfill of table %q needs a transaction", ti.Name.O)
			}
			if err := s.backfillIndexes(txn, ti, added); err != nil {
				return err
			}
		}
		c.tables[ti.ID] = &tableEntry{dbID: d.ID, info: ti}
		job.SchemaState = finalState
		job.BinlogInfo = &model.HistoryInfo{TableInfo: ti}
		return s.putTable(w, d.ID, ti)
	}})
}

func addColumn(ti *model.TableInfo, spec *ast.AlterTableSpec) error {
	def := spec.NewColumns[0]
	cd, err := buildColumn(def, ti.Charset, ti.Collate)
	if err != nil {
		return err
	}
	if cd.pk || cd.autoIncr {
		return unsupported("adding a PRIMARY KEY or AUTO_INCREMENT column")
	}
	if ti.ColumnByName(cd.info.Name.O) != nil {
		return fmt.Errorf("sqlfront: duplicate column name %q", cd.info.Name.O)
	}
	if mysql.HasNotNullFlag(cd.info.FieldType.GetFlag()) && !cd.hasDef {
		// TiDB back-fills the type's zero value as the origin default.
		cd.info.FieldType.DelFlag(mysql.NoDefaultValueFlag)
	}
	// Rows written before the column existed read its origin default.
	cd.info.OriginDefaultValue = cd.info.DefaultValue
	cd.info.OriginDefaultBit = cd.info.DefaultValueBit
	ti.MaxColumnID++
	cd.info.ID = ti.MaxColumnID
	pos := len(ti.Columns)
	if spec.Position != nil {
		switch spec.Position.Tp {
		case ast.ColumnPositionFirst:
			pos = 0
		case ast.ColumnPositionAfter:
			rel := ti.ColumnByName(spec.Position.RelativeColumn.Name.O)
			if rel == nil {
				return fmt.Errorf("sqlfront: unknown column %q in AFTER", spec.Position.RelativeColumn.Name.O)
			}
			pos = rel.Offset + 1
		}
	}
	cols := append([]*model.ColumnInfo{}, ti.Columns[:pos]...)
	cols = append(cols, cd.info)
	cols = append(cols, ti.Columns[pos:]...)
	setColumns(ti, cols)
	if cd.unique {
		if _, err := addIndex(ti, cd.info.Name.O, []string{cd.info.Name.O}, true, false); err != nil {
			return err
		}
	}
	return nil
}

// setColumns installs a new column order and fixes offsets (also in
// indexes, which refer to columns by offset).
func setColumns(ti *model.TableInfo, cols []*model.ColumnInfo) {
	for i, c := range cols {
		c.Offset = i
	}
	ti.Columns = cols
	for _, idx := range ti.Indices {
		for _, ic := range idx.Columns {
			if c := ti.ColumnByName(ic.Name.O); c != nil {
				ic.Offset = c.Offset
			}
		}
	}
}

func dropColumn(ti *model.TableInfo, name string) error {
	col := ti.ColumnByName(name)
	if col == nil {
		return fmt.Errorf("sqlfront: can't DROP column %q; check that it exists", name)
	}
	if mysql.HasPriKeyFlag(col.FieldType.GetFlag()) {
		return unsupported("dropping a primary key column")
	}
	for _, idx := range ti.Indices {
		for _, ic := range idx.Columns {
			if ic.Name.L == col.Name.L {
				return unsupported("dropping column %q that an index uses (drop the index first)", name)
			}
		}
	}
	if ti.Partition != nil {
		if ti.Partition.Expr == "`"+col.Name.L+"`" || len(ti.Partition.Columns) > 0 && ti.Partition.Columns[0].L == col.Name.L {
			return unsupported("dropping the partitioning column %q", name)
		}
	}
	var cols []*model.ColumnInfo
	for _, c := range ti.Columns {
		if c != col {
			cols = append(cols, c)
		}
	}
	setColumns(ti, cols)
	return nil
}

func modifyColumn(ti *model.TableInfo, spec *ast.AlterTableSpec) error {
	def := spec.NewColumns[0]
	old := ti.ColumnByName(def.Name.Name.O)
	if old == nil {
		return fmt.Errorf("sqlfront: unknown column %q", def.Name.Name.O)
	}
	if spec.Position != nil && spec.Position.Tp != ast.ColumnPositionNone {
		return unsupported("MODIFY COLUMN with a position")
	}
	cd, err := buildColumn(def, ti.Charset, ti.Collate)
	if err != nil {
		return err
	}
	if cd.pk || cd.unique || cd.autoIncr {
		return unsupported("MODIFY COLUMN adding keys or AUTO_INCREMENT")
	}
	if mysql.HasPriKeyFlag(old.FieldType.GetFlag()) {
		return unsupported("modifying a primary key column")
	}
	// Only changes that keep every stored value readable are accepted
	// (same storage class, widening): TiDB would otherwise rewrite rows.
	if !compatibleChange(&old.FieldType, &cd.info.FieldType) {
		return unsupported("MODIFY COLUMN %q from %s to %s (needs a data rewrite)", old.Name.O, old.FieldType.String(), cd.info.FieldType.String())
	}
	keyFlags := old.FieldType.GetFlag() & (mysql.UniqueKeyFlag | mysql.MultipleKeyFlag)
	ft := cd.info.FieldType
	ft.AddFlag(keyFlags)
	n := *old
	n.FieldType = ft
	n.DefaultValue = cd.info.DefaultValue
	n.DefaultValueBit = cd.info.DefaultValueBit
	n.Comment = cd.info.Comment
	cols := append([]*model.ColumnInfo{}, ti.Columns...)
	cols[old.Offset] = &n
	setColumns(ti, cols)
	return nil
}

func compatibleChange(a, b interface {
	GetType() byte
	GetFlen() int
	GetDecimal() int
	GetFlag() uint
}) bool {
	ints := map[byte]int{mysql.TypeTiny: 1, mysql.TypeShort: 2, mysql.TypeInt24: 3, mysql.TypeLong: 4, mysql.TypeLonglong: 5}
	ia, aInt := ints[a.GetType()]
	ib, bInt := ints[b.GetType()]
	if aInt && bInt {
		return ib >= ia && mysql.HasUnsignedFlag(a.GetFlag()) == mysql.HasUnsignedFlag(b.GetFlag())
	}
	strs := map[byte]bool{mysql.TypeVarchar: true, mysql.TypeVarString: true}
	if strs[a.GetType()] && strs[b.GetType()] {
		return b.GetFlen() >= a.GetFlen()
	}
	return a.GetType() == b.GetType() && a.GetFlen() <= b.GetFlen() && a.GetDecimal() == b.GetDecimal()
}

func dropIndex(ti *model.TableInfo, name string) error {
	idx := indexByName(ti, name)
	if idx == nil {
		return fmt.Errorf("sqlfront: can't DROP index %q; check that it exists", name)
	}
	if idx.Primary {
		return unsupported("dropping the primary key")
	}
	var keep []*model.IndexInfo
	for _, x := range ti.Indices {
		if x != idx {
			keep = append(keep, x)
		}
	}
	ti.Indices = keep
	if first := ti.ColumnByName(idx.Columns[0].Name.O); first != nil {
		first.FieldType.DelFlag(mysql.UniqueKeyFlag | mysql.MultipleKeyFlag)
		for _, x := range keep {
			if x.Columns[0].Name.L == first.Name.L {
				if x.Unique && len(x.Columns) == 1 {
					first.FieldType.AddFlag(mysql.UniqueKeyFlag)
				} else {
					first.FieldType.AddFlag(mysql.MultipleKeyFlag)
				}
			}
		}
	}
	return nil
}

func addPartitions(ti *model.TableInfo, spec *ast.AlterTableSpec, c *catalog) error {
	if ti.Partition == nil || ti.Partition.Type != model.PartitionType(1) {
		return unsupported("ADD PARTITION on a table that is not RANGE partitioned")
	}
	defs, err := rangeDefinitions(spec.PartDefinitions)
	if err != nil {
		return err
	}
	for i := range defs {
		for _, d := range ti.Partition.Definitions {
			if d.Name.L == defs[i].Name.L {
				return fmt.Errorf("sqlfront: duplicate partition name %q", d.Name.O)
			}
		}
		defs[i].ID = c.allocID()
	}
	ti.Partition.Definitions = append(ti.Partition.Definitions, defs...)
	return nil
}

func dropPartitions(ti *model.TableInfo, names []ast.CIStr) error {
	if ti.Partition == nil {
		return fmt.Errorf("sqlfront: table %q is not partitioned", ti.Name.O)
	}
	drop := map[string]bool{}
	for _, n := range names {
		drop[n.L] = true
	}
	var keep []model.PartitionDefinition
	for _, d := range ti.Partition.Definitions {
		if drop[d.Name.L] {
			delete(drop, d.Name.L)
			continue
		}
		keep = append(keep, d)
	}
	if len(drop) > 0 {
		return fmt.Errorf("sqlfront: unknown partition in DROP PARTITION")
	}
	if len(keep) == 0 {
		return fmt.Errorf("sqlfront: cannot remove all partitions, use DROP TABLE instead")
	}
	ti.Partition.Definitions = keep
	return nil
}

func truncatePartitions(ti *model.TableInfo, names []ast.CIStr, c *catalog) error {
	if ti.Partition == nil {
		return fmt.Errorf("sqlfront: table %q is not partitioned", ti.Name.O)
	}
	found := 0
	for _, n := range names {
		for i := range ti.Partition.Definitions {
			if ti.Partition.Definitions[i].Name.L == n.L {
				ti.Partition.Definitions[i].ID = c.allocID()
				found++
			}
		}
	}
	if found != len(names) {
		return fmt.Errorf("sqlfront: unknown partition in TRUNCATE PARTITION")
	}
	return nil
}
