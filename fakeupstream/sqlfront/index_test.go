package sqlfront

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// TestS20IndexKVsMatchServer replays the real server's t_all history (create
// with a unique key, add/drop column, ADD INDEX, rename), inserts the row
// the capture read back, and requires both captured index entries (unique
// on a VARCHAR utf8mb4_bin: version-0 value with restore data and the
// handle; non-unique on INT: "0") byte for byte, the table id aside.
func TestS20IndexKVsMatchServer(t *testing.T) {
	s, ss := newTestServer(t)
	ctx := context.Background()
	mustExec(t, ss, "CREATE DATABASE gold; USE gold")
	for _, rec := range goldenJobs(t) {
		q := rec["query"].(string)
		for _, p := range []string{"CREATE TABLE t_all", "ALTER TABLE t_all", "RENAME TABLE t_all"} {
			if strings.HasPrefix(q, p) {
				mustExec(t, ss, q)
			}
		}
	}
	ti, _, err := s.TableInfo("gold", "t_renamed")
	require.NoError(t, err)
	var row map[string]any
	for _, rec := range goldenRecords(t, "tidb-server-capture.jsonl", "server_row") {
		if rec["name"] == "t_renamed/1" {
			row = rec["sql_values_text"].(map[string]any)
		}
	}
	require.NotNil(t, row)
	var cols, lits []string
	for _, c := range ti.Columns {
		if v, ok := row[c.Name.O]; ok {
			cols = append(cols, c.Name.O)
			lits = append(lits, sqlLiteral(c.Name.O, v))
		}
	}
	mustExec(t, ss, fmt.Sprintf("INSERT INTO t_renamed (%s) VALUES (%s)", strings.Join(cols, ","), strings.Join(lits, ",")))
	ts := now(t, s)
	idxRecs := goldenRecords(t, "tidb-server-capture.jsonl", "server_index_kv")
	require.Len(t, idxRecs, 2)
	for _, rec := range idxRecs {
		want, err := hex.DecodeString(rec["key_hex"].(string))
		require.NoError(t, err)
		// Same bytes under our table id: 't' + 8-byte id + the rest.
		key := append(tablecodec.EncodeTablePrefix(nil, ti.ID), want[9:]...)
		got, err := s.cluster.Get(ctx, key, ts)
		require.NoError(t, err)
		require.NotNil(t, got, "index entry %s not written under the server's key", rec["name"])
		require.Equal(t, rec["value_hex"], hex.EncodeToString(got), "index entry %s", rec["name"])
	}
	// Nothing else was written in the index spans.
	start := tablecodec.EncodeIndexPrefix(nil, ti.ID, 0)
	kvs, err := s.cluster.Scan(ctx, start, tablecodec.PrefixNext(tablecodec.EncodeTablePrefix(nil, ti.ID)), ts, 0)
	require.NoError(t, err)
	n := 0
	for _, kv := range kvs {
		if tablecodec.IsIndexKey(kv.Key) {
			n++
		}
	}
	require.Equal(t, 2, n)
}

// indexState reads every index KV of table db.t at ts, keyed by hex key.
func indexState(t *testing.T, s *Server, db, table string, ts uint64) map[string]string {
	t.Helper()
	ti, _, err := s.TableInfo(db, table)
	require.NoError(t, err)
	out := map[string]string{}
	for _, phys := range ti.PhysicalIDs() {
		start := tablecodec.EncodeIndexPrefix(nil, phys, 0)
		end := tablecodec.EncodeRecordPrefix(nil, phys)
		kvs, err := s.cluster.Scan(context.Background(), start, end, ts, 0)
		require.NoError(t, err)
		for _, kv := range kvs {
			out[hex.EncodeToString(kv.Key)] = hex.EncodeToString(kv.Value)
		}
	}
	return out
}

