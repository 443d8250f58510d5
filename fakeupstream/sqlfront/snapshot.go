package sqlfront

import (
	"context"
	"fmt"
	"sort"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// SnapshotRow is one row of a table read at a ts.
type SnapshotRow struct {
	PhysicalID int64
	Key        []byte
	// Values holds the row's datums by column offset of Table (owned).
	Values []value.Datum
}

// TableSnapshot is a table as it was at a ts: its TableInfo from the meta
// keys at that ts and every row of every physical partition.
type TableSnapshot struct {
	DBID  int64
	Table *model.TableInfo
	Rows  []SnapshotRow
}

// ReadTable reads db.table at ts the way a client would: the schema from
// meta keys at ts, then the record spans at ts, decoded by the mounter. It is
// the upstream side of consistency checks.
func ReadTable(ctx context.Context, r kvevent.SnapshotReader, db, table string, ts uint64) (*TableSnapshot, error) {
	dbInfo, err := findDB(ctx, r, db, ts)
	if err != nil {
		return nil, err
	}
	ti, err := findTable(ctx, r, dbInfo, table, ts)
	if err != nil {
		return nil, err
	}
	snap := &TableSnapshot{DBID: dbInfo.ID, Table: ti}
	m := newMounter()
	for _, phys := range ti.PhysicalIDs() {
		start := tablecodec.EncodeRecordPrefix(nil, phys)
		kvs, err := r.Scan(ctx, start, tablecodec.PrefixNext(start), ts, 0)
		if err != nil {
			return nil, fmt.Errorf("sqlfront: scan %s.%s (physical table %d) at %d: %w", db, table, phys, ts, err)
		}
		for _, kv := range kvs {
			row, err := decodeRow(m, ti, phys, kv.Key, kv.Value)
			if err != nil {
				return nil, err
			}
			snap.Rows = append(snap.Rows, SnapshotRow{PhysicalID: phys, Key: row.key, Values: row.datums})
		}
	}
	sort.Slice(snap.Rows, func(i, j int) bool { return string(snap.Rows[i].Key) < string(snap.Rows[j].Key) })
	return snap, nil
}

func scanHash(ctx context.Context, r kvevent.SnapshotReader, name string, ts uint64) ([]kvevent.KV, error) {
	prefix := tablecodec.EncodeHashDataPrefix(nil, name)
	return r.Scan(ctx, prefix, tablecodec.PrefixNext(prefix), ts, 0)
}

func findDB(ctx context.Context, r kvevent.SnapshotReader, name string, ts uint64) (*model.DBInfo, error) {
	kvs, err := scanHash(ctx, r, "DBs", ts)
	if err != nil {
		return nil, fmt.Errorf("sqlfront: read databases at %d: %w", ts, err)
	}
	l := lower(name)
	for _, kv := range kvs {
		var d model.DBInfo
		if err := jsonUnmarshal(kv.Value, &d); err != nil {
			return nil, fmt.Errorf("sqlfront: DBInfo at key %x: %w", kv.Key, err)
		}
		if d.Name.L == l {
			return &d, nil
		}
	}
	return nil, fmt.Errorf("sqlfront: database %q does not exist at ts %d", name, ts)
}

func findTable(ctx context.Context, r kvevent.SnapshotReader, db *model.DBInfo, name string, ts uint64) (*model.TableInfo, error) {
	dbID := db.ID
	kvs, err := scanHash(ctx, r, fmt.Sprintf("DB:%d", dbID), ts)
	if err != nil {
		return nil, fmt.Errorf("sqlfront: read tables of database %q at %d: %w", db.Name.O, ts, err)
	}
	l := lower(name)
	for _, kv := range kvs {
		// Only Table:<id> fields hold TableInfos (others are id counters).
		field, err := hashField(kv.Key, fmt.Sprintf("DB:%d", dbID))
		if err != nil || len(field) < 6 || string(field[:6]) != "Table:" {
			continue
		}
		ti, err := model.ParseTableInfo(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("sqlfront: TableInfo at key %x: %w", kv.Key, err)
		}
		if ti.Name.L == l {
			return ti, nil
		}
	}
	return nil, fmt.Errorf("sqlfront: table %q does not exist in database %q at ts %d", name, db.Name.O, ts)
}

// hashField extracts the field of a hash data key of hash name.
func hashField(key []byte, name string) ([]byte, error) {
	prefix := tablecodec.EncodeHashDataPrefix(nil, name)
	if len(key) < len(prefix) || string(key[:len(prefix)]) != string(prefix) {
		return nil, fmt.Errorf("key %x is not in hash %q", key, name)
	}
	_, field, err := codec.DecodeBytes(key[len(prefix):], nil)
	return field, err
}
