package sqlfront

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// UnsupportedError names a SQL construct the front does not implement.
type UnsupportedError struct{ What string }

func (e *UnsupportedError) Error() string { return "sqlfront: unsupported: " + e.What }

func unsupported(format string, args ...any) error {
	return &UnsupportedError{What: fmt.Sprintf(format, args...)}
}

// finishFieldType fills what TiDB fills when a column is created: default
// lengths, charset and collation, and the binary flag of non-string types.
func finishFieldType(ft *types.FieldType, tableCharset, tableCollate string) error {
	tp := ft.GetType()
	defFlen, defDec := mysql.GetDefaultFieldLengthAndDecimal(tp)
	switch tp {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		if ft.GetFlen() == types.UnspecifiedLength {
			ft.SetFlen(defFlen)
			if mysql.HasUnsignedFlag(ft.GetFlag()) && tp != mysql.TypeLonglong {
				ft.SetFlen(defFlen - 1)
			}
		}
		ft.SetDecimal(0)
	case mysql.TypeFloat, mysql.TypeDouble:
		if ft.GetFlen() == types.UnspecifiedLength {
			ft.SetFlen(defFlen)
		}
		if ft.GetDecimal() == types.UnspecifiedLength {
			ft.SetDecimal(-1)
		}
	case mysql.TypeNewDecimal:
		if ft.GetFlen() == types.UnspecifiedLength {
			ft.SetFlen(10)
		}
		if ft.GetDecimal() == types.UnspecifiedLength {
			ft.SetDecimal(0)
		}
		if ft.GetFlen() > 65 || ft.GetDecimal() > 30 || ft.GetDecimal() > ft.GetFlen() {
			return fmt.Errorf("invalid DECIMAL(%d,%d)", ft.GetFlen(), ft.GetDecimal())
		}
	case mysql.TypeDate:
		ft.SetFlen(10)
		ft.SetDecimal(0)
	case mysql.TypeDatetime, mysql.TypeTimestamp, mysql.TypeDuration:
		fsp := ft.GetDecimal()
		if fsp == types.UnspecifiedLength {
			fsp = 0
		}
		if fsp > 6 {
			return fmt.Errorf("fsp %d > 6", fsp)
		}
		base := 19
		if tp == mysql.TypeDuration {
			base = 10
		}
		ft.SetDecimal(fsp)
		if fsp > 0 {
			ft.SetFlen(base + 1 + fsp)
		} else {
			ft.SetFlen(base)
		}
	case mysql.TypeYear:
		ft.SetFlen(4)
		ft.SetDecimal(0)
		ft.AddFlag(mysql.UnsignedFlag | mysql.ZerofillFlag)
	case mysql.TypeBit:
		if ft.GetFlen() == types.UnspecifiedLength {
			ft.SetFlen(1)
		}
		if ft.GetFlen() < 1 || ft.GetFlen() > 64 {
			return fmt.Errorf("invalid BIT(%d)", ft.GetFlen())
		}
		ft.SetDecimal(0)
		ft.AddFlag(mysql.UnsignedFlag)
	case mysql.TypeJSON:
		ft.SetFlen(4294967295)
		ft.SetDecimal(0)
	case mysql.TypeTiDBVectorFloat32:
		if ft.GetFlen() == types.UnspecifiedLength {
			ft.SetFlen(-1)
		}
		ft.SetDecimal(0)
	case mysql.TypeEnum, mysql.TypeSet:
		n := 0
		for _, e := range ft.GetElems() {
			if tp == mysql.TypeEnum {
				n = max(n, len([]rune(e)))
			} else {
				n += len([]rune(e)) + 1
			}
		}
		if tp == mysql.TypeSet && n > 0 {
			n--
		}
		ft.SetFlen(n)
		ft.SetDecimal(0)
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeVarString:
		if ft.GetFlen() == types.UnspecifiedLength {
			ft.SetFlen(1)
		}
		ft.SetDecimal(0)
	case mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		switch tp {
		case mysql.TypeTinyBlob:
			ft.SetFlen(255)
		case mysql.TypeBlob:
			ft.SetFlen(65535)
		case mysql.TypeMediumBlob:
			ft.SetFlen(16777215)
		default:
			ft.SetFlen(4294967295)
		}
		ft.SetDecimal(0)
	default:
		return fmt.Errorf("column type %s is not supported", types.TypeToStr(tp, ft.GetCharset()))
	}
	_ = defDec
	if types.HasCharset(ft) {
		if ft.GetCharset() == "" {
			ft.SetCharset(tableCharset)
		}
		if ft.GetCollate() == "" {
			if ft.GetCharset() == tableCharset {
				ft.SetCollate(tableCollate)
			} else if ft.GetCharset() == "binary" {
				ft.SetCollate("binary")
			} else {
				ft.SetCollate(ft.GetCharset() + "_bin")
			}
		}
		if ft.GetCharset() == "binary" {
			ft.AddFlag(mysql.BinaryFlag)
		}
	} else {
		ft.SetCharset("binary")
		ft.SetCollate("binary")
		switch tp {
		case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp, mysql.TypeDuration, mysql.TypeJSON,
			mysql.TypeTiDBVectorFloat32, mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
			ft.AddFlag(mysql.BinaryFlag)
		}
	}
	return nil
}

