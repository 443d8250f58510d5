package adapter

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/mysqlfront"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/verify"
)

// TestRealCluster_SnapshotMirrorsExistingRows is the opt-in real-cluster
// case of the initial snapshot (SN1, SN11; SR7 says how to run the suite):
// a table that holds rows before the adapter starts (and a split table of
// several regions on a real cluster) mirrors completely, then stays
// current; the collection equals TiDB's SELECT ... AS OF TIMESTAMP and
// the snapshot read by client-go at the final ts. make
// realcluster-selftest runs it against sfemu-upstream.
func TestRealCluster_SnapshotMirrorsExistingRows(t *testing.T) {
	pdEnv, dsn := os.Getenv("SFEMU_TIDB_PD"), os.Getenv("SFEMU_TIDB_DSN")
	if pdEnv == "" || dsn == "" {
		t.Skip("real-cluster test: set SFEMU_TIDB_PD (PD endpoints, comma-separated) and SFEMU_TIDB_DSN (MySQL DSN of TiDB, e.g. root@tcp(127.0.0.1:4000)/) to run it; see README, real cluster")
	}
	testSnapshotMirrorsExisting(t, strings.Split(pdEnv, ","), dsn)
}

// TestFakeCluster_SnapshotMirrorsExistingRows runs the same body against
// the embedded cluster seen only from outside (SR7), in every go test.
func TestFakeCluster_SnapshotMirrorsExistingRows(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 12, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := sqlfront.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	my, err := mysqlfront.StartConfig(front, mysqlfront.Config{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer my.Close()
	testSnapshotMirrorsExisting(t, []string{srv.PDAddr()}, my.DSN(""))
}

func testSnapshotMirrorsExisting(t *testing.T, pdAddrs []string, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	schema := fmt.Sprintf("sfemu_snap_%d", time.Now().UnixNano())
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE DATABASE " + schema)
	defer func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE "+schema) }()
	tbl := schema + ".items"
	exec("CREATE TABLE " + tbl + " (id BIGINT PRIMARY KEY, title VARCHAR(64) NOT NULL, price INT, doc JSON)")
	const before = 400
	for i := 1; i <= before; i += 50 {
		var vals []string
		for j := i; j < i+50; j++ {
			vals = append(vals, fmt.Sprintf("(%d, 'item %d', %d, '{\"k\": %d}')", j, j, j*3, j))
		}
		exec("INSERT INTO " + tbl + " VALUES " + strings.Join(vals, ", "))
	}
	exec("UPDATE " + tbl + " SET price = price + 1 WHERE id % 7 = 0")
	exec("DELETE FROM " + tbl + " WHERE id % 11 = 0")

	up, err := ConnectUpstream(ctx, pdAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	tables := []TableRef{{DB: schema, Table: "items"}}
	prog := &snapshot.Progress{}
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: tables, ClientID: schema,
		Snapshot: SnapshotConfig{Mode: SnapshotAuto, ChunkRows: 64, Progress: prog}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rep := prog.Report(time.Now())
	if len(rep) != 1 || rep[0].State != "done" || rep[0].Rows == 0 {
		t.Fatalf("snapshot progress %+v", rep)
	}
	// The stream follows after the snapshot.
	exec("INSERT INTO " + tbl + " VALUES (5000, 'after', 1, NULL)")
	exec("UPDATE " + tbl + " SET title = 'changed' WHERE id = 3")
	exec("DELETE FROM " + tbl + " WHERE id = 4")

	time.Sleep(5 * time.Millisecond) // AS OF TIMESTAMP reads at the ts's millisecond
	final, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, tables, final, 2*time.Minute); err != nil {
		t.Fatalf("%v (runtime: %v)", err, a.RT.Err())
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT id, title FROM %s AS OF TIMESTAMP TIDB_PARSE_TSO(%d) ORDER BY id", tbl, final))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for rows.Next() {
		var id int64
		var title string
		if err := rows.Scan(&id, &title); err != nil {
			t.Fatal(err)
		}
		want[strconv.FormatInt(id, 10)] = title
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	docs, err := verify.Documents(ctx, emu, tables[0].CollectionName())
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(want) || len(want) < before-before/11 {
		t.Errorf("collection has %d documents, TiDB %d rows at %d", len(docs), len(want), final)
	}
	for _, d := range docs {
		if w, ok := want[d.PrimaryKey]; !ok || d.Fields["title"].GetStringValue() != w {
			t.Errorf("pk %s: title %v, TiDB says %q (present %v)", d.PrimaryKey, d.Fields["title"], w, ok)
		}
	}
	expectConsistent(t, ctx, up, emu, tables, final)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
