package sqlfront

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// renameTables runs RENAME TABLE a TO b, c TO d as one RENAME TABLES job
// (version 2 args, binlog MultipleTableInfos), as TiDB does. A table or
// name used twice in the statement is refused.
func (s *Server) renameTables(ctx context.Context, sess *Session, st *ast.RenameTableStmt, query string) (uint64, error) {
	type one struct {
		oldDB, newDB *model.DBInfo
		e            *tableEntry
		to           string
	}
	var all []one
	var args []map[string]any
	seen := map[string]bool{}
	for _, tt := range st.TableToTables {
		oldDB, e, err := s.tableFor(sess, tt.OldTable)
		if err != nil {
			return 0, err
		}
		newDB, err := s.currentDB(sess, tt.NewTable.Schema.O)
		if err != nil {
			return 0, err
		}
		key := strings.ToLower(newDB.Name.O + "." + tt.NewTable.Name.O)
		if _, _, err := s.cat.lookupTable(newDB.Name.O, tt.NewTable.Name.O); err == nil || seen[key] || seen[fmt.Sprint(e.info.ID)] {
			return 0, fmt.Errorf("sqlfront: RENAME TABLE: %s.%s already exists or is named twice", newDB.Name.O, tt.NewTable.Name.O)
		}
		seen[key], seen[fmt.Sprint(e.info.ID)] = true, true
		all = append(all, one{oldDB: oldDB, newDB: newDB, e: e, to: tt.NewTable.Name.O})
		args = append(args, map[string]any{"old_schema_id": oldDB.ID, "new_schema_id": newDB.ID, "table_id": e.info.ID,
			"new_table_name":  map[string]string{"O": tt.NewTable.Name.O, "L": strings.ToLower(tt.NewTable.Name.O)},
			"old_schema_name": map[string]string{"O": oldDB.Name.O, "L": oldDB.Name.L}, "old_table_name": map[string]string{"O": e.info.Name.O, "L": e.info.Name.L}})
	}
	raw, _ := json.Marshal(map[string]any{"rename_table_infos": args}) // plain maps: cannot fail
	job := &model.Job{Type: model.ActionRenameTables, SchemaID: all[0].newDB.ID, TableID: all[0].e.info.ID, SchemaName: all[0].newDB.Name.O, TableName: all[0].to, Query: query, RawArgs: raw}
	var schemaIDs, tableIDs []int64
	for _, o := range all {
		schemaIDs = append(schemaIDs, o.oldDB.ID, o.newDB.ID)
		tableIDs = append(tableIDs, o.e.info.ID)
	}
	return s.runJob(ctx, &ddlChange{job: job, schemaIDs: schemaIDs, tableIDs: tableIDs, apply: func(w kvWriter, c *catalog) error {
		job.SchemaState = model.StatePublic
		job.BinlogInfo = &model.HistoryInfo{}
		for _, o := range all {
			ti := o.e.info.Clone()
			ti.Name = cistr(o.to)
			for _, idx := range ti.Indices {
				idx.Table = ti.Name
			}
			c.tables[ti.ID] = &tableEntry{dbID: o.newDB.ID, info: ti}
			job.BinlogInfo.MultipleTableInfos = append(job.BinlogInfo.MultipleTableInfos, ti)
			if o.oldDB.ID != o.newDB.ID {
				w.Delete(tablecodecTableKey(o.oldDB.ID, ti.ID))
			}
			if err := s.putTable(w, o.newDB.ID, ti.Clone()); err != nil {
				return err
			}
		}
		return nil
	}})
}
