package schemastore

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/rowcodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// ---- golden data ----

type goldenRec map[string]json.RawMessage

func (r goldenRec) str(k string) string {
	var s string
	_ = json.Unmarshal(r[k], &s)
	return s
}

func (r goldenRec) int(k string) int64 {
	var n json.Number
	if err := json.Unmarshal(r[k], &n); err == nil {
		v, _ := n.Int64()
		return v
	}
	v, _ := strconv.ParseInt(r.str(k), 10, 64)
	return v
}

func (r goldenRec) hex(t testing.TB, k string) []byte {
	b, err := hex.DecodeString(r.str(k))
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return b
}

var goldenCache sync.Map

// goldenRecords reads the records of one kind through the shared golden
// locator (value/golden: ../shared next to the module root; a missing file
// fails the test).
func goldenRecords(t testing.TB, file, kind string) []goldenRec {
	t.Helper()
	key := file + "/" + kind
	if v, ok := goldenCache.Load(key); ok {
		return v.([]goldenRec)
	}
	var out []goldenRec
	for _, rec := range golden.OfKind(t, "golden/"+file, kind) {
		var r goldenRec
		rec.Decode(t, &r)
		out = append(out, r)
	}
	goldenCache.Store(key, out)
	return out
}

// serverTable returns a TableInfo captured from the real server by name.
func serverTable(t testing.TB, name string) *model.TableInfo {
	t.Helper()
	for _, r := range goldenRecords(t, "tidb-server-capture.jsonl", "server_table_info") {
		if r.str("name") == name {
			ti, err := model.ParseTableInfo(r.hex(t, "meta_value_hex"))
			if err != nil {
				t.Fatal(err)
			}
			return ti
		}
	}
	t.Fatalf("no server table %s", name)
	return nil
}

// ---- fake snapshot reader ----

type fakeSnapshot struct {
	mu       sync.Mutex
	kv       map[string][]byte
	safe     uint64
	scans    int
	failScan error
}

func newFakeSnapshot() *fakeSnapshot { return &fakeSnapshot{kv: map[string][]byte{}} }

func (f *fakeSnapshot) put(k, v []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kv[string(k)] = append([]byte(nil), v...)
}

func (f *fakeSnapshot) Get(_ context.Context, key []byte, _ uint64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kv[string(key)], nil
}

func (f *fakeSnapshot) Scan(_ context.Context, start, end []byte, _ uint64, limit int) ([]kvevent.KV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scans++
	if f.failScan != nil {
		return nil, f.failScan
	}
	var keys []string
	for k := range f.kv {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]kvevent.KV, len(keys))
	for i, k := range keys {
		out[i] = kvevent.KV{Key: []byte(k), Value: f.kv[k]}
	}
	return out, nil
}

func (f *fakeSnapshot) GCSafePoint(context.Context) (uint64, error) { return f.safe, nil }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// addDB / addTable write meta keys the way TiDB lays them out.
func (f *fakeSnapshot) addDB(t testing.TB, prefix []byte, db *model.DBInfo) {
	f.put(tablecodec.EncodeDBKey(append([]byte(nil), prefix...), db.ID), mustJSON(t, db))
}

func (f *fakeSnapshot) addTable(t testing.TB, prefix []byte, dbID int64, ti *model.TableInfo) {
	f.put(tablecodec.EncodeTableKey(append([]byte(nil), prefix...), dbID, ti.ID), mustJSON(t, ti))
	// auto-id counters live in the same hash and must be ignored
	f.put(tablecodec.EncodeHashDataKey(append([]byte(nil), prefix...), "DB:"+strconv.FormatInt(dbID, 10), []byte("TID:"+strconv.FormatInt(ti.ID, 10))), []byte("5"))
}

// withSystemTables adds the mysql schema with the real tidb_ddl_job and
// tidb_ddl_history layouts captured from a server.
func (f *fakeSnapshot) withSystemTables(t testing.TB, prefix []byte) {
	f.addDB(t, prefix, &model.DBInfo{ID: 1, Name: model.NewCIStr("mysql"), State: model.StatePublic})
	f.addTable(t, prefix, 1, serverTable(t, "mysql.tidb_ddl_job"))
	f.addTable(t, prefix, 1, serverTable(t, "mysql.tidb_ddl_history"))
	// a system table that must not become a replicated table
	f.addTable(t, prefix, 1, &model.TableInfo{ID: 5, Name: model.NewCIStr("user")})
}

// ---- schema builders ----

func intCol(id int64, name string, pk bool) *model.ColumnInfo {
	c := &model.ColumnInfo{ID: id, Name: model.NewCIStr(name), Offset: int(id - 1), State: model.StatePublic}
	c.FieldType = *types.NewFieldType(mysql.TypeLonglong)
	if pk {
		c.FieldType.SetFlag(mysql.PriKeyFlag | mysql.NotNullFlag)
	}
	return c
}

// tbl builds a pk_is_handle table with columns id, c1..cN.
func tbl(id int64, name string, extraCols int) *model.TableInfo {
	ti := &model.TableInfo{ID: id, Name: model.NewCIStr(name), PKIsHandle: true, State: model.StatePublic}
	ti.Columns = append(ti.Columns, intCol(1, "id", true))
	for i := 0; i < extraCols; i++ {
		ti.Columns = append(ti.Columns, intCol(int64(i+2), fmt.Sprintf("c%d", i+1), false))
	}
	for i, c := range ti.Columns {
		c.Offset = i
	}
	ti.MaxColumnID = int64(len(ti.Columns))
	return ti
}

