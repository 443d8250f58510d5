package sqlfront

import (
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// Reserved ids of TiDB's system objects (pkg/meta/metadef in TiDB).
const (
	MysqlDBID         int64 = 1
	DDLJobTableID     int64 = 281474976710654 // MaxInt48 - 1
	DDLHistoryTableID int64 = 281474976710652 // MaxInt48 - 3
	// firstUserID is where user object ids start; TiDB reserves the ids
	// below for its bootstrap objects.
	firstUserID int64 = 100
)

func cistr(s string) model.CIStr { return model.CIStr{O: s, L: lower(s)} }

func newFT(tp byte, flag uint, flen int, charset, collate string) types.FieldType {
	ft := types.NewFieldType(tp)
	ft.SetFlag(flag)
	ft.SetFlen(flen)
	ft.SetDecimal(0)
	ft.SetCharset(charset)
	ft.SetCollate(collate)
	return *ft
}

func sysColumn(id int64, name string, ft types.FieldType) *model.ColumnInfo {
	return &model.ColumnInfo{ID: id, Name: cistr(name), Offset: int(id - 1), FieldType: ft, State: model.StatePublic, Version: 2}
}

func sysTable(id int64, name string, cols []*model.ColumnInfo) *model.TableInfo {
	return &model.TableInfo{
		ID: id, Name: cistr(name), Charset: "utf8mb4", Collate: "utf8mb4_bin",
		Columns: cols, State: model.StatePublic, PKIsHandle: true,
		MaxColumnID: int64(len(cols)), Version: 5,
	}
}

// ddlJobTableInfo is mysql.tidb_ddl_job as TiDB creates it.
func ddlJobTableInfo() *model.TableInfo {
	pk := newFT(mysql.TypeLonglong, mysql.NotNullFlag|mysql.PriKeyFlag|mysql.NoDefaultValueFlag, 20, "binary", "binary")
	i := newFT(mysql.TypeLong, 0, 11, "binary", "binary")
	txt := newFT(mysql.TypeMediumBlob, 0, 16777215, "utf8mb4", "utf8mb4_bin")
	blob := newFT(mysql.TypeLongBlob, mysql.BinaryFlag, 4294967295, "binary", "binary")
	return sysTable(DDLJobTableID, "tidb_ddl_job", []*model.ColumnInfo{
		sysColumn(1, "job_id", pk), sysColumn(2, "reorg", i), sysColumn(3, "schema_ids", txt),
		sysColumn(4, "table_ids", txt), sysColumn(5, "job_meta", blob), sysColumn(6, "type", i),
		sysColumn(7, "processing", i),
	})
}

// ddlHistoryTableInfo is mysql.tidb_ddl_history as TiDB creates it.
func ddlHistoryTableInfo() *model.TableInfo {
	pk := newFT(mysql.TypeLonglong, mysql.NotNullFlag|mysql.PriKeyFlag|mysql.NoDefaultValueFlag, 20, "binary", "binary")
	blob := newFT(mysql.TypeLongBlob, mysql.BinaryFlag, 4294967295, "binary", "binary")
	name := newFT(mysql.TypeString, 0, 64, "utf8mb4", "utf8mb4_bin")
	txt := newFT(mysql.TypeMediumBlob, 0, 16777215, "utf8mb4", "utf8mb4_bin")
	dt := newFT(mysql.TypeDatetime, mysql.BinaryFlag, 19, "binary", "binary")
	return sysTable(DDLHistoryTableID, "tidb_ddl_history", []*model.ColumnInfo{
		sysColumn(1, "job_id", pk), sysColumn(2, "job_meta", blob), sysColumn(3, "db_name", name),
		sysColumn(4, "table_name", name), sysColumn(5, "schema_ids", txt), sysColumn(6, "table_ids", txt),
		sysColumn(7, "create_time", dt),
	})
}

// systemSchemas are never replicated (and cannot be written through SQL).
var systemSchemas = map[string]bool{
	"mysql": true, "information_schema": true, "performance_schema": true,
	"metrics_schema": true, "sys": true,
}
