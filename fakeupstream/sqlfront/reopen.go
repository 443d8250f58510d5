package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// autoIDStep is how many auto-increment / _tidb_rowid values one persisted
// reservation covers (TiDB's default allocator step is 30000).
const autoIDStep = 30000

// autoIDField is TiDB's meta field of a table's auto id: hash "DB:<db>",
// field "TID:<table>", value the decimal high-water mark.
func autoIDField(tableID int64) []byte { return strconv.AppendInt([]byte("TID:"), tableID, 10) }

func autoIDKey(dbID, tableID int64) []byte {
	return tablecodec.EncodeHashDataKey(nil, string(tablecodec.DBField(dbID)), autoIDField(tableID))
}

// Open returns the SQL front of cluster: when the cluster already holds a
// bootstrapped meta (a durable cluster reopened on its Dir), the catalog is
// rebuilt from the committed meta keys (databases, tables, schema version,
// next global id, auto-id marks) instead of bootstrapping again (S17);
// otherwise it bootstraps as New does.
func Open(ctx context.Context, cluster *fakeupstream.Cluster) (*Server, error) {
	ts, err := cluster.CurrentTs(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlfront: open: %w", err)
	}
	v, err := readMeta(ctx, cluster, tablecodec.EncodeStringDataKey(nil, "SchemaVersionKey"), ts)
	if err != nil {
		return nil, err
	}
	var s *Server
	if v == nil {
		if s, err = bootstrap(ctx, cluster); err != nil {
			return nil, err
		}
	} else {
		s = newServer(cluster)
		if err := s.loadCatalog(ctx, ts, v); err != nil {
			return nil, err
		}
	}
	// Regions are not persisted (a reopened cluster starts as one region):
	// every table, the system ones included, gets its own again (S19).
	if err := s.splitNewTables(&catalog{}, s.cat); err != nil {
		return nil, err
	}
	for _, sys := range []struct {
		id   int64
		name string
	}{{DDLHistoryTableID, "mysql.tidb_ddl_history"}, {DDLJobTableID, "mysql.tidb_ddl_job"}} {
		if err := s.splitAtTable(sys.id, sys.name); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readMeta reads one meta key, resolving locks left by a txn that was in
// flight when the cluster stopped (their TTL decides, as for any reader).
func readMeta(ctx context.Context, c *fakeupstream.Cluster, key []byte, ts uint64) ([]byte, error) {
	v, err := c.Get(ctx, key, ts)
	if le := (*mvcc.LockedError)(nil); errors.As(err, &le) {
		if _, rerr := c.ResolveLocks(key, append(append([]byte(nil), key...), 0), ts); rerr != nil {
			return nil, fmt.Errorf("sqlfront: open: resolve lock on %x: %w", key, rerr)
		}
		v, err = c.Get(ctx, key, ts)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlfront: open: read meta key %x at %d: %w", key, ts, err)
	}
	return v, nil
}

func (s *Server) loadCatalog(ctx context.Context, ts uint64, version []byte) error {
	c := s.cat
	var err error
	if c.schemaVersion, err = strconv.ParseInt(string(version), 10, 64); err != nil {
		return fmt.Errorf("sqlfront: open: SchemaVersionKey %q: %w", version, err)
	}
	next, err := readMeta(ctx, s.cluster, tablecodec.EncodeStringDataKey(nil, "NextGlobalID"), ts)
	if err != nil {
		return err
	}
	if c.nextID, err = strconv.ParseInt(string(next), 10, 64); err != nil {
		return fmt.Errorf("sqlfront: open: NextGlobalID %q: %w", next, err)
	}
	dbs, err := scanHash(ctx, s.cluster, "DBs", ts)
	if err != nil {
		return fmt.Errorf("sqlfront: open: read databases at %d: %w", ts, err)
	}
	autoIDs := map[int64]int64{}
	sawMysql := false
	for _, kv := range dbs {
		d := &model.DBInfo{}
		if err := jsonUnmarshal(kv.Value, d); err != nil {
			return fmt.Errorf("sqlfront: open: DBInfo at key %x: %w", kv.Key, err)
		}
		if d.ID == MysqlDBID {
			// The system schema lives in the meta only, as after bootstrap.
			sawMysql = true
			continue
		}
		c.dbs[d.ID] = d
		name := string(tablecodec.DBField(d.ID))
		fields, err := scanHash(ctx, s.cluster, name, ts)
		if err != nil {
			return fmt.Errorf("sqlfront: open: read tables of database %q at %d: %w", d.Name.O, ts, err)
		}
		for _, f := range fields {
			field, err := hashField(f.Key, name)
			if err != nil {
				return fmt.Errorf("sqlfront: open: %w", err)
			}
			switch fs := string(field); {
			case strings.HasPrefix(fs, "Table:"):
				ti, err := model.ParseTableInfo(f.Value)
				if err != nil {
					return fmt.Errorf("sqlfront: open: TableInfo at key %x: %w", f.Key, err)
				}
				c.tables[ti.ID] = &tableEntry{dbID: d.ID, info: ti}
			case strings.HasPrefix(fs, "TID:"):
				id, err1 := strconv.ParseInt(fs[4:], 10, 64)
				mark, err2 := strconv.ParseInt(string(f.Value), 10, 64)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("sqlfront: open: auto id field %q = %q at key %x", fs, f.Value, f.Key)
				}
				autoIDs[id] = mark
			}
		}
	}
	for id, mark := range autoIDs {
		if _, ok := c.tables[id]; ok {
			// Every id up to the mark may have been handed out: start
			// above it (S18).
			c.autoIDs[id], c.autoLimit[id] = mark, mark
		}
	}
	if !sawMysql {
		return fmt.Errorf("sqlfront: open: meta at %d has a schema version but no mysql database", ts)
	}
	return nil
}

// takeAutoID records that id of table tableID is used (allocated or given
// explicitly) and, on a durable cluster, first persists a new mark
// autoIDStep above it when id passes the last one, in its own transaction
// as TiDB's allocator does, so a restart never hands an id out again (S18).
func (s *Server) takeAutoID(tableID, id int64) error {
	if id > s.cat.autoIDs[tableID] {
		s.cat.autoIDs[tableID] = id
	}
	if !s.cluster.Durable() || id <= s.cat.autoLimit[tableID] {
		return nil
	}
	e := s.cat.tables[tableID]
	if e == nil {
		return fmt.Errorf("sqlfront: auto id of unknown table %d", tableID)
	}
	db := "?"
	if d := s.cat.dbs[e.dbID]; d != nil {
		db = d.Name.O
	}
	mark := id + autoIDStep
	txn := s.cluster.Begin()
	txn.Set(autoIDKey(e.dbID, tableID), []byte(strconv.FormatInt(mark, 10)))
	if _, err := txn.Commit(); err != nil {
		return fmt.Errorf("sqlfront: persist auto id mark of table %s.%s: %w", db, e.info.Name.O, err)
	}
	s.cat.autoLimit[tableID] = mark
	return nil
}
