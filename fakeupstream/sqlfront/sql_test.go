package sqlfront

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
	"github.com/stretchr/testify/require"
)

// rowsAt renders db.table at ts as "col=value,..." lines in key order.
func rowsAt(t *testing.T, s *Server, db, table string, ts uint64) []string {
	t.Helper()
	snap, err := ReadTable(context.Background(), s.cluster, db, table, ts)
	require.NoError(t, err)
	var out []string
	for _, r := range snap.Rows {
		var parts []string
		for _, c := range snap.Table.Columns {
			parts = append(parts, c.Name.O+"="+r.Values[c.Offset].String())
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

func now(t *testing.T, s *Server) uint64 {
	ts, err := s.cluster.CurrentTs(context.Background())
	require.NoError(t, err)
	return ts
}

// S2, S4, S13, S14: DML through the front reads back through snapshots.
func TestInsertUpdateDeleteReplace(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE shop; USE shop")
	mustExec(t, ss, "CREATE TABLE p (id BIGINT PRIMARY KEY, name VARCHAR(32) NOT NULL, price DECIMAL(10,2), stock INT DEFAULT 5)")
	r1 := mustExec(t, ss, "INSERT INTO p (id, name, price) VALUES (1, 'apple', 1.50), (2, 'pear', 2.25)")
	require.Equal(t, 2, r1.RowsAffected)
	require.NotZero(t, r1.CommitTs)
	mustExec(t, ss, "UPDATE p SET price = 1.75, stock = stock - 1 WHERE id = 1")
	mustExec(t, ss, "DELETE FROM p WHERE name = 'pear'")
	mustExec(t, ss, "REPLACE INTO p VALUES (3, 'fig', NULL, 9)")
	require.Equal(t, []string{
		"id=1,name=apple,price=1.75,stock=4",
		"id=3,name=fig,price=NULL,stock=9",
	}, rowsAt(t, s, "shop", "p", now(t, s)))
	require.Equal(t, []string{
		"id=1,name=apple,price=1.50,stock=5",
		"id=2,name=pear,price=2.25,stock=5",
	}, rowsAt(t, s, "shop", "p", r1.CommitTs), "a snapshot at the first commit sees only it")

	_, err := ss.Exec(context.Background(), "INSERT INTO p VALUES (1, 'dup', 1, 1)")
	require.ErrorIs(t, err, ErrDuplicateKey)
	require.ErrorContains(t, err, "duplicate entry for key 'PRIMARY' of table \"p\"")
}

// S2, S5: explicit transactions; DDL inside one is refused.
func TestExplicitTransactions(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	mustExec(t, ss, "BEGIN")
	require.True(t, ss.InTxn())
	mustExec(t, ss, "INSERT INTO t VALUES (1, 10)")
	mustExec(t, ss, "UPDATE t SET v = 11 WHERE id = 1")
	mustExec(t, ss, "ROLLBACK")
	require.Empty(t, rowsAt(t, s, "d", "t", now(t, s)))

	mustExec(t, ss, "BEGIN")
	mustExec(t, ss, "INSERT INTO t VALUES (1, 10), (2, 20)")
	mustExec(t, ss, "UPDATE t SET v = 21 WHERE id = 2")
	mustExec(t, ss, "DELETE FROM t WHERE id = 1")
	require.Empty(t, rowsAt(t, s, "d", "t", now(t, s)), "nothing visible before COMMIT")
	res := mustExec(t, ss, "COMMIT")
	require.NotZero(t, res.CommitTs)
	require.Equal(t, []string{"id=2,v=21"}, rowsAt(t, s, "d", "t", res.CommitTs))

	mustExec(t, ss, "BEGIN")
	_, err := ss.Exec(context.Background(), "CREATE TABLE u (id INT PRIMARY KEY)")
	require.ErrorContains(t, err, "inside an explicit transaction")
	mustExec(t, ss, "ROLLBACK")
}

// S3, S4: failing or unsupported statements write nothing.
func TestFailingStatementWritesNothing(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, v TINYINT NOT NULL)")
	_, err := ss.Exec(context.Background(), "INSERT INTO t VALUES (1, 1), (2, 1000)")
	require.ErrorContains(t, err, "out of range")
	_, err = ss.Exec(context.Background(), "INSERT INTO t VALUES (3, NULL)")
	require.ErrorContains(t, err, "NOT NULL")
	require.Empty(t, rowsAt(t, s, "d", "t", now(t, s)))

	// Inside a transaction the failed statement leaves earlier ones intact.
	mustExec(t, ss, "BEGIN; INSERT INTO t VALUES (1, 1)")
	_, err = ss.Exec(context.Background(), "INSERT INTO t VALUES (2, 2), (1, 3)")
	require.ErrorIs(t, err, ErrDuplicateKey)
	mustExec(t, ss, "COMMIT")
	require.Equal(t, []string{"id=1,v=1"}, rowsAt(t, s, "d", "t", now(t, s)))

	ver := s.SchemaVersion()
	for _, q := range []string{
		"CREATE TABLE v (id INT PRIMARY KEY, g INT AS (id + 1))",
		"SELECT * FROM t",
		"ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b INT",
		// IN lists are supported since S21; an expression on the column
		// still is not.
		"UPDATE t SET v = 1 WHERE id + 1 = 2",
	} {
		_, err := ss.Exec(context.Background(), q)
		var ue *UnsupportedError
		require.True(t, errors.As(err, &ue), "%s: %v", q, err)
	}
	require.Equal(t, ver, s.SchemaVersion(), "rejected DDL changes no schema")
}

// S13, S15: _tidb_rowid and clustered handles; handle changes move the key.
func TestHandleKinds(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE r (a VARCHAR(10), b INT)")
	mustExec(t, ss, "INSERT INTO r VALUES ('x', 1), ('x', 1)")
	require.Len(t, rowsAt(t, s, "d", "r", now(t, s)), 2, "_tidb_rowid tables keep duplicates")
	mustExec(t, ss, "UPDATE r SET b = 2 WHERE a = 'x'")
	require.Equal(t, []string{"a=x,b=2", "a=x,b=2"}, rowsAt(t, s, "d", "r", now(t, s)))

	mustExec(t, ss, "CREATE TABLE c (k VARCHAR(16) NOT NULL, n INT NOT NULL, v VARCHAR(8), PRIMARY KEY (k, n) CLUSTERED)")
	ti, _, err := s.TableInfo("d", "c")
	require.NoError(t, err)
	require.True(t, ti.IsCommonHandle)
	mustExec(t, ss, "INSERT INTO c VALUES ('a', 1, 'one'), ('b', 2, 'two')")
	mustExec(t, ss, "UPDATE c SET n = 3 WHERE k = 'a'") // key change: delete + insert
	require.Equal(t, []string{"k=a,n=3,v=one", "k=b,n=2,v=two"}, rowsAt(t, s, "d", "c", now(t, s)))
}

// S16, S9: partition routing and partition DDLs.
func TestPartitions(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d")
	mustExec(t, ss, "CREATE TABLE rp (id BIGINT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (1000))")
	mustExec(t, ss, "INSERT INTO rp VALUES (1, 1), (150, 2)")
	_, err := ss.Exec(context.Background(), "INSERT INTO rp VALUES (5000, 3)")
	require.ErrorContains(t, err, "no partition")
	ti, _, _ := s.TableInfo("d", "rp")
	snap, err := ReadTable(context.Background(), s.cluster, "d", "rp", now(t, s))
	require.NoError(t, err)
	require.Equal(t, ti.Partition.Definitions[0].ID, snap.Rows[0].PhysicalID)
	require.Equal(t, ti.Partition.Definitions[1].ID, snap.Rows[1].PhysicalID)

	mustExec(t, ss, "ALTER TABLE rp ADD PARTITION (PARTITION p2 VALUES LESS THAN (10000))")
	mustExec(t, ss, "INSERT INTO rp VALUES (5000, 3)")
	mustExec(t, ss, "ALTER TABLE rp TRUNCATE PARTITION p0")
	ti2, _, _ := s.TableInfo("d", "rp")
	require.NotEqual(t, ti.Partition.Definitions[0].ID, ti2.Partition.Definitions[0].ID, "truncate gives a new physical id")
	mustExec(t, ss, "ALTER TABLE rp DROP PARTITION p1")
	require.Equal(t, []string{"id=5000,v=3"}, rowsAt(t, s, "d", "rp", now(t, s)))

	mustExec(t, ss, "CREATE TABLE hp (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 4")
	mustExec(t, ss, "INSERT INTO hp VALUES (1, 1), (2, 2), (-7, 3)")
	hp, _, _ := s.TableInfo("d", "hp")
	snap, err = ReadTable(context.Background(), s.cluster, "d", "hp", now(t, s))
	require.NoError(t, err)
	byID := map[int64]int64{}
	for _, r := range snap.Rows {
		byID[r.Values[0].GetInt64()] = r.PhysicalID
	}
	require.Equal(t, hp.Partition.Definitions[1].ID, byID[1])
	require.Equal(t, hp.Partition.Definitions[2].ID, byID[2])
	require.Equal(t, hp.Partition.Definitions[3].ID, byID[-7], "HASH uses |id mod n|")
}

// S9, S11, S12: ALTER, TRUNCATE, RENAME, DROP.
func TestAlterTruncateRenameDrop(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(8))")
	mustExec(t, ss, "INSERT INTO t VALUES (1, 'x')")
	mustExec(t, ss, "ALTER TABLE t ADD COLUMN n INT NOT NULL DEFAULT 7")
	mustExec(t, ss, "INSERT INTO t (id, a, n) VALUES (2, 'y', 8)")
	require.Equal(t, []string{"id=1,a=x,n=7", "id=2,a=y,n=8"}, rowsAt(t, s, "d", "t", now(t, s)),
		"rows written before ADD COLUMN read the origin default")
	mustExec(t, ss, "ALTER TABLE t ADD INDEX idx_a (a)")
	mustExec(t, ss, "ALTER TABLE t DROP INDEX idx_a")
	mustExec(t, ss, "ALTER TABLE t MODIFY COLUMN a VARCHAR(32)")
	mustExec(t, ss, "ALTER TABLE t DROP COLUMN n")
	require.Equal(t, []string{"id=1,a=x", "id=2,a=y"}, rowsAt(t, s, "d", "t", now(t, s)))

	before, _, _ := s.TableInfo("d", "t")
	res := mustExec(t, ss, "TRUNCATE TABLE t")
	after, _, _ := s.TableInfo("d", "t")
	require.NotEqual(t, before.ID, after.ID)
	require.Empty(t, rowsAt(t, s, "d", "t", res.CommitTs))

	mustExec(t, ss, "RENAME TABLE t TO t2")
	mustExec(t, ss, "INSERT INTO t2 VALUES (5, 'z')")
	require.Equal(t, []string{"id=5,a=z"}, rowsAt(t, s, "d", "t2", now(t, s)))
	mustExec(t, ss, "ALTER TABLE t2 RENAME TO t3")
	mustExec(t, ss, "DROP TABLE t3")
	_, err := ReadTable(context.Background(), s.cluster, "d", "t3", now(t, s))
	require.ErrorContains(t, err, "does not exist")
	mustExec(t, ss, "DROP DATABASE d")
	_, err = ss.Exec(context.Background(), "USE d")
	require.Error(t, err)
}

// TestJobRowLifecycle (S6, S7): the done put of tidb_ddl_job commits at FinishedTs
// with the schema change; afterwards the row is gone from tidb_ddl_job and
// the job is in tidb_ddl_history.
func TestJobRowLifecycle(t *testing.T) {
	s, ss := newTestServer(t)
	res := mustExec(t, ss, "CREATE DATABASE d")
	ctx := context.Background()
	start := tablecodec.EncodeRecordPrefix(nil, DDLJobTableID)
	kvs, err := s.cluster.Scan(ctx, start, tablecodec.PrefixNext(start), res.CommitTs, 0)
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	r, err := decodeRow(newMounter(), ddlJobTableInfo(), DDLJobTableID, kvs[0].Key, kvs[0].Value)
	require.NoError(t, err)
	job, err := model.ParseJob(r.datums[4].GetBytes())
	require.NoError(t, err)
	require.True(t, job.IsDone())
	require.Equal(t, s.SchemaVersion(), job.SchemaVersion())
	require.Zero(t, job.BinlogInfo.FinishedTS, "the done put does not carry FinishedTS; readers take the commit ts")
	db, err := findDB(ctx, s.cluster, "d", res.CommitTs)
	require.NoError(t, err, "the schema change commits with the done put")
	require.Equal(t, job.SchemaID, db.ID)
	_, err = findDB(ctx, s.cluster, "d", res.CommitTs-1)
	require.Error(t, err)

	kvs, err = s.cluster.Scan(ctx, start, tablecodec.PrefixNext(start), now(t, s), 0)
	require.NoError(t, err)
	require.Empty(t, kvs, "finished jobs leave tidb_ddl_job")
}