// expectedIndexState computes the index KVs the table's rows at ts should
// have, from the rows alone.
func expectedIndexState(t *testing.T, s *Server, db, table string, ts uint64) map[string]string {
	t.Helper()
	snap, err := ReadTable(context.Background(), s.cluster, db, table, ts)
	require.NoError(t, err)
	out := map[string]string{}
	for _, sr := range snap.Rows {
		_, h, err := tablecodec.DecodeRecordKey(sr.Key)
		require.NoError(t, err)
		r := &row{physID: sr.PhysicalID, key: sr.Key, handle: h, datums: sr.Values}
		kvs, err := s.rowIndexKVs(snap.Table, r)
		require.NoError(t, err)
		for _, kv := range kvs {
			k := hex.EncodeToString(kv.key)
			if _, dup := out[k]; dup {
				t.Fatalf("two rows own index key %s", k)
			}
			out[k] = hex.EncodeToString(kv.value)
		}
	}
	return out
}

// TestS20UniqueIndexes: unique indexes are enforced on INSERT, UPDATE and
// ADD UNIQUE INDEX (ErrDuplicateKey naming value and key; nothing
// written), NULLs never collide, REPLACE removes every conflicting row,
// ADD INDEX backfills the existing rows.
func TestS20UniqueIndexes(t *testing.T) {
	s, ss := newTestServer(t)
	ctx := context.Background()
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(32), n INT, UNIQUE KEY uk_email (email), KEY k_n (n))")
	mustExec(t, ss, "INSERT INTO u VALUES (1, 'a@x', 10), (2, 'b@x', 10), (3, NULL, 20), (4, NULL, 20)")
	_, err := ss.Exec(ctx, "INSERT INTO u VALUES (5, 'a@x', 1)")
	require.ErrorIs(t, err, ErrDuplicateKey)
	require.ErrorContains(t, err, "Duplicate entry 'a@x' for key 'u.uk_email'")
	_, err = ss.Exec(ctx, "UPDATE u SET email = 'b@x' WHERE id = 1")
	require.ErrorIs(t, err, ErrDuplicateKey)
	require.Equal(t, expectedIndexState(t, s, "d", "u", now(t, s)), indexState(t, s, "d", "u", now(t, s)))
	require.Len(t, indexState(t, s, "d", "u", now(t, s)), 8)

	// Moving a value to a free one, and swapping through a free value.
	mustExec(t, ss, "UPDATE u SET email = 'c@x' WHERE id = 1")
	mustExec(t, ss, "UPDATE u SET email = 'a@x' WHERE id = 2")
	res := mustExec(t, ss, "REPLACE INTO u VALUES (3, 'a@x', 30)")
	require.Equal(t, 3, res.RowsAffected, "REPLACE deletes row 3 (same id) and row 2 (same email)")
	require.Equal(t, []string{"id=1,email=c@x,n=10", "id=3,email=a@x,n=30", "id=4,email=NULL,n=20"}, rowsAt(t, s, "d", "u", now(t, s)))
	require.Equal(t, expectedIndexState(t, s, "d", "u", now(t, s)), indexState(t, s, "d", "u", now(t, s)))

	// ADD UNIQUE INDEX over duplicates fails before any job is written.
	ver := s.SchemaVersion()
	mustExec(t, ss, "INSERT INTO u VALUES (7, 'z@x', 30)")
	_, err = ss.Exec(ctx, "ALTER TABLE u ADD UNIQUE INDEX uk_n (n)")
	require.ErrorIs(t, err, ErrDuplicateKey)
	require.Equal(t, ver, s.SchemaVersion())
	mustExec(t, ss, "ALTER TABLE u ADD INDEX k_both (n, email)")
	require.Equal(t, expectedIndexState(t, s, "d", "u", now(t, s)), indexState(t, s, "d", "u", now(t, s)), "ADD INDEX backfilled")

	// A failing statement in a transaction leaves its index writes out.
	mustExec(t, ss, "BEGIN; INSERT INTO u VALUES (8, 'y@x', 1)")
	_, err = ss.Exec(ctx, "INSERT INTO u VALUES (9, 'w@x', 2), (10, 'y@x', 3)")
	require.ErrorIs(t, err, ErrDuplicateKey)
	mustExec(t, ss, "COMMIT")
	require.Equal(t, expectedIndexState(t, s, "d", "u", now(t, s)), indexState(t, s, "d", "u", now(t, s)))
	require.Len(t, rowsAt(t, s, "d", "u", now(t, s)), 5)
}

var seedFlag = flag.Int64("seed", 0, "seed for the randomized DML test (0: time-based)")

