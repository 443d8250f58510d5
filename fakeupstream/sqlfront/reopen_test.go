package sqlfront

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/kvlog"
	"github.com/stretchr/testify/require"
)

func openDurable(t *testing.T, dir string) (*fakeupstream.Cluster, *Server) {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Dir: dir})
	require.NoError(t, err)
	s, err := Open(context.Background(), c)
	require.NoError(t, err)
	return c, s
}

// catalogDump renders the catalog (ids, names, columns, versions, auto ids).
func catalogDump(s *Server) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lines []string
	for id, d := range s.cat.dbs {
		lines = append(lines, fmt.Sprintf("db %d %s", id, d.Name.O))
	}
	for id, e := range s.cat.tables {
		var cols []string
		for _, c := range e.info.Columns {
			cols = append(cols, fmt.Sprintf("%d:%s:%d", c.ID, c.Name.O, c.FieldType.GetType()))
		}
		lines = append(lines, fmt.Sprintf("table %d db %d %s cols %s parts %v", id, e.dbID, e.info.Name.O, strings.Join(cols, ","), e.info.PhysicalIDs()))
	}
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("version %d next %d", s.cat.schemaVersion, s.cat.nextID))
	return strings.Join(lines, "\n")
}

func tableRows(t *testing.T, c *fakeupstream.Cluster, db, table string, ts uint64) string {
	t.Helper()
	snap, err := ReadTable(context.Background(), c, db, table, ts)
	require.NoError(t, err)
	var out []string
	for _, r := range snap.Rows {
		var vs []string
		for _, v := range r.Values {
			vs = append(vs, v.String())
		}
		out = append(out, fmt.Sprintf("%x %s", r.Key, strings.Join(vs, "|")))
	}
	return strings.Join(out, "\n")
}

const reopenSchema = `CREATE DATABASE shop;
CREATE TABLE shop.items (id BIGINT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(20), qty INT);
CREATE TABLE shop.notes (body VARCHAR(20));
CREATE TABLE shop.parts (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 2`

// S17, S18: a reopened durable cluster gives a SQL front with the same
// catalog and data; it does not bootstrap again, new DDL ids and versions
// continue, and auto ids / _tidb_rowids are never handed out twice.
func TestReopenRebuildsCatalogAndNeverReusesIDs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, s := openDurable(t, dir)
	ss := s.NewSession("shop")
	mustExec(t, ss, reopenSchema)
	mustExec(t, ss, "INSERT INTO items (name, qty) VALUES ('a', 1), ('b', 2)")
	mustExec(t, ss, "INSERT INTO notes VALUES ('n1'), ('n2')")
	mustExec(t, ss, "INSERT INTO parts VALUES (1, 10), (2, 20)")
	mustExec(t, ss, "ALTER TABLE items ADD COLUMN tag VARCHAR(8) DEFAULT 'x'")
	mustExec(t, ss, "DELETE FROM notes WHERE body = 'n2'")
	res := mustExec(t, ss, "UPDATE items SET qty = 5 WHERE id = 2")
	ts := res.CommitTs
	wantCat := catalogDump(s)
	var want []string
	for _, tb := range []string{"items", "notes", "parts"} {
		want = append(want, tableRows(t, c, "shop", tb, ts))
	}
	require.NoError(t, c.Close())

	c2, s2 := openDurable(t, dir)
	defer c2.Close()
	require.Equal(t, wantCat, catalogDump(s2))
	for i, tb := range []string{"items", "notes", "parts"} {
		require.Equal(t, want[i], tableRows(t, c2, "shop", tb, ts), tb)
	}
	// Writes continue: larger ts, fresh ids.
	ss2 := s2.NewSession("shop")
	res2 := mustExec(t, ss2, "INSERT INTO items (name, qty) VALUES ('c', 3)")
	require.Greater(t, res2.CommitTs, ts)
	mustExec(t, ss2, "INSERT INTO notes VALUES ('n3')")
	snap, err := ReadTable(ctx, c2, "shop", "items", res2.CommitTs)
	require.NoError(t, err)
	ids := map[int64]bool{}
	for _, r := range snap.Rows {
		ids[r.Values[0].GetInt64()] = true
	}
	require.Len(t, ids, 3)
	for id := range ids {
		require.Positive(t, id)
	}
	require.True(t, ids[1] && ids[2], "old rows keep their ids")
	notes, err := ReadTable(ctx, c2, "shop", "notes", ^uint64(0)>>1)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, r := range notes.Rows {
		require.False(t, seen[string(r.Key)], "row id reused")
		seen[string(r.Key)] = true
	}
	// The deleted n2's row id is not reused either: n3's key is above it.
	require.Len(t, notes.Rows, 2)
	require.Greater(t, string(notes.Rows[1].Key), string(notes.Rows[0].Key))
	v1 := s2.SchemaVersion()
	res3 := mustExec(t, ss2, "CREATE TABLE t2 (a INT)")
	require.True(t, res3.DDL)
	require.Equal(t, v1+1, s2.SchemaVersion())
	_, id2, err := s2.TableInfo("shop", "t2")
	require.NoError(t, err)
	require.NotZero(t, id2)
}

