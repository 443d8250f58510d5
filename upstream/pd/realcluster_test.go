package pd_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // TiDB speaks the MySQL protocol

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// The real-cluster suite (RC1) runs against a TiDB cluster, e.g.
//
//	tiup playground --without-monitor
//	SFEMU_TIDB_PD=127.0.0.1:2379 SFEMU_TIDB_DSN='root@tcp(127.0.0.1:4000)/' \
//	    go test ./upstream/pd -run RealCluster -v
//
// It runs DDL and DML through TiDB, follows the table with the gRPC source
// and compares with TiDB's own SELECT ... AS OF TIMESTAMP and a client-go
// snapshot at the span's resolved ts.

func realCluster(t *testing.T) (pdAddrs []string, dsn string) {
	t.Helper()
	p, d := os.Getenv("SFEMU_TIDB_PD"), os.Getenv("SFEMU_TIDB_DSN")
	if p == "" || d == "" {
		t.Skip("real-cluster suite: set SFEMU_TIDB_PD (PD endpoints, comma-separated) and SFEMU_TIDB_DSN (MySQL DSN of TiDB) to run it")
	}
	return strings.Split(p, ","), d
}

type rawRecorder struct {
	mu       sync.Mutex
	last     map[string]kvevent.RawKVEntry
	resolved uint64
	bad      []string
}

func (r *rawRecorder) ConsumeKV(es []kvevent.RawKVEntry) {
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

func (r *rawRecorder) AdvanceResolvedTs(ts uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ts <= r.resolved {
		r.bad = append(r.bad, fmt.Sprintf("resolved %d after %d", ts, r.resolved))
	}
	r.resolved = ts
}

// Rule MY-U2: make realcluster-selftest runs this test against
// sfemu-upstream, reached only from outside.
func TestRealClusterFollowsTable(t *testing.T) {
	pdAddrs, dsn := realCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := fmt.Sprintf("sfemu_rc_%d", time.Now().UnixNano())
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE DATABASE " + schema)
	defer func() { _, _ = db.Exec("DROP DATABASE " + schema) }()
	exec("CREATE TABLE " + schema + ".t (id BIGINT PRIMARY KEY, v VARCHAR(64))")
	var tableID int64
	if err := db.QueryRowContext(ctx, "SELECT TIDB_TABLE_ID FROM information_schema.tables WHERE table_schema = ? AND table_name = 't'", schema).Scan(&tableID); err != nil {
		t.Fatal(err)
	}

	cli, err := pd.Open(ctx, pd.Config{Endpoints: pdAddrs})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	kv, err := pd.OpenKVStore(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	loc := pd.NewRegionLocator(cli)
	defer loc.Close()
	src, err := logpuller.NewGRPCSource(logpuller.TransportConfig{
		ClusterID: cli.ClusterID(), Locator: loc, Resolver: kv, Clock: cli,
		CheckStartTs: func(ctx context.Context, ts uint64) error { return pd.CheckStartTs(ctx, cli.PD(), ts) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	start, err := cli.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prefix := tablecodec.EncodeRecordPrefix(nil, tableID)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, prefix), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(prefix))}
	rec := &rawRecorder{last: map[string]kvevent.RawKVEntry{}}
	if err := src.Subscribe(ctx, 1, span, start, rec); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
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
	if err := <-done; err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		cdcHandles = append(cdcHandles, h.IntValue())
	}
	sort.Slice(cdcHandles, func(i, j int) bool { return cdcHandles[i] < cdcHandles[j] })

	// TiDB's own view at the resolved ts.
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT id FROM %s.t AS OF TIMESTAMP TIDB_PARSE_TSO(%d) ORDER BY id", schema, r))
	if err != nil {
		t.Fatal(err)
	}
	var sqlHandles []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		sqlHandles = append(sqlHandles, id)
	}
	rows.Close()
	if fmt.Sprint(cdcHandles) != fmt.Sprint(sqlHandles) {
		t.Fatalf("handles at %d differ\ncdc: %v\nsql: %v", r, cdcHandles, sqlHandles)
	}
	// Raw values equal a client-go snapshot at the same ts.
	snap, err := kv.Scan(ctx, prefix, tablecodec.PrefixNext(prefix), r, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range snap {
		e, ok := rec.last[string(p.Key)]
		if !ok || !bytes.Equal(e.Value, p.Value) {
			t.Errorf("key %x: cdc %x, snapshot %x", p.Key, e.Value, p.Value)
		}
	}
}
