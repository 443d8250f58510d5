package adapter

// Which DDLs wait for a joining table's copy (specs/tableset.md LT9).

import (
	"strings"

	"github.com/searchfabric/sfemu/minicdc"
)

// ddlTouchesCopy reports whether ev may change the table s copies: it
// names one of the table's ids (logical or physical: the job's table
// before or after, a dropped id, one of a multi-table DDL's tables, a
// table moved between schemas), or it is a schema-level DDL of the
// table's database, or an EXCHANGE PARTITION (whose second table the
// event does not name by id). Anything else is another table's DDL.
func ddlTouchesCopy(ev *minicdc.DDL, s *addSnapshot) bool {
	if ev.Action == minicdc.ActionExchangeTablePartition {
		return true
	}
	mine := func(id int64) bool { return id != 0 && (id == s.logical || contains(s.ids, id)) }
	tableIDs := func(ti *minicdc.TableInfo) bool {
		if ti == nil {
			return false
		}
		if mine(ti.ID) {
			return true
		}
		for _, id := range ti.PhysicalIDs() {
			if mine(id) {
				return true
			}
		}
		return false
	}
	if mine(ev.TableID) || tableIDs(ev.Table) || tableIDs(ev.PreTable) {
		return true
	}
	for _, id := range ev.DroppedTableIDs {
		if mine(id) {
			return true
		}
	}
	for _, ti := range ev.MultipleTables {
		if tableIDs(ti) {
			return true
		}
	}
	for _, m := range ev.UpdatedSchemas {
		if mine(m.TableID) {
			return true
		}
	}
	db, _, _ := strings.Cut(s.name, ".")
	if nc := ev.NameChange; nc != nil && strings.EqualFold(nc.DropDatabase, db) {
		return true
	}
	// A schema-level DDL (no table) of the table's database.
	schemaLevel := ev.TableID == 0 && ev.Table == nil && len(ev.MultipleTables) == 0
	return schemaLevel && strings.EqualFold(ev.SchemaName, db)
}
