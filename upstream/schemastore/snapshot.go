package schemastore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// Names of the system tables whose record spans carry DDL jobs.
const (
	ddlJobTableName     = "tidb_ddl_job"
	ddlHistoryTableName = "tidb_ddl_history"
	jobMetaColumn       = "job_meta"
	mysqlSchema         = "mysql"
)

// metaSnapshot is the schema at one ts, read from the meta keys.
type metaSnapshot struct {
	ts        uint64
	dbs       []*model.DBInfo
	tables    map[int64][]*model.TableInfo // by schema id, non-system schemas only
	jobTable  *model.TableInfo             // mysql.tidb_ddl_job
	histTable *model.TableInfo             // mysql.tidb_ddl_history (may be nil)
}

// hashField is one field of a meta hash.
type hashField struct {
	field []byte
	value []byte
}

// scanHash reads every field of the meta hash name at ts, page by page.
func scanHash(ctx context.Context, r kvevent.SnapshotReader, prefix []byte, name string, ts uint64, page int) ([]hashField, error) {
	start := tablecodec.EncodeHashDataPrefix(append([]byte(nil), prefix...), name)
	end := tablecodec.PrefixNext(start)
	var out []hashField
	for {
		kvs, err := r.Scan(ctx, start, end, ts, page)
		if err != nil {
			return nil, fmt.Errorf("schemastore: scan meta hash %q at ts %d: %w", name, ts, err)
		}
		for _, kv := range kvs {
			raw := kv.Key
			if len(prefix) > 0 {
				if !bytes.HasPrefix(raw, prefix) {
					return nil, fmt.Errorf("schemastore: meta key %x lacks the keyspace prefix %x", raw, prefix)
				}
				raw = raw[len(prefix):]
			}
			mk, err := tablecodec.DecodeMetaKey(raw)
			if err != nil {
				return nil, fmt.Errorf("schemastore: meta hash %q: %w", name, err)
			}
			if string(mk.Name) != name || mk.Type != tablecodec.HashData {
				return nil, fmt.Errorf("schemastore: scan of meta hash %q returned key %x of %q type %d", name, kv.Key, mk.Name, mk.Type)
			}
			out = append(out, hashField{field: mk.Field, value: kv.Value})
		}
		if len(kvs) < page {
			return out, nil
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
}

// idField parses "<prefix><decimal id>" hash fields.
func idField(field []byte, prefix string) (int64, bool) {
	if !bytes.HasPrefix(field, []byte(prefix)) {
		return 0, false
	}
	id, err := strconv.ParseInt(string(field[len(prefix):]), 10, 64)
	return id, err == nil
}

// readMetaSnapshot reads every database and table at ts (rule SS10-SS13).
// System schemas are skipped except that mysql.tidb_ddl_job (and
// tidb_ddl_history) are picked up for decoding job rows.
func readMetaSnapshot(ctx context.Context, r kvevent.SnapshotReader, prefix []byte, ts uint64, page int) (*metaSnapshot, error) {
	snap := &metaSnapshot{ts: ts, tables: map[int64][]*model.TableInfo{}}
	dbFields, err := scanHash(ctx, r, prefix, "DBs", ts, page)
	if err != nil {
		return nil, err
	}
	for _, f := range dbFields {
		id, ok := idField(f.field, "DB:")
		if !ok {
			continue
		}
		db, err := model.ParseDBInfo(f.value)
		if err != nil {
			return nil, fmt.Errorf("schemastore: meta DBs field %q: %w", f.field, err)
		}
		if db.ID != id {
			return nil, fmt.Errorf("schemastore: meta DBs field %q holds db id %d", f.field, db.ID)
		}
		isMySQL := db.Name.L == mysqlSchema
		if IsSystemSchema(db.Name.L) && !isMySQL {
			continue
		}
		tables, err := scanHash(ctx, r, prefix, "DB:"+strconv.FormatInt(id, 10), ts, page)
		if err != nil {
			return nil, err
		}
		for _, tf := range tables {
			tid, ok := idField(tf.field, "Table:")
			if !ok {
				continue // TID:, IID:, TARID:, SID: counters
			}
			if isMySQL {
				if !bytes.Contains(tf.value, []byte(`"`+ddlJobTableName+`"`)) && !bytes.Contains(tf.value, []byte(`"`+ddlHistoryTableName+`"`)) {
					continue // cheap filter: parse only the two tables we need
				}
			}
			ti, err := model.ParseTableInfo(tf.value)
			if err != nil {
				return nil, fmt.Errorf("schemastore: meta DB:%d field %q: %w", id, tf.field, err)
			}
			if ti.ID != tid {
				return nil, fmt.Errorf("schemastore: meta DB:%d field %q holds table id %d", id, tf.field, ti.ID)
			}
			if isMySQL {
				switch ti.Name.L {
				case ddlJobTableName:
					snap.jobTable = ti
				case ddlHistoryTableName:
					snap.histTable = ti
				}
				continue
			}
			snap.tables[id] = append(snap.tables[id], ti)
		}
		if !isMySQL {
			snap.dbs = append(snap.dbs, db)
		}
	}
	return snap, nil
}

// loadSnapshot fills an empty history from a snapshot: every table gets
// one version at the snapshot ts, which becomes the GC ts and the resolved
// ts (rule SS12).
func (h *history) loadSnapshot(snap *metaSnapshot, ch *changeSet) {
	h.gcTs, h.resolvedTs = snap.ts, snap.ts
	for _, db := range snap.dbs {
		h.dbs[db.ID] = db.Clone()
		ch.putDB(h.dbs[db.ID])
		for _, ti := range snap.tables[db.ID] {
			h.putTable(db.ID, ti, ti.PhysicalIDs(), snap.ts, 0, false, ch)
		}
	}
}

// LookupTable finds table db.table in the schema at ts, read from the meta
// keys through r (the reads a fresh store's initial snapshot makes, SS10):
// the databases hash, then that database's tables hash. Names compare
// case-insensitively, as TiDB's identifiers do. It returns the TableInfo
// as it is at ts and its schema id; a database or table that does not
// exist at ts is an error naming both and the ts. Keys are classic (no
// keyspace prefix). Callers use it to resolve names to table ids without
// a store (for example before the store exists, or for a consistency
// check at a past ts).
func LookupTable(ctx context.Context, r kvevent.SnapshotReader, ts uint64, db, table string) (*model.TableInfo, int64, error) {
	const page = 1024
	dbFields, err := scanHash(ctx, r, nil, "DBs", ts, page)
	if err != nil {
		return nil, 0, err
	}
	ldb, ltable := strings.ToLower(db), strings.ToLower(table)
	for _, f := range dbFields {
		id, ok := idField(f.field, "DB:")
		if !ok {
			continue
		}
		info, err := model.ParseDBInfo(f.value)
		if err != nil {
			return nil, 0, fmt.Errorf("schemastore: meta DBs field %q at ts %d: %w", f.field, ts, err)
		}
		if info.Name.L != ldb {
			continue
		}
		tables, err := scanHash(ctx, r, nil, "DB:"+strconv.FormatInt(id, 10), ts, page)
		if err != nil {
			return nil, 0, err
		}
		for _, tf := range tables {
			if _, ok := idField(tf.field, "Table:"); !ok {
				continue
			}
			ti, err := model.ParseTableInfo(tf.value)
			if err != nil {
				return nil, 0, fmt.Errorf("schemastore: meta DB:%d field %q at ts %d: %w", id, tf.field, ts, err)
			}
			if ti.Name.L == ltable {
				return ti, id, nil
			}
		}
		return nil, 0, fmt.Errorf("schemastore: table %s.%s does not exist at ts %d (database %s has id %d)", db, table, ts, db, id)
	}
	return nil, 0, fmt.Errorf("schemastore: table %s.%s does not exist at ts %d: no database %q", db, table, ts, db)
}