// S18 after a crash: auto ids handed out before the crash (committed or
// not) are never handed out again.
func TestReopenAfterCrashNeverReusesRowIDs(t *testing.T) {
	dir := t.TempDir()
	c, s := openDurable(t, dir)
	defer c.Close()
	ss := s.NewSession("")
	mustExec(t, ss, "CREATE DATABASE d; CREATE TABLE d.t (v INT)")
	mustExec(t, ss, "INSERT INTO d.t VALUES (1), (2), (3)")
	// Crash: copy the log as it is on disk.
	b, err := os.ReadFile(filepath.Join(dir, kvlog.FileName))
	require.NoError(t, err)
	crashed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(crashed, kvlog.FileName), b, 0o644))
	c2, s2 := openDurable(t, crashed)
	defer c2.Close()
	before := tableRows(t, c2, "d", "t", ^uint64(0)>>1)
	mustExec(t, s2.NewSession(""), "INSERT INTO d.t VALUES (4)")
	snap, err := ReadTable(context.Background(), c2, "d", "t", ^uint64(0)>>1)
	require.NoError(t, err)
	require.Len(t, snap.Rows, 4, before)
	last := snap.Rows[3]
	require.Equal(t, int64(4), last.Values[0].GetInt64())
	for _, r := range snap.Rows[:3] {
		require.Less(t, string(r.Key), string(last.Key))
	}
}

// TestDUR13StatementsAcknowledgeOnlyDurable (DUR-13): the front commits
// with deferred durability under its lock and waits after releasing it;
// every auto-committed statement and every COMMIT still returns only once
// its records are on disk.
func TestDUR13StatementsAcknowledgeOnlyDurable(t *testing.T) {
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Dir: t.TempDir(), Maintain: fakeupstream.MaintainConfig{Off: true}})
	require.NoError(t, err)
	defer c.Close()
	s, err := Open(ctx, c)
	require.NoError(t, err)
	ss := s.NewSession("")
	mustExec(t, ss, "CREATE DATABASE d; USE d; CREATE TABLE t (id BIGINT PRIMARY KEY, v INT, KEY kv (v))")
	for i, q := range []string{
		"INSERT INTO t VALUES (1, 1), (2, 2)",
		"UPDATE t SET v = 5 WHERE id = 1",
		"DELETE FROM t WHERE id = 2",
		"BEGIN", "INSERT INTO t VALUES (3, 3)", "UPDATE t SET v = 4 WHERE id = 3", "COMMIT",
		"UPDATE t SET v = 6 WHERE id = 1",
	} {
		mustExec(t, ss, q)
		if q == "INSERT INTO t VALUES (3, 3)" || q == "UPDATE t SET v = 4 WHERE id = 3" {
			continue // buffered in the open transaction: nothing applied yet
		}
		require.False(t, c.LogPending(), "statement %d %q returned before its commit was on disk", i, q)
	}
}
