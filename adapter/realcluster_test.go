package adapter

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // TiDB speaks the MySQL protocol

	"github.com/searchfabric/sfemu/emulator"
	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/mysqlfront"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/verify"
)

// TestRealCluster_MirrorEqualsAsOfTimestamp is the opt-in end-to-end test
// against a real TiDB cluster (SR6), e.g.
//
//	tiup playground --without-monitor
//	SFEMU_TIDB_PD=127.0.0.1:2379 SFEMU_TIDB_DSN='root@tcp(127.0.0.1:4000)/' \
//	    go test ./adapter -run RealCluster -v
//
// Through database/sql it creates a fresh database and table, then mirrors
// the table with ConnectUpstream + Start into an emulator while it
// runs DML (inserts, updates, deletes, a multi-statement transaction) and
// DDL (ADD COLUMN, then DROP COLUMN); at a final ts taken after the last
// write it waits for safe_ts and compares the collection twice: with
// TiDB's own SELECT ... AS OF TIMESTAMP (keys and the integer and string
// columns, as TiDB's SQL layer answers them) and with CheckConsistency
// (every field, rows read by client-go snapshot and decoded with the
// schema at that ts).
//
// Rules SR7 (opt-in, skips saying so), MY-U2 (make realcluster-selftest runs
// it against sfemu-upstream).
func TestRealCluster_MirrorEqualsAsOfTimestamp(t *testing.T) {
	pdEnv, dsn := os.Getenv("SFEMU_TIDB_PD"), os.Getenv("SFEMU_TIDB_DSN")
	if pdEnv == "" || dsn == "" {
		t.Skip("real-cluster test: set SFEMU_TIDB_PD (PD endpoints, comma-separated) and SFEMU_TIDB_DSN (MySQL DSN of TiDB, e.g. root@tcp(127.0.0.1:4000)/) to run it; see README, real cluster")
	}
	testMirrorEqualsAsOf(t, strings.Split(pdEnv, ","), dsn)
}

// TestFakeCluster_MirrorEqualsAsOfTimestamp runs the real-cluster test's
// body, unchanged, against the embedded cluster seen only from outside:
// its PD and TiKV gRPC servers and its MySQL-protocol front
// (fakeupstream/mysqlfront), so the opt-in test is known to work as
// written and ConnectUpstream (ModeReal) runs in every `go test`.
//
// Rule SR7: the same body in every go test.
func TestFakeCluster_MirrorEqualsAsOfTimestamp(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 11, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
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
	testMirrorEqualsAsOf(t, []string{srv.PDAddr()}, my.DSN(""))
}

func testMirrorEqualsAsOf(t *testing.T, pdAddrs []string, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one session: BEGIN ... COMMIT stay together
	schema := fmt.Sprintf("sfemu_e2e_%d", time.Now().UnixNano())
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE DATABASE " + schema)
	defer func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE "+schema) }()
	exec("CREATE TABLE " + schema + ".items (id BIGINT PRIMARY KEY, title VARCHAR(64) NOT NULL, price INT, amount DECIMAL(10,2), doc JSON, at DATETIME(3))")

	up, err := ConnectUpstream(ctx, pdAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if up.Mode() != ModeReal || up.Cluster != nil || up.SQL != nil {
		t.Fatalf("real upstream: mode %v cluster %v sql %v", up.Mode(), up.Cluster, up.SQL)
	}
	start, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	tables := []TableRef{{DB: schema, Table: "items"}}
	a, err := Start(ctx, up, emu, Config{DataDir: dir, Tables: tables, StartTs: start, ClientID: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	tbl := schema + ".items"
	for i := 1; i <= 200; i++ {
		exec(fmt.Sprintf("INSERT INTO %s VALUES (%d, 'item %d', %d, %d.%02d, '{\"k\": %d}', '2024-01-02 03:04:05.%03d')", tbl, i, i, i*3, i, i%100, i, i%1000))
	}
	exec("UPDATE " + tbl + " SET price = price + 1 WHERE id % 7 = 0")
	exec("DELETE FROM " + tbl + " WHERE id % 11 = 0")
	exec("BEGIN")
	exec("INSERT INTO " + tbl + " (id, title, price) VALUES (1001, 'in txn', 1)")
	exec("UPDATE " + tbl + " SET title = 'touched in txn' WHERE id = 5")
	exec("DELETE FROM " + tbl + " WHERE id = 6")
	exec("COMMIT")
	exec("ALTER TABLE " + tbl + " ADD COLUMN tag VARCHAR(16) DEFAULT 'none'")
	for i := 300; i < 350; i++ {
		exec(fmt.Sprintf("INSERT INTO %s (id, title, price, tag) VALUES (%d, 'late %d', %d, 't%d')", tbl, i, i, i, i%5))
	}
	exec("UPDATE " + tbl + " SET tag = 'updated' WHERE id < 20")
	exec("ALTER TABLE " + tbl + " DROP COLUMN at")
	exec("UPDATE " + tbl + " SET amount = amount * 2 WHERE id BETWEEN 100 AND 120")

	// AS OF TIMESTAMP reads at TIDB_PARSE_TSO's millisecond: leave a few
	// ms after the last commit so that ms holds every write.
	time.Sleep(5 * time.Millisecond)
	final, err := up.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.WaitSafe(ctx, emu, tables, final, 2*time.Minute); err != nil {
		t.Fatalf("%v (runtime: %v)", err, a.RT.Err())
	}

	// TiDB's own answer at the final ts.
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT id, title, price, tag FROM %s AS OF TIMESTAMP TIDB_PARSE_TSO(%d) ORDER BY id", tbl, final))
	if err != nil {
		t.Fatal(err)
	}
	type sqlRow struct {
		title string
		price sql.NullInt64
		tag   sql.NullString
	}
	want := map[string]sqlRow{}
	for rows.Next() {
		var id int64
		var r sqlRow
		if err := rows.Scan(&id, &r.title, &r.price, &r.tag); err != nil {
			t.Fatal(err)
		}
		want[strconv.FormatInt(id, 10)] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	docs, err := verify.Documents(ctx, emu, tables[0].CollectionName())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*apiv1.Document{}
	for _, d := range docs {
		got[d.PrimaryKey] = d
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, d := want[k], got[k]
		if d == nil {
			t.Errorf("pk %s: in TiDB at %d, missing from the collection", k, final)
			continue
		}
		if v := d.Fields["title"].GetStringValue(); v != w.title {
			t.Errorf("pk %s: title %q, TiDB says %q", k, v, w.title)
		}
		if w.price.Valid && d.Fields["price"].GetInt64Value() != w.price.Int64 {
			t.Errorf("pk %s: price %v, TiDB says %d", k, d.Fields["price"], w.price.Int64)
		}
		// tag: a document untouched since ADD COLUMN has no field (E28);
		// TiDB answers the default.
		if f, ok := d.Fields["tag"]; ok && w.tag.Valid && f.GetStringValue() != w.tag.String {
			t.Errorf("pk %s: tag %v, TiDB says %q", k, f, w.tag.String)
		} else if !ok && w.tag.String != "none" {
			t.Errorf("pk %s: no tag field, TiDB says %q", k, w.tag.String)
		}
		if _, ok := d.Fields["at"]; ok {
			t.Errorf("pk %s: dropped column at still a field", k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("pk %s: in the collection, not in TiDB at %d", k, final)
		}
	}
	if len(want) < 200 {
		t.Fatalf("TiDB returned only %d rows", len(want))
	}

	// Every field, through client-go snapshot reads and the schema at ts.
	expectConsistent(t, ctx, up, emu, tables, final)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
