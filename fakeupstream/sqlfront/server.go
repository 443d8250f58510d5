package sqlfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/mounter"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Server is the SQL front of one fake cluster. Statements of all sessions
// are serialised by one mutex: the fake is a test and demo tool, and a total
// order makes runs reproducible.
type Server struct {
	mu      sync.Mutex
	cluster *fakeupstream.Cluster
	cat     *catalog
	enc     rowcodec.Encoder
	// clockMs gives create_time for history rows (the cluster clock).
	clockMs func() int64
	// m decodes rows for DML (used under mu; one mounter keeps its
	// per-table decoders and key slab across statements).
	m *mounter.Mounter
}

// ErrDuplicateKey is the error (wrapped with the table and row) of an
// INSERT or UPDATE that would write a primary key a row already has. Its
// text is what TiDB says, so clients that match it keep working.
var ErrDuplicateKey = errors.New("sqlfront: duplicate entry for key 'PRIMARY'")

// catalog mirrors the committed meta: what TiDB's infoschema holds.
type catalog struct {
	dbs           map[int64]*model.DBInfo
	tables        map[int64]*tableEntry // by logical table id
	schemaVersion int64
	nextID        int64
	// autoIDs keeps the next _tidb_rowid / auto-increment value per table.
	autoIDs map[int64]int64
	// autoLimit is the persisted auto-id mark per table (durable
	// clusters only): ids up to it may be handed out without a write.
	autoLimit map[int64]int64
}

type tableEntry struct {
	dbID int64
	info *model.TableInfo
}

// New bootstraps the system schema (mysql with tidb_ddl_job and
// tidb_ddl_history) on cluster and returns its SQL front. A cluster that
// already holds a bootstrapped meta (reopened from its Dir) is not
// bootstrapped again: New is Open.
func New(ctx context.Context, cluster *fakeupstream.Cluster) (*Server, error) {
	return Open(ctx, cluster)
}

func newServer(cluster *fakeupstream.Cluster) *Server {
	return &Server{
		cluster: cluster,
		cat: &catalog{
			dbs:       map[int64]*model.DBInfo{},
			tables:    map[int64]*tableEntry{},
			nextID:    firstUserID,
			autoIDs:   map[int64]int64{},
			autoLimit: map[int64]int64{},
		},
		clockMs: cluster.NowMs,
		m:       newMounter(),
	}
}

func bootstrap(ctx context.Context, cluster *fakeupstream.Cluster) (*Server, error) {
	s := newServer(cluster)
	mysqlDB := &model.DBInfo{ID: MysqlDBID, Name: cistr("mysql"), Charset: "utf8mb4", Collate: "utf8mb4_bin", State: model.StatePublic}
	txn := cluster.Begin()
	s.cat.schemaVersion = 1
	if err := s.putDB(txn, mysqlDB); err != nil {
		return nil, err
	}
	for _, ti := range []*model.TableInfo{ddlJobTableInfo(), ddlHistoryTableInfo()} {
		if err := s.putTable(txn, MysqlDBID, ti); err != nil {
			return nil, err
		}
	}
	s.putSchemaVersion(txn)
	s.putNextID(txn)
	if _, err := txn.Commit(); err != nil {
		return nil, fmt.Errorf("sqlfront: bootstrap: %w", err)
	}
	return s, nil
}

// Cluster is the cluster this front writes to.
func (s *Server) Cluster() *fakeupstream.Cluster { return s.cluster }

// SchemaVersion is the current schema version.
func (s *Server) SchemaVersion() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cat.schemaVersion
}

// TableInfo returns a copy of the current TableInfo of db.table.
func (s *Server) TableInfo(db, table string) (*model.TableInfo, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dbID, e, err := s.cat.lookupTable(db, table)
	if err != nil {
		return nil, 0, err
	}
	return e.info.Clone(), dbID, nil
}

// DBInfo returns a copy of the current DBInfo of db.
func (s *Server) DBInfo(db string) (*model.DBInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.cat.dbByName(db)
	if d == nil {
		return nil, fmt.Errorf("sqlfront: unknown database %q", db)
	}
	c := *d
	return &c, nil
}

func (c *catalog) dbByName(name string) *model.DBInfo {
	l := lower(name)
	for _, d := range c.dbs {
		if d.Name.L == l {
			return d
		}
	}
	return nil
}

func (c *catalog) lookupTable(db, table string) (int64, *tableEntry, error) {
	d := c.dbByName(db)
	if d == nil {
		return 0, nil, fmt.Errorf("sqlfront: unknown database %q", db)
	}
	l := lower(table)
	for _, e := range c.tables {
		if e.dbID == d.ID && e.info.Name.L == l {
			return d.ID, e, nil
		}
	}
	return 0, nil, fmt.Errorf("sqlfront: table %s.%s doesn't exist", db, table)
}