func withParts(ti *model.TableInfo, ids ...int64) *model.TableInfo {
	pi := &model.PartitionInfo{Type: model.PartitionTypeHash, Expr: "`id`", Enable: true, Num: uint64(len(ids))}
	for i, id := range ids {
		pi.Definitions = append(pi.Definitions, model.PartitionDefinition{ID: id, Name: model.NewCIStr(fmt.Sprintf("p%d", i))})
	}
	ti.Partition = pi
	return ti
}

func dbInfo(id int64, name string) *model.DBInfo {
	return &model.DBInfo{ID: id, Name: model.NewCIStr(name), State: model.StatePublic}
}

// job builds a finished job; the store sets FinishedTS from the commit ts.
func job(id int64, tp model.ActionType, schemaID, tableID int64, ver int64) *model.Job {
	return &model.Job{ID: id, Type: tp, SchemaID: schemaID, TableID: tableID, State: model.JobStateDone,
		Version: model.JobVersion2, BinlogInfo: &model.HistoryInfo{SchemaVersion: ver}}
}

func withTable(j *model.Job, ti *model.TableInfo) *model.Job {
	j.BinlogInfo.TableInfo = ti
	j.TableName = ti.Name.O
	return j
}

// ---- test environment ----

type env struct {
	t        testing.TB
	dir      string
	snap     *fakeSnapshot
	store    *Store
	consumer kvevent.Consumer
	jobTable *model.TableInfo
	cfg      Config
	cancel   context.CancelFunc
}

const snapTs = 1000

func newEnv(t testing.TB, setup func(f *fakeSnapshot)) *env {
	t.Helper()
	f := newFakeSnapshot()
	f.withSystemTables(t, nil)
	if setup != nil {
		setup(f)
	}
	e := &env{t: t, dir: t.TempDir(), snap: f, jobTable: serverTable(t, "mysql.tidb_ddl_job")}
	e.cfg = Config{Dir: e.dir, Snapshot: f, InitialTs: snapTs}
	e.open()
	return e
}

// open (re)opens the store on e.dir.
func (e *env) open() {
	e.t.Helper()
	s, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.RegisterKeyspace(ctx, 0); err != nil {
		cancel()
		e.t.Fatal(err)
	}
	subs, err := s.DDLSubscriptions()
	if err != nil {
		e.t.Fatal(err)
	}
	e.store, e.consumer, e.cancel = s, subs[0].Consumer, cancel
	e.t.Cleanup(func() { cancel(); _ = s.Close() })
}

func (e *env) reopen() {
	e.t.Helper()
	e.cancel()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

// jobRow encodes a job as a tidb_ddl_job row: key t{id}_r{job id}, value
// row v2 with job_meta located by name.
func jobRow(t testing.TB, jobTable *model.TableInfo, j *model.Job) (key, val []byte) {
	t.Helper()
	return jobRowJSON(t, jobTable, j.ID, mustJSON(t, j))
}

func jobRowJSON(t testing.TB, jobTable *model.TableInfo, jobID int64, meta []byte) (key, val []byte) {
	t.Helper()
	c := jobTable.ColumnByName("job_meta")
	typ := jobTable.ColumnByName("type")
	val, err := rowcodec.EncodeV2(nil, []int64{typ.ID, c.ID}, []value.Datum{value.NewIntDatum(0), value.NewBytesDatum(meta)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tablecodec.EncodeIntRecordKey(nil, jobTable.ID, jobID), val
}

// deliver sends jobs as puts committed at the given ts.
func (e *env) deliver(commitTs uint64, jobs ...*model.Job) {
	e.t.Helper()
	var entries []kvevent.RawKVEntry
	for _, j := range jobs {
		k, v := jobRow(e.t, e.jobTable, j)
		entries = append(entries, kvevent.RawKVEntry{OpType: kvevent.OpTypePut, Key: k, Value: v, StartTs: commitTs - 1, CRTs: commitTs})
	}
	e.consumer.ConsumeKV(entries)
}

func (e *env) resolve(ts uint64) {
	e.t.Helper()
	e.consumer.AdvanceResolvedTs(ts)
	if err := e.store.Err(); err != nil {
		e.t.Fatalf("store failed: %v", err)
	}
}

// apply delivers one job at commitTs and resolves to commitTs.
func (e *env) apply(commitTs uint64, j *model.Job) {
	e.t.Helper()
	e.deliver(commitTs, j)
	e.resolve(commitTs)
}

func (e *env) events(start uint64) []DDLEvent {
	e.t.Helper()
	evs, _, err := e.store.FetchTableTriggerDDLEvents(start, 1<<20)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *env) info(tableID int64, ts uint64) *model.TableInfo {
	e.t.Helper()
	ti, err := e.store.GetTableInfo(tableID, ts)
	if err != nil {
		e.t.Fatalf("GetTableInfo(%d, %d): %v", tableID, ts, err)
	}
	return ti
}

func colNames(ti *model.TableInfo) string {
	var b bytes.Buffer
	for i, c := range ti.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.Name.O)
	}
	return b.String()
}

func decodeComparable(b []byte) ([]byte, error) { return tablecodec.DecodeComparableKey(b, nil) }