// TestS20S21IndexesUnderRandomDML drives a seeded mix of INSERT, REPLACE,
// UPDATE (values, keys, partitions) and DELETE with every WHERE shape over
// tables of each handle kind, with unique, composite and non-unique
// indexes: after every statement the stored index KVs are exactly those the
// rows imply, and each UPDATE/DELETE touches exactly the rows a full scan
// with the same WHERE finds (whatever access path answered it).
func TestS20S21IndexesUnderRandomDML(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	s, ss := newTestServer(t)
	ctx := context.Background()
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	tables := []string{
		"CREATE TABLE ih (id BIGINT PRIMARY KEY, a INT, b VARCHAR(8), c INT, UNIQUE KEY ua (a), KEY kbc (b, c))",
		"CREATE TABLE ch (k VARCHAR(8) NOT NULL, n INT NOT NULL, a INT, b VARCHAR(8), PRIMARY KEY (k, n) CLUSTERED, UNIQUE KEY ua (a), KEY kb (b))",
		"CREATE TABLE rh (id INT, a INT, b VARCHAR(8), c INT, UNIQUE KEY ua (a), KEY kb (b))",
		"CREATE TABLE ph (id BIGINT PRIMARY KEY, a INT, b VARCHAR(8), c INT, KEY kb (b)) PARTITION BY HASH (id) PARTITIONS 3",
		"CREATE TABLE nc (id INT NOT NULL, a INT, b VARCHAR(8), c INT, PRIMARY KEY (id) NONCLUSTERED, KEY kab (a, b))",
	}
	for _, q := range tables {
		mustExec(t, ss, q)
	}
	strs := []string{"'x'", "'y'", "'y '", "'zz'", "NULL"}
	val := func() string {
		if rng.Intn(6) == 0 {
			return "NULL"
		}
		return fmt.Sprint(rng.Intn(12))
	}
	where := func(tbl string) string {
		key := "id"
		switch tbl {
		case "ch":
			key = "n"
		case "rh":
			if rng.Intn(2) == 0 {
				key = "_tidb_rowid"
			}
		}
		switch rng.Intn(9) {
		case 0:
			return fmt.Sprintf("%s = %d", key, rng.Intn(12))
		case 1:
			return fmt.Sprintf("%s IN (%d, %d, %d)", key, rng.Intn(12), rng.Intn(12), rng.Intn(12))
		case 2:
			lo := rng.Intn(12)
			return fmt.Sprintf("%s BETWEEN %d AND %d", key, lo, lo+rng.Intn(4))
		case 3:
			return fmt.Sprintf("%s > %d AND %s <= %d", key, rng.Intn(12), key, rng.Intn(12))
		case 4:
			return fmt.Sprintf("a = %d", rng.Intn(12))
		case 5:
			return fmt.Sprintf("b = %s", strs[rng.Intn(4)])
		case 6:
			if tbl == "ch" {
				return fmt.Sprintf("k = %s", strs[rng.Intn(4)])
			}
			return fmt.Sprintf("b = %s AND c = %d", strs[rng.Intn(4)], rng.Intn(12))
		case 7:
			return fmt.Sprintf("a = %d AND b IS NULL", rng.Intn(12))
		}
		if tbl == "ch" {
			return "a >= 5"
		}
		return "c >= 5"
	}
	names := []string{"ih", "ch", "rh", "ph", "nc"}
	for step := 0; step < 600; step++ {
		tbl := names[rng.Intn(len(names))]
		var q string
		switch op := rng.Intn(10); {
		case op < 4:
			verb := "INSERT"
			if rng.Intn(3) == 0 {
				verb = "REPLACE"
			}
			if tbl == "ch" {
				q = fmt.Sprintf("%s INTO ch VALUES (%s, %d, %s, %s)", verb, strs[rng.Intn(4)], rng.Intn(12), val(), strs[rng.Intn(5)])
			} else {
				q = fmt.Sprintf("%s INTO %s VALUES (%d, %s, %s, %s)", verb, tbl, rng.Intn(12), val(), strs[rng.Intn(5)], val())
			}
		case op < 8:
			set := fmt.Sprintf("a = %s", val())
			switch rng.Intn(4) {
			case 0:
				set = fmt.Sprintf("b = %s", strs[rng.Intn(5)])
			case 1:
				if tbl == "ch" {
					set = fmt.Sprintf("n = %d", rng.Intn(12))
				} else if tbl != "rh" {
					set = fmt.Sprintf("id = %d", rng.Intn(12))
				}
			}
			q = fmt.Sprintf("UPDATE %s SET %s WHERE %s", tbl, set, where(tbl))
		default:
			q = fmt.Sprintf("DELETE FROM %s WHERE %s", tbl, where(tbl))
		}
		before := now(t, s)
		wantN := -1
		if strings.HasPrefix(q, "UPDATE") || strings.HasPrefix(q, "DELETE") {
			wantN = fullScanMatches(t, s, tbl, q[strings.Index(q, "WHERE ")+6:], before)
		}
		res, err := ss.Exec(ctx, q)
		if err != nil {
			require.True(t, errors.Is(err, ErrDuplicateKey), "seed %d step %d %s: %v", seed, step, q, err)
			continue
		}
		if wantN >= 0 {
			require.Equal(t, wantN, res.RowsAffected, "seed %d step %d %s: rows touched vs a full scan", seed, step, q)
		}
		ts := now(t, s)
		require.Equal(t, expectedIndexState(t, s, "d", tbl, ts), indexState(t, s, "d", tbl, ts), "seed %d step %d %s", seed, step, q)
	}
}