// columnFromDef builds a ColumnInfo (without id/offset) from a definition.
// It reports whether the column declares PRIMARY KEY (and its clustering),
// UNIQUE, and the default literal.
type colDef struct {
	info       *model.ColumnInfo
	pk         bool
	pkType     ast.PrimaryKeyType
	unique     bool
	autoIncr   bool
	hasDef     bool
	defaultLit literal
}

func buildColumn(def *ast.ColumnDef, tableCharset, tableCollate string) (*colDef, error) {
	name := def.Name.Name.O
	ft := def.Tp.Clone()
	if err := finishFieldType(ft, tableCharset, tableCollate); err != nil {
		return nil, fmt.Errorf("sqlfront: column %q: %w", name, err)
	}
	cd := &colDef{info: &model.ColumnInfo{Name: cistr(name), State: model.StatePublic, Version: 2}}
	notNull := false
	for _, o := range def.Options {
		switch o.Tp {
		case ast.ColumnOptionNotNull:
			notNull = true
		case ast.ColumnOptionNull:
			notNull = false
		case ast.ColumnOptionPrimaryKey:
			cd.pk, cd.pkType = true, o.PrimaryKeyTp
			notNull = true
		case ast.ColumnOptionUniqKey:
			cd.unique = true
		case ast.ColumnOptionAutoIncrement:
			cd.autoIncr = true
			ft.AddFlag(mysql.AutoIncrementFlag)
		case ast.ColumnOptionDefaultValue:
			lit, err := evalLiteral(o.Expr)
			if err != nil {
				return nil, unsupported("DEFAULT of column %q: %v", name, err)
			}
			cd.hasDef, cd.defaultLit = true, lit
		case ast.ColumnOptionComment:
			lit, err := evalLiteral(o.Expr)
			if err == nil {
				cd.info.Comment = lit.s
			}
		case ast.ColumnOptionCollate:
			ft.SetCollate(o.StrValue)
		case ast.ColumnOptionGenerated:
			return nil, unsupported("generated column %q", name)
		case ast.ColumnOptionOnUpdate:
			return nil, unsupported("ON UPDATE of column %q", name)
		default:
			return nil, unsupported("column option %d of column %q", o.Tp, name)
		}
	}
	if notNull {
		ft.AddFlag(mysql.NotNullFlag)
	}
	if cd.hasDef {
		if cd.defaultLit.kind == litNull {
			if notNull {
				return nil, fmt.Errorf("sqlfront: invalid default value for %q: NULL on a NOT NULL column", name)
			}
			cd.info.DefaultValue = nil
		} else {
			d, err := toDatum(cd.defaultLit, ft, name)
			if err != nil {
				return nil, fmt.Errorf("sqlfront: invalid default value: %w", err)
			}
			text := d.String()
			if ft.GetType() == mysql.TypeBit {
				cd.info.DefaultValueBit = []byte(cd.defaultLit.s)
			}
			cd.info.DefaultValue = text
		}
	} else if notNull && !cd.autoIncr {
		ft.AddFlag(mysql.NoDefaultValueFlag)
	}
	cd.info.FieldType = *ft
	return cd, nil
}

