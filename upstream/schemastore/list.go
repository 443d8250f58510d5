package schemastore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// NamedTable is one table of the schema at a ts, with its database.
type NamedTable struct {
	DB   string
	DBID int64
	Info *model.TableInfo
}

// ListTables reads every table of every database from the meta keys at
// ts by snapshot, the way LookupTable finds one (SR1): the input a table
// filter is resolved against (specs/tableset.md TF8). keep, when set,
// skips the databases it refuses before their tables are read. The result
// is sorted by database then table name (lower case).
func ListTables(ctx context.Context, r kvevent.SnapshotReader, ts uint64, keep func(db string) bool) ([]NamedTable, error) {
	const page = 1024
	dbFields, err := scanHash(ctx, r, nil, "DBs", ts, page)
	if err != nil {
		return nil, err
	}
	var out []NamedTable
	for _, f := range dbFields {
		id, ok := idField(f.field, "DB:")
		if !ok {
			continue
		}
		db, err := model.ParseDBInfo(f.value)
		if err != nil {
			return nil, fmt.Errorf("schemastore: meta DBs field %q at ts %d: %w", f.field, ts, err)
		}
		if keep != nil && !keep(db.Name.O) {
			continue
		}
		tables, err := scanHash(ctx, r, nil, "DB:"+strconv.FormatInt(id, 10), ts, page)
		if err != nil {
			return nil, err
		}
		for _, tf := range tables {
			if _, ok := idField(tf.field, "Table:"); !ok {
				continue
			}
			ti, err := model.ParseTableInfo(tf.value)
			if err != nil {
				return nil, fmt.Errorf("schemastore: meta DB:%d field %q at ts %d: %w", id, tf.field, ts, err)
			}
			out = append(out, NamedTable{DB: db.Name.O, DBID: id, Info: ti})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.DB != b.DB {
			return a.DB < b.DB
		}
		return a.Info.Name.L < b.Info.Name.L
	})
	return out, nil
}

// LookupTableByPhysicalID finds, by snapshot at ts, the table of database
// db one of whose physical tables (the table itself or a partition) is
// phys, whatever it was named then: a table renamed since ts is not found
// at ts by its current name. It returns the table and its database id.
func LookupTableByPhysicalID(ctx context.Context, r kvevent.SnapshotReader, ts uint64, db string, phys int64) (*model.TableInfo, int64, error) {
	all, err := ListTables(ctx, r, ts, func(name string) bool { return strings.EqualFold(name, db) })
	if err != nil {
		return nil, 0, err
	}
	for _, t := range all {
		if slices.Contains(t.Info.PhysicalIDs(), phys) {
			return t.Info, t.DBID, nil
		}
	}
	return nil, 0, fmt.Errorf("schemastore: no table of database %s has physical table %d at ts %d", db, phys, ts)
}