// fullScanMatches counts the rows of d.tbl at ts a WHERE matches, by
// evaluating it on every row (the reference for the access paths).
func fullScanMatches(t *testing.T, s *Server, tbl, where string, ts uint64) int {
	t.Helper()
	stmts, _, err := s.NewSession("d").parser.Parse("DELETE FROM t WHERE "+where, "", "")
	require.NoError(t, err)
	snap, err := ReadTable(context.Background(), s.cluster, "d", tbl, ts)
	require.NoError(t, err)
	f, err := compileWhere(snap.Table, whereOf(stmts[0]))
	require.NoError(t, err)
	n := 0
	for _, sr := range snap.Rows {
		_, h, err := tablecodec.DecodeRecordKey(sr.Key)
		require.NoError(t, err)
		ok, err := f.match(&row{physID: sr.PhysicalID, key: sr.Key, handle: h, datums: sr.Values})
		require.NoError(t, err)
		if ok {
			n++
		}
	}
	return n
}

func whereOf(st ast.StmtNode) ast.ExprNode { return st.(*ast.DeleteStmt).Where }

// TestS21AccessPathChoice pins which path answers which WHERE.
func TestS21AccessPathChoice(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE ih (id BIGINT PRIMARY KEY, a INT, b VARCHAR(8), c INT, UNIQUE KEY ua (a), KEY kbc (b, c))")
	mustExec(t, ss, "CREATE TABLE ch (k VARCHAR(8) NOT NULL, n INT NOT NULL, a INT, PRIMARY KEY (k, n) CLUSTERED)")
	mustExec(t, ss, "CREATE TABLE rh (x INT, y INT)")
	mustExec(t, ss, "CREATE TABLE ph (id BIGINT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 4")
	plan := func(table, where string) string {
		ti, _, err := s.TableInfo("d", table)
		require.NoError(t, err)
		stmts, _, err := ss.parser.Parse("DELETE FROM t WHERE "+where, "", "")
		require.NoError(t, err)
		f, err := compileWhere(ti, whereOf(stmts[0]))
		require.NoError(t, err)
		p, err := s.planAccess(ti, f)
		require.NoError(t, err)
		switch {
		case p.points != nil:
			n := 0
			for _, pt := range p.points {
				n += len(pt.phys)
			}
			return fmt.Sprintf("points:%d", n)
		case p.index != nil:
			if len(p.ranges) > 0 && p.ranges[0].point {
				return fmt.Sprintf("index:%s:%d:point", p.index.Name.O, len(p.ranges))
			}
			return fmt.Sprintf("index:%s:%d", p.index.Name.O, len(p.ranges))
		case p.full:
			return "full"
		}
		return fmt.Sprintf("ranges:%d", len(p.ranges))
	}
	for _, tc := range []struct{ table, where, want string }{
		{"ih", "id = 5", "points:1"},
		{"ih", "id IN (1, 2, 2, 3)", "points:3"},
		{"ih", "id BETWEEN 1 AND 9", "ranges:1"},
		{"ih", "id > 3 AND c = 1", "ranges:1"},
		{"ih", "id = NULL", "points:0"},
		{"ih", "id > 9 AND id < 3", "points:0"},
		{"ih", "a = 4", "index:ua:1:point"},
		{"ih", "a = 4 AND b = 'x'", "index:ua:1:point"},
		{"ih", "b = 'x'", "index:kbc:1"},
		{"ih", "b = 'x' AND c = 2", "index:kbc:1"},
		{"ih", "c = 2", "full"},
		{"ih", "a > 4", "full"},
		{"ch", "k = 'a' AND n = 1", "points:1"},
		{"ch", "k = 'a'", "ranges:1"},
		{"ch", "n = 1", "full"},
		{"rh", "_tidb_rowid = 3", "points:1"},
		{"rh", "_tidb_rowid BETWEEN 3 AND 5", "ranges:1"},
		{"rh", "x = 3", "full"},
		{"ph", "id = 7", "points:1"},
		{"ph", "id BETWEEN 1 AND 4", "ranges:4"},
	} {
		require.Equal(t, tc.want, plan(tc.table, tc.where), "%s WHERE %s", tc.table, tc.where)
	}
}

