package adapter

import (
	"testing"

	"github.com/searchfabric/sfemu/minicdc"
)

// TestLT9_DDLTouchesCopy: which DDLs wait for the copy of shop.items
// (logical id 50, partitions 51 and 52) and which go on at once.
func TestLT9_DDLTouchesCopy(t *testing.T) {
	s := &addSnapshot{name: "shop.items", logical: 50, ids: []int64{51, 52}}
	other := &minicdc.TableInfo{ID: 60}
	items := &minicdc.TableInfo{ID: 50, PartitionIDs: []int64{51, 52}}
	cases := []struct {
		name string
		ev   minicdc.DDL
		wait bool
	}{
		{"another table's ADD COLUMN", minicdc.DDL{Action: minicdc.ActionAddColumn, SchemaName: "shop", TableID: 60, Table: other}, false},
		{"CREATE TABLE of another table", minicdc.DDL{Action: minicdc.ActionCreateTable, SchemaName: "shop", TableID: 61, Table: &minicdc.TableInfo{ID: 61}}, false},
		{"DROP TABLE of another table", minicdc.DDL{Action: minicdc.ActionDropTable, SchemaName: "shop", TableID: 60, DroppedTableIDs: []int64{60}}, false},
		{"CREATE DATABASE of another database", minicdc.DDL{Action: minicdc.ActionCreateSchema, SchemaName: "blog"}, false},
		{"DROP DATABASE of another database", minicdc.DDL{Action: minicdc.ActionDropSchema, SchemaName: "blog", DroppedTableIDs: []int64{70}}, false},
		{"its ADD COLUMN", minicdc.DDL{Action: minicdc.ActionAddColumn, SchemaName: "shop", TableID: 50, Table: items}, true},
		{"its TRUNCATE (new ids after)", minicdc.DDL{Action: minicdc.ActionTruncateTable, SchemaName: "shop", TableID: 50, Table: &minicdc.TableInfo{ID: 80}, DroppedTableIDs: []int64{51, 52}}, true},
		{"a partition DDL naming one partition", minicdc.DDL{Action: minicdc.ActionAddColumn, SchemaName: "shop", TableID: 99, DroppedTableIDs: []int64{52}}, true},
		{"its DROP by pre-table only", minicdc.DDL{Action: minicdc.ActionDropTable, SchemaName: "shop", PreTable: items}, true},
		{"RENAME TABLES with it", minicdc.DDL{Action: minicdc.ActionRenameTables, MultipleTables: []*minicdc.TableInfo{other, items}}, true},
		{"moved to another database", minicdc.DDL{Action: minicdc.ActionRenameTables, UpdatedSchemas: []minicdc.SchemaMove{{TableID: 50}}}, true},
		{"DROP DATABASE of its database", minicdc.DDL{Action: minicdc.ActionDropSchema, SchemaName: "SHOP"}, true},
		{"EXCHANGE PARTITION", minicdc.DDL{Action: minicdc.ActionExchangeTablePartition, SchemaName: "blog", TableID: 90}, true},
	}
	for _, c := range cases {
		if got := ddlTouchesCopy(&c.ev, s); got != c.wait {
			t.Errorf("%s: waits %v, want %v", c.name, got, c.wait)
		}
	}
}