func (c *catalog) allocID() int64 {
	c.nextID++
	return c.nextID
}

// ---- meta writes ----

type kvWriter interface {
	Set(key, value []byte)
	Delete(key []byte)
}

func (s *Server) putDB(w kvWriter, d *model.DBInfo) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("sqlfront: encode DBInfo %d: %w", d.ID, err)
	}
	w.Set(tablecodec.EncodeDBKey(nil, d.ID), b)
	return nil
}

func (s *Server) putTable(w kvWriter, dbID int64, t *model.TableInfo) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("sqlfront: encode TableInfo %d: %w", t.ID, err)
	}
	w.Set(tablecodec.EncodeTableKey(nil, dbID, t.ID), b)
	return nil
}

func (s *Server) putSchemaVersion(w kvWriter) {
	w.Set(tablecodec.EncodeStringDataKey(nil, "SchemaVersionKey"), []byte(strconv.FormatInt(s.cat.schemaVersion, 10)))
}

func (s *Server) putNextID(w kvWriter) {
	w.Set(tablecodec.EncodeStringDataKey(nil, "NextGlobalID"), []byte(strconv.FormatInt(s.cat.nextID, 10)))
}

// ---- DDL jobs ----

// ddlChange is what one DDL does to the catalog, applied inside the job's
// done transaction.
type ddlChange struct {
	job *model.Job
	// apply writes the meta changes (and any data changes, e.g. for
	// truncate nothing: old data simply becomes unreachable) and updates
	// the in-memory catalog copy it is given.
	apply func(w kvWriter, c *catalog) error
	// schemaIDs / tableIDs fill the job row's text columns.
	schemaIDs, tableIDs []int64
}

// runJob writes the job's life in tidb_ddl_job as TiDB does: inserted
// (queueing), picked up (running), finished (done, committed with the schema
// change: its commit ts is the DDL's FinishedTs), then moved to
// tidb_ddl_history (synced). It returns the FinishedTs.
func (s *Server) runJob(ctx context.Context, ch *ddlChange) (uint64, error) {
	job := ch.job
	// Work on a copy of the catalog so a failed apply leaves nothing behind.
	next := s.cat.clone()
	job.ID = next.allocID()
	job.Version = 2
	job.SchemaState = model.StateNone
	job.State = model.JobStateQueueing
	job.SQLMode = 1436549152
	txn := s.cluster.Begin()
	job.StartTS = txn.StartTs()
	s.putNextIDOf(txn, next)
	if err := s.putJobRow(txn, ch, 0); err != nil {
		return 0, err
	}
	if _, err := txn.Commit(); err != nil {
		return 0, fmt.Errorf("sqlfront: queue job %d: %w", job.ID, err)
	}

	txn = s.cluster.Begin()
	job.State = model.JobStateRunning
	job.RealStartTS = txn.StartTs()
	if err := s.putJobRow(txn, ch, 1); err != nil {
		return 0, err
	}
	if _, err := txn.Commit(); err != nil {
		return 0, fmt.Errorf("sqlfront: run job %d: %w", job.ID, err)
	}

	txn = s.cluster.Begin()
	if err := ch.apply(txn, next); err != nil {
		_ = txn.Rollback()
		return 0, err
	}
	if err := s.splitNewTables(s.cat, next); err != nil {
		_ = txn.Rollback()
		return 0, err
	}
	next.schemaVersion++
	if job.BinlogInfo == nil {
		job.BinlogInfo = &model.HistoryInfo{}
	}
	job.BinlogInfo.SchemaVersion = next.schemaVersion
	job.LastSchemaVersion = next.schemaVersion
	job.State = model.JobStateDone
	saved := s.cat
	s.cat = next
	s.putSchemaVersion(txn)
	s.putNextID(txn)
	if err := s.putJobRow(txn, ch, 1); err != nil {
		s.cat = saved
		return 0, err
	}
	finishedTs, err := txn.Commit()
	if err != nil {
		s.cat = saved
		return 0, fmt.Errorf("sqlfront: finish job %d: %w", job.ID, err)
	}

	// Move to history (state synced, FinishedTS filled).
	txn = s.cluster.Begin()
	job.State = model.JobStateSynced
	job.BinlogInfo.FinishedTS = finishedTs
	txn.Delete(tablecodec.EncodeIntRecordKey(nil, DDLJobTableID, job.ID))
	if err := s.putHistoryRow(txn, ch); err != nil {
		return 0, err
	}
	if _, err := txn.Commit(); err != nil {
		return 0, fmt.Errorf("sqlfront: archive job %d: %w", job.ID, err)
	}
	return finishedTs, nil
}