// TestS20IndexKeysStayOffTheRecordFeed: the CDC feed of a table's record
// span (what the adapter subscribes, as TiCDC) never carries index keys,
// although they share the table's region.
func TestS20IndexKeysStayOffTheRecordFeed(t *testing.T) {
	s, ss := newTestServer(t)
	c := s.Cluster()
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(8), UNIQUE KEY ua (a), KEY kb (b))")
	ti, _, err := s.TableInfo("d", "t")
	require.NoError(t, err)
	start := now(t, s)
	src := c.NewSource(fakeupstream.SourceConfig{})
	rec := &keyRecorder{}
	require.NoError(t, src.Subscribe(context.Background(), 1, tablecodec.TableRecordSpan(0, false, ti.ID), start, rec))
	mustExec(t, ss, "INSERT INTO t VALUES (1, 1, 'x'), (2, 2, 'y')")
	mustExec(t, ss, "UPDATE t SET a = 3, b = 'z' WHERE id = 1")
	mustExec(t, ss, "DELETE FROM t WHERE b = 'y'")
	end := now(t, s)
	for i := 0; i < 1000 && rec.resolved < end; i++ {
		require.NoError(t, c.Advance(time.Second))
		require.NoError(t, src.Pump())
	}
	require.GreaterOrEqual(t, rec.resolved, end)
	require.NotEmpty(t, rec.keys)
	for _, k := range rec.keys {
		require.True(t, tablecodec.IsRecordKey(k), "feed delivered a non-record key %x", k)
	}
	// The index entries exist in the store all the same.
	require.NotEmpty(t, indexState(t, s, "d", "t", end))
}

type keyRecorder struct {
	keys     [][]byte
	resolved uint64
}

func (r *keyRecorder) ConsumeKV(entries []kvevent.RawKVEntry) {
	for _, e := range entries {
		r.keys = append(r.keys, append([]byte(nil), e.Key...))
	}
}

func (r *keyRecorder) AdvanceResolvedTs(ts uint64) { r.resolved = ts }