// restoreExpr renders an expression as TiDB stores it (partition exprs).
func restoreExpr(e ast.ExprNode) (string, error) {
	var sb strings.Builder
	ctx := format.NewRestoreCtx(format.DefaultRestoreFlags|format.RestoreBracketAroundBinaryOperation, &sb)
	if err := e.Restore(ctx); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// buildTable turns CREATE TABLE into a TableInfo with fresh ids.
func buildTable(c *catalog, st *ast.CreateTableStmt, db *model.DBInfo) (*model.TableInfo, error) {
	if st.ReferTable != nil || st.Select != nil {
		return nil, unsupported("CREATE TABLE ... LIKE/SELECT")
	}
	if st.TemporaryKeyword != ast.TemporaryNone {
		return nil, unsupported("temporary tables")
	}
	charset, collate := db.Charset, db.Collate
	for _, o := range st.Options {
		switch o.Tp {
		case ast.TableOptionCharset:
			charset = o.StrValue
			if collate == db.Collate {
				collate = charset + "_bin"
			}
		case ast.TableOptionCollate:
			collate = o.StrValue
		case ast.TableOptionComment, ast.TableOptionEngine, ast.TableOptionAutoIncrement:
		default:
			return nil, unsupported("table option %d", o.Tp)
		}
	}
	ti := &model.TableInfo{
		Name:    cistr(st.Table.Name.O),
		Charset: charset, Collate: collate,
		State:   model.StatePublic,
		Version: 5,
	}
	for _, o := range st.Options {
		if o.Tp == ast.TableOptionComment {
			ti.Comment = o.StrValue
		}
	}
	var pkCols []string
	pkType := ast.PrimaryKeyTypeDefault
	type idxSpec struct {
		name    string
		cols    []string
		unique  bool
		primary bool
	}
	var idxs []idxSpec
	for _, def := range st.Cols {
		cd, err := buildColumn(def, charset, collate)
		if err != nil {
			return nil, err
		}
		if ti.ColumnByName(cd.info.Name.O) != nil {
			return nil, fmt.Errorf("sqlfront: duplicate column name %q", cd.info.Name.O)
		}
		ti.MaxColumnID++
		cd.info.ID = ti.MaxColumnID
		cd.info.Offset = len(ti.Columns)
		ti.Columns = append(ti.Columns, cd.info)
		if cd.pk {
			if pkCols != nil {
				return nil, fmt.Errorf("sqlfront: multiple primary keys defined")
			}
			pkCols, pkType = []string{cd.info.Name.O}, cd.pkType
		}
		if cd.unique {
			idxs = append(idxs, idxSpec{name: cd.info.Name.O, cols: []string{cd.info.Name.O}, unique: true})
		}
	}
	for _, cons := range st.Constraints {
		var cols []string
		for _, k := range cons.Keys {
			if k.Column == nil {
				return nil, unsupported("expression index")
			}
			cols = append(cols, k.Column.Name.O)
		}
		switch cons.Tp {
		case ast.ConstraintPrimaryKey:
			if pkCols != nil {
				return nil, fmt.Errorf("sqlfront: multiple primary keys defined")
			}
			pkCols = cols
			if cons.Option != nil {
				pkType = cons.Option.PrimaryKeyTp
			}
		case ast.ConstraintKey, ast.ConstraintIndex:
			idxs = append(idxs, idxSpec{name: cons.Name, cols: cols})
		case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
			idxs = append(idxs, idxSpec{name: cons.Name, cols: cols, unique: true})
		default:
			return nil, unsupported("constraint type %d", cons.Tp)
		}
	}
	if pkCols != nil {
		for _, n := range pkCols {
			col := ti.ColumnByName(n)
			if col == nil {
				return nil, fmt.Errorf("sqlfront: key column %q doesn't exist in table", n)
			}
			col.FieldType.AddFlag(mysql.PriKeyFlag | mysql.NotNullFlag)
			// Primary key columns without a default get the no-default flag.
			if col.DefaultValue == nil && !mysql.HasAutoIncrementFlag(col.FieldType.GetFlag()) {
				col.FieldType.AddFlag(mysql.NoDefaultValueFlag)
			}
		}
		first := ti.ColumnByName(pkCols[0])
		isInt := len(pkCols) == 1 && mysql.IsIntegerType(first.FieldType.GetType())
		switch {
		case isInt && pkType != ast.PrimaryKeyTypeNonClustered:
			ti.PKIsHandle = true
		case pkType == ast.PrimaryKeyTypeClustered:
			ti.IsCommonHandle = true
			ti.CommonHandleVersion = 1
			idxs = append([]idxSpec{{name: "PRIMARY", cols: pkCols, unique: true, primary: true}}, idxs...)
		default:
			idxs = append([]idxSpec{{name: "PRIMARY", cols: pkCols, unique: true, primary: true}}, idxs...)
		}
	}
	for _, sp := range idxs {
		if _, err := addIndex(ti, sp.name, sp.cols, sp.unique, sp.primary); err != nil {
			return nil, err
		}
	}
	if st.Partition != nil {
		pi, err := buildPartition(c, ti, st.Partition)
		if err != nil {
			return nil, err
		}
		ti.Partition = pi
	}
	ti.ID = c.allocID()
	if ti.Partition != nil {
		for i := range ti.Partition.Definitions {
			ti.Partition.Definitions[i].ID = c.allocID()
		}
	}
	return ti, nil
}

// addIndex appends an index (public) and sets the column key flags.
func addIndex(ti *model.TableInfo, name string, cols []string, unique, primary bool) (*model.IndexInfo, error) {
	if name == "" {
		name = cols[0]
		for n := 2; indexByName(ti, name) != nil; n++ {
			name = cols[0] + "_" + strconv.Itoa(n)
		}
	}
	if indexByName(ti, name) != nil {
		return nil, fmt.Errorf("sqlfront: duplicate key name %q", name)
	}
	idx := &model.IndexInfo{Name: cistr(name), Table: ti.Name, State: model.StatePublic, Tp: 1, Unique: unique, Primary: primary}
	for _, n := range cols {
		col := ti.ColumnByName(n)
		if col == nil {
			return nil, fmt.Errorf("sqlfront: key column %q doesn't exist in table", n)
		}
		idx.Columns = append(idx.Columns, &model.IndexColumn{Name: col.Name, Offset: col.Offset, Length: types.UnspecifiedLength})
	}
	first := ti.ColumnByName(cols[0])
	switch {
	case primary:
	case unique && len(cols) == 1:
		first.FieldType.AddFlag(mysql.UniqueKeyFlag)
	default:
		first.FieldType.AddFlag(mysql.MultipleKeyFlag)
	}
	if err := checkIndexable(ti, idx); err != nil {
		return nil, err
	}
	ti.MaxIndexID++
	idx.ID = ti.MaxIndexID
	ti.Indices = append(ti.Indices, idx)
	return idx, nil
}

func indexByName(ti *model.TableInfo, name string) *model.IndexInfo {
	l := lower(name)
	for _, idx := range ti.Indices {
		if idx.Name.L == l {
			return idx
		}
	}
	return nil
}

// buildPartition supports RANGE (expr or single column) and HASH.
func buildPartition(c *catalog, ti *model.TableInfo, po *ast.PartitionOptions) (*model.PartitionInfo, error) {
	if po.Sub != nil {
		return nil, unsupported("sub-partitions")
	}
	pi := &model.PartitionInfo{Enable: true}
	var colName string
	switch {
	case po.Expr != nil:
		cn, ok := po.Expr.(*ast.ColumnNameExpr)
		if !ok {
			return nil, unsupported("partition expression other than a column")
		}
		colName = cn.Name.Name.O
		expr, err := restoreExpr(po.Expr)
		if err != nil {
			return nil, err
		}
		pi.Expr = expr
	case len(po.ColumnNames) == 1:
		colName = po.ColumnNames[0].Name.O
		pi.Columns = []model.CIStr{cistr(colName)}
	default:
		return nil, unsupported("multi-column partitioning")
	}
	col := ti.ColumnByName(colName)
	if col == nil || !mysql.IsIntegerType(col.FieldType.GetType()) {
		return nil, unsupported("partitioning on non-integer column %q", colName)
	}
	switch po.Tp {
	case ast.PartitionTypeRange:
		pi.Type = model.PartitionType(1)
		defs, err := rangeDefinitions(po.Definitions)
		if err != nil {
			return nil, err
		}
		pi.Definitions = defs
	case ast.PartitionTypeHash:
		pi.Type = model.PartitionType(2)
		n := po.Num
		if n == 0 {
			n = uint64(len(po.Definitions))
		}
		if n == 0 {
			n = 1
		}
		pi.Num = n
		for i := uint64(0); i < n; i++ {
			name := "p" + strconv.FormatUint(i, 10)
			if int(i) < len(po.Definitions) {
				name = po.Definitions[i].Name.O
			}
			pi.Definitions = append(pi.Definitions, model.PartitionDefinition{Name: cistr(name)})
		}
	default:
		return nil, unsupported("partition type %s", po.Tp)
	}
	return pi, nil
}

func rangeDefinitions(defs []*ast.PartitionDefinition) ([]model.PartitionDefinition, error) {
	var out []model.PartitionDefinition
	for _, d := range defs {
		lt, ok := d.Clause.(*ast.PartitionDefinitionClauseLessThan)
		if !ok || len(lt.Exprs) != 1 {
			return nil, unsupported("partition %q without a single VALUES LESS THAN value", d.Name.O)
		}
		var bound string
		if _, isMax := lt.Exprs[0].(*ast.MaxValueExpr); isMax {
			bound = "MAXVALUE"
		} else {
			l, err := evalLiteral(lt.Exprs[0])
			if err != nil {
				return nil, unsupported("partition %q bound: %v", d.Name.O, err)
			}
			bound = l.String()
		}
		out = append(out, model.PartitionDefinition{Name: cistr(d.Name.O), LessThan: []string{bound}})
	}
	return out, nil
}
