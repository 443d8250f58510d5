package mysqlfront

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// suiteRecorder keeps the last version of every key and checks the feed's
// ordering promises, as the real-cluster suite's recorder does.
type suiteRecorder struct {
	mu       sync.Mutex
	last     map[string]kvevent.RawKVEntry
	resolved uint64
	bad      []string
}

func (r *suiteRecorder) ConsumeKV(es []kvevent.RawKVEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range es {
		if e.CRTs <= r.resolved {
			r.bad = append(r.bad, fmt.Sprintf("row %x@%d after resolved %d", e.Key, e.CRTs, r.resolved))
		}
		if prev, ok := r.last[string(e.Key)]; ok && prev.CRTs > e.CRTs {
			continue
		}
		e.Key, e.Value, e.OldValue = bytes.Clone(e.Key), bytes.Clone(e.Value), nil
		r.last[string(e.Key)] = e
	}
}

func (r *suiteRecorder) AdvanceResolvedTs(ts uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts <= r.resolved {
		r.bad = append(r.bad, fmt.Sprintf("resolved %d after %d", ts, r.resolved))
	}
	r.resolved = ts
}

// U1, U2: the payoff. The flow of upstream/pd/realcluster_test.go (R1 of
// specs/logpuller.md) against the embedded stack through exactly the code
// a real cluster is reached with: go-sql-driver/mysql on this front (DDL,
// DML, information_schema, SELECT ... AS OF TIMESTAMP), the real PD client
// and client-go on the gRPC servers, and the gRPC log puller.
func TestRealClusterFlowOnEmbeddedStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole embedded stack on the wall clock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logs := &logSink{}
	up, err := StartEmbedded(ctx, EmbeddedConfig{Seed: 1, Logf: logs.logf})
	require.NoError(t, err)
	defer up.Close()
	runRealClusterFlow(t, ctx, []string{up.PDAddr()}, up.DSN())
	require.Empty(t, up.GRPC.Unimplemented(), "RPCs the real clients needed that the fake lacks")
	require.NotContains(t, logs.text(), "closing", "no connection was dropped for a protocol error")
}

func runRealClusterFlow(t *testing.T, ctx context.Context, pdAddrs []string, dsn string) {
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	schema := fmt.Sprintf("sfemu_rc_%d", time.Now().UnixNano())
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		require.NoError(t, err, q)
	}
	exec("CREATE DATABASE " + schema)
	defer func() { _, _ = db.Exec("DROP DATABASE " + schema) }()
	exec("CREATE TABLE " + schema + ".t (id BIGINT PRIMARY KEY, v VARCHAR(64))")
	var tableID int64
	require.NoError(t, db.QueryRowContext(ctx, "SELECT TIDB_TABLE_ID FROM information_schema.tables WHERE table_schema = ? AND table_name = 't'", schema).Scan(&tableID))

	cli, err := pd.Open(ctx, pd.Config{Endpoints: pdAddrs})
	require.NoError(t, err)
	defer cli.Close()
	kv, err := pd.OpenKVStore(cli)
	require.NoError(t, err)
	defer kv.Close()
	loc := pd.NewRegionLocator(cli)
	defer loc.Close()
	src, err := logpuller.NewGRPCSource(logpuller.TransportConfig{
		ClusterID: cli.ClusterID(), Locator: loc, Resolver: kv, Clock: cli,
		CheckStartTs: func(ctx context.Context, ts uint64) error { return pd.CheckStartTs(ctx, cli.PD(), ts) },
	})
	require.NoError(t, err)
	defer src.Close()
	start, err := cli.CurrentTs(ctx)
	require.NoError(t, err)
	prefix := tablecodec.EncodeRecordPrefix(nil, tableID)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, prefix), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(prefix))}
	rec := &suiteRecorder{last: map[string]kvevent.RawKVEntry{}}
	require.NoError(t, src.Subscribe(ctx, 1, span, start, rec))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()

	for i := 1; i <= 200; i++ {
		exec("INSERT INTO "+schema+".t VALUES (?, ?)", i, fmt.Sprintf("v%d", i))
	}
	exec("UPDATE " + schema + ".t SET v = CONCAT(v, '-u') WHERE id % 3 = 0")
	exec("DELETE FROM " + schema + ".t WHERE id % 7 = 0")
	exec("ALTER TABLE " + schema + ".t ADD COLUMN w INT DEFAULT 5")
	exec("INSERT INTO " + schema + ".t (id, v, w) VALUES (1000, 'after-ddl', 9)")
	target, err := cli.CurrentTs(ctx)
	require.NoError(t, err)
	for {
		rec.mu.Lock()
		r := rec.resolved
		rec.mu.Unlock()
		if r >= target {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("resolved ts %d never reached %d", r, target)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	require.NoError(t, <-done)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, b := range rec.bad {
		t.Error(b)
	}
	r := rec.resolved
	var cdcHandles []int64
	for k, e := range rec.last {
		if e.CRTs > r || e.OpType == kvevent.OpTypeDelete {
			continue
		}
		_, h, err := tablecodec.DecodeRecordKey([]byte(k))
		require.NoError(t, err)
		cdcHandles = append(cdcHandles, h.IntValue())
	}
	sort.Slice(cdcHandles, func(i, j int) bool { return cdcHandles[i] < cdcHandles[j] })

	// The SQL view at the resolved ts.
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT id FROM %s.t AS OF TIMESTAMP TIDB_PARSE_TSO(%d) ORDER BY id", schema, r))
	require.NoError(t, err)
	var sqlHandles []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		sqlHandles = append(sqlHandles, id)
	}
	require.NoError(t, rows.Close())
	require.Equal(t, fmt.Sprint(cdcHandles), fmt.Sprint(sqlHandles), "handles at %d", r)
	// 200 rows, 28 deleted (multiples of 7), one after the DDL.
	require.Len(t, sqlHandles, 200-28+1)
	// Raw values equal a client-go snapshot at the same ts.
	snap, err := kv.Scan(ctx, prefix, tablecodec.PrefixNext(prefix), r, 0)
	require.NoError(t, err)
	require.Len(t, snap, len(sqlHandles))
	for _, p := range snap {
		e, ok := rec.last[string(p.Key)]
		if !ok || !bytes.Equal(e.Value, p.Value) {
			t.Errorf("key %x: cdc %x, snapshot %x", p.Key, e.Value, p.Value)
		}
	}
	// The UPDATE's expression reached the rows.
	var v string
	require.NoError(t, db.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM %s.t WHERE id = 3", schema)).Scan(&v))
	require.Equal(t, "v3-u", v)
}