// TestS22InsertSelect: INSERT/REPLACE ... SELECT copies rows (columns,
// `*`, expressions, WHERE through the access paths, LIMIT), between tables
// and within one table, maintains the target's indexes, reports the first
// generated AUTO_INCREMENT id, and inside a transaction a failing copy
// leaves the earlier statements alone.
func TestS22InsertSelect(t *testing.T) {
	s, ss := newTestServer(t)
	ctx := context.Background()
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE src (id INT PRIMARY KEY, name VARCHAR(16), n INT, KEY kn (n))")
	mustExec(t, ss, "CREATE TABLE dst (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(16), n INT, UNIQUE KEY un (name))")
	for i := 1; i <= 50; i++ {
		mustExec(t, ss, fmt.Sprintf("INSERT INTO src VALUES (%d, 'n%d', %d)", i, i, i%5))
	}
	res := mustExec(t, ss, "INSERT INTO dst (name, n) SELECT name, n * 10 FROM src WHERE n = 2")
	require.Equal(t, 10, res.RowsAffected)
	require.Equal(t, int64(1), res.LastInsertID)
	res = mustExec(t, ss, "INSERT INTO dst (name, n) SELECT name, 7 FROM src WHERE id BETWEEN 40 AND 50 AND n <> 2 LIMIT 3")
	require.Equal(t, 3, res.RowsAffected)
	require.Equal(t, int64(11), res.LastInsertID)
	require.Len(t, rowsAt(t, s, "d", "dst", now(t, s)), 13)
	_, err := ss.Exec(ctx, "INSERT INTO dst (name, n) SELECT name, n FROM src WHERE id = 2")
	require.ErrorIs(t, err, ErrDuplicateKey, "n2 is there already (unique name)")
	// Same table: the statement never reads its own rows.
	res = mustExec(t, ss, "INSERT INTO src SELECT id + 100, name, n FROM src")
	require.Equal(t, 50, res.RowsAffected)
	require.Len(t, rowsAt(t, s, "d", "src", now(t, s)), 100)
	mustExec(t, ss, "REPLACE INTO src SELECT * FROM src WHERE id > 100")
	require.Equal(t, expectedIndexState(t, s, "d", "src", now(t, s)), indexState(t, s, "d", "src", now(t, s)))
	require.Equal(t, expectedIndexState(t, s, "d", "dst", now(t, s)), indexState(t, s, "d", "dst", now(t, s)))
	// Constants only.
	res = mustExec(t, ss, "INSERT INTO dst (name, n) SELECT 'k', 1")
	require.Equal(t, 1, res.RowsAffected)

	mustExec(t, ss, "BEGIN")
	mustExec(t, ss, "INSERT INTO dst (name, n) VALUES ('first', 0)")
	_, err = ss.Exec(ctx, "INSERT INTO dst (name, n) SELECT CONCAT(name), n FROM src")
	var ue *UnsupportedError
	require.True(t, errors.As(err, &ue), "%v", err)
	_, err = ss.Exec(ctx, "INSERT INTO dst (name, n) SELECT name, n FROM src WHERE n = 4")
	require.ErrorIs(t, err, ErrDuplicateKey, "rows 4 and 104 both carry the name n4")
	mustExec(t, ss, "COMMIT")
	got := rowsAt(t, s, "d", "dst", now(t, s))
	require.Len(t, got, 15, "13 + 'k' + 'first'")
}

// TestS21LargeStatements: UPDATE and DELETE over more rows than are held
// decoded (heldRows) re-read the rest by key: every matching row changes
// once, key moves included, and the indexes follow.
func TestS21LargeStatements(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE big (id INT PRIMARY KEY, u INT, v INT, UNIQUE KEY uu (u), KEY kv (v))")
	const n = 3 * heldRows
	var sb strings.Builder
	for lo := 1; lo <= n; lo += 500 {
		sb.Reset()
		sb.WriteString("INSERT INTO big VALUES ")
		for id := lo; id < lo+500 && id <= n; id++ {
			if id > lo {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,%d,%d)", id, id, id%7)
		}
		mustExec(t, ss, sb.String())
	}
	res := mustExec(t, ss, fmt.Sprintf("UPDATE big SET v = v + 100, u = u + %d WHERE id BETWEEN 2 AND %d", 10*n, n-1))
	require.Equal(t, n-2, res.RowsAffected)
	res = mustExec(t, ss, fmt.Sprintf("UPDATE big SET id = id + %d WHERE v >= 100", 10*n))
	require.Equal(t, n-2, res.RowsAffected, "every row moves once")
	ts := now(t, s)
	require.Equal(t, expectedIndexState(t, s, "d", "big", ts), indexState(t, s, "d", "big", ts))
	rows := rowsAt(t, s, "d", "big", ts)
	require.Equal(t, n, len(rows))
	require.Equal(t, fmt.Sprintf("id=%d,u=%d,v=%d", 10*n+2, 10*n+2, 102), rows[2], "after id 1 and id %d", n)
	res = mustExec(t, ss, "DELETE FROM big WHERE v >= 100")
	require.Equal(t, n-2, res.RowsAffected)
	ts = now(t, s)
	require.Len(t, rowsAt(t, s, "d", "big", ts), 2)
	require.Equal(t, expectedIndexState(t, s, "d", "big", ts), indexState(t, s, "d", "big", ts))
}