// splitNewTables gives every physical table that next has and prev has
// not a region starting at its table prefix, before the DDL that creates it
// commits — what TiDB does with its default split-table = true (S19). So
// two tables never share a region: an open transaction in one never holds
// back the resolved ts of another (or of the DDL job table).
func (s *Server) splitNewTables(prev, next *catalog) error {
	had := map[int64]bool{}
	for _, e := range prev.tables {
		for _, id := range e.info.PhysicalIDs() {
			had[id] = true
		}
	}
	for _, e := range next.tables {
		for _, id := range e.info.PhysicalIDs() {
			if !had[id] {
				if err := s.splitAtTable(id, e.info.Name.O); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// splitAtTable makes a region start at physical table id's prefix (of
// table name) unless one does.
func (s *Server) splitAtTable(id int64, name string) error {
	k := tablecodec.EncodeTablePrefix(nil, id)
	if bytes.Equal(s.cluster.LocateRaw(k).StartKey, codec.EncodeBytes(nil, k)) {
		return nil
	}
	if _, _, err := s.cluster.SplitRaw(k); err != nil {
		return fmt.Errorf("sqlfront: split a region for table %q (physical id %d): %w", name, id, err)
	}
	return nil
}

func (s *Server) putNextIDOf(w kvWriter, c *catalog) {
	w.Set(tablecodec.EncodeStringDataKey(nil, "NextGlobalID"), []byte(strconv.FormatInt(c.nextID, 10)))
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

func (s *Server) putJobRow(w kvWriter, ch *ddlChange, processing int64) error {
	meta, err := json.Marshal(ch.job)
	if err != nil {
		return fmt.Errorf("sqlfront: encode job %d: %w", ch.job.ID, err)
	}
	ids := []int64{2, 3, 4, 5, 6, 7}
	ds := []value.Datum{
		value.NewIntDatum(0),
		value.NewStringDatum(joinIDs(ch.schemaIDs)),
		value.NewStringDatum(joinIDs(ch.tableIDs)),
		value.NewBytesDatum(meta),
		value.NewIntDatum(int64(ch.job.Type)),
		value.NewIntDatum(processing),
	}
	v, err := s.enc.EncodeV2(nil, ids, ds, nil)
	if err != nil {
		return fmt.Errorf("sqlfront: encode job row %d: %w", ch.job.ID, err)
	}
	w.Set(tablecodec.EncodeIntRecordKey(nil, DDLJobTableID, ch.job.ID), v)
	return nil
}

func (s *Server) putHistoryRow(w kvWriter, ch *ddlChange) error {
	meta, err := json.Marshal(ch.job)
	if err != nil {
		return fmt.Errorf("sqlfront: encode job %d: %w", ch.job.ID, err)
	}
	created := value.TimeFromGo(time.UnixMilli(s.clockMs()).UTC(), 12 /* datetime */, 0)
	ids := []int64{2, 3, 4, 5, 6, 7}
	ds := []value.Datum{
		value.NewBytesDatum(meta),
		value.NewStringDatum(ch.job.SchemaName),
		value.NewStringDatum(ch.job.TableName),
		value.NewStringDatum(joinIDs(ch.schemaIDs)),
		value.NewStringDatum(joinIDs(ch.tableIDs)),
		value.NewTimeDatum(created.Pack(), 12, 0),
	}
	v, err := s.enc.EncodeV2(nil, ids, ds, nil)
	if err != nil {
		return fmt.Errorf("sqlfront: encode history row %d: %w", ch.job.ID, err)
	}
	w.Set(tablecodec.EncodeIntRecordKey(nil, DDLHistoryTableID, ch.job.ID), v)
	return nil
}

func (c *catalog) clone() *catalog {
	n := &catalog{
		dbs:           make(map[int64]*model.DBInfo, len(c.dbs)),
		tables:        make(map[int64]*tableEntry, len(c.tables)),
		schemaVersion: c.schemaVersion,
		nextID:        c.nextID,
		autoIDs:       make(map[int64]int64, len(c.autoIDs)),
		autoLimit:     make(map[int64]int64, len(c.autoLimit)),
	}
	for id, v := range c.autoLimit {
		n.autoLimit[id] = v
	}
	for id, d := range c.dbs {
		n.dbs[id] = d
	}
	for id, e := range c.tables {
		n.tables[id] = e
	}
	for id, v := range c.autoIDs {
		n.autoIDs[id] = v
	}
	return n
}

// tablesOf lists a database's tables by id order.
func (c *catalog) tablesOf(dbID int64) []*tableEntry {
	var out []*tableEntry
	for _, e := range c.tables {
		if e.dbID == dbID {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].info.ID < out[j].info.ID })
	return out
}

func tablecodecDBKey(dbID int64) []byte { return tablecodec.EncodeDBKey(nil, dbID) }

func tablecodecTableKey(dbID, tableID int64) []byte {
	return tablecodec.EncodeTableKey(nil, dbID, tableID)
}

func newMounter() *mounter.Mounter { return mounter.New(mounter.Config{}) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
