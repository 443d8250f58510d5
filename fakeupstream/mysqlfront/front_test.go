package mysqlfront

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// MY-P1, MY-V1, MY-V2, MY-R1: what go-sql-driver and the mysql CLI send at connect is
// answered, and simple SELECTs without a table work.
func TestConnectAndSessionQueries(t *testing.T) {
	f := startFront(t)
	require.NoError(t, f.db.Ping())
	var version string
	require.NoError(t, f.db.QueryRow("SELECT VERSION()").Scan(&version))
	require.Equal(t, ServerVersion, version)
	require.Contains(t, version, "TiDB")
	var one int
	require.NoError(t, f.db.QueryRow("SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	var maxPacket int64
	require.NoError(t, f.db.QueryRow("SELECT @@max_allowed_packet").Scan(&maxPacket))
	require.Equal(t, int64(64<<20), maxPacket)
	require.Equal(t, [][]string{{VersionComment}}, queryStrings(t, f.db, "select @@version_comment limit 1"))
	mustExec(t, f.db, "SET NAMES utf8mb4")
	mustExec(t, f.db, "SET autocommit=1")
	mustExec(t, f.db, "SET @@session.sql_mode = 'STRICT_TRANS_TABLES'")
	require.Equal(t, [][]string{{"NULL"}}, queryStrings(t, f.db, "SELECT DATABASE()"))
	require.Equal(t, [][]string{{"3", "a-b", "1", "NULL", "2.5000"}}, queryStrings(t, f.db, "SELECT 1+2, CONCAT('a','-','b'), 7 % 3 = 1, NULL, 5/2"))
	var cur, tso uint64
	require.NoError(t, f.db.QueryRow("SELECT @@tidb_current_ts").Scan(&cur))
	require.NoError(t, f.db.QueryRow("SELECT TIDB_CURRENT_TSO()").Scan(&tso))
	require.Greater(t, tso, cur)

	conn, err := f.db.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	mustExec(t, conn, "SET @@sql_mode = 'ANSI'")
	require.Equal(t, [][]string{{"ANSI", "1"}}, queryStrings(t, conn, "SELECT @@sql_mode, @@autocommit"))
	_, err = conn.QueryContext(context.Background(), "SELECT @@no_such_variable")
	requireMySQLError(t, err, ErUnknownSystemVar)
}

// S2 via the wire, MY-Q1, MY-R1, MY-D1: DDL, DML with interpolated parameters,
// SELECT with WHERE/ORDER BY/LIMIT, and UPDATE/DELETE with expressions the
// SQL front leaves to this package (CONCAT, %).
func TestDDLDMLAndSelect(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE d1")
	mustExec(t, f.db, "CREATE TABLE d1.t (id BIGINT PRIMARY KEY, v VARCHAR(64), n INT, d DECIMAL(10,2))")
	for i := 1; i <= 20; i++ {
		res := mustExec(t, f.db, "INSERT INTO d1.t VALUES (?, ?, ?, ?)", i, fmt.Sprintf("v%d", i), i*10, fmt.Sprintf("%d.5", i))
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	res := mustExec(t, f.db, "UPDATE d1.t SET v = CONCAT(v, '-u') WHERE id % 3 = 0")
	n, _ := res.RowsAffected()
	require.Equal(t, int64(6), n)
	res = mustExec(t, f.db, "DELETE FROM d1.t WHERE id % 7 = 0")
	n, _ = res.RowsAffected()
	require.Equal(t, int64(2), n)
	res = mustExec(t, f.db, "UPDATE d1.t SET n = n + 1 WHERE id = 1")
	n, _ = res.RowsAffected()
	require.Equal(t, int64(1), n)

	got := queryStrings(t, f.db, "SELECT id, v, n, d FROM d1.t WHERE id IN (1, 3, 7, 9) OR v IS NULL ORDER BY id DESC")
	require.Equal(t, [][]string{{"9", "v9-u", "90", "9.50"}, {"3", "v3-u", "30", "3.50"}, {"1", "v1", "11", "1.50"}}, got)
	require.Equal(t, [][]string{{"18"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM d1.t"))
	require.Equal(t, [][]string{{"20", "1", "18"}}, queryStrings(t, f.db, "SELECT MAX(id), MIN(id), COUNT(v) FROM d1.t"))
	require.Equal(t, [][]string{{"2", "v2"}, {"4", "v4"}}, queryStrings(t, f.db, "SELECT id, v FROM d1.t WHERE n BETWEEN 15 AND 45 AND v NOT LIKE '%-u' ORDER BY id LIMIT 2"))
	require.Equal(t, [][]string{{"4"}, {"5"}}, queryStrings(t, f.db, "SELECT id FROM d1.t ORDER BY id LIMIT 2 OFFSET 3"))
	require.Equal(t, [][]string{{"4"}, {"5"}}, queryStrings(t, f.db, "SELECT id FROM d1.t ORDER BY id LIMIT 3, 2"))
	require.Equal(t, [][]string{{"20", "v20"}}, queryStrings(t, f.db, "SELECT x.id AS k, x.v FROM d1.t AS x ORDER BY k DESC LIMIT 1"))

	mustExec(t, f.db, "USE d1")
	require.Equal(t, [][]string{{"d1"}}, queryStrings(t, f.db, "SELECT DATABASE()"))
	rows := queryStrings(t, f.db, "SELECT * FROM t WHERE id = ?", 2)
	require.Equal(t, [][]string{{"2", "v2", "20", "2.50"}}, rows)
	// Wildcard column names and order come from the table.
	r, err := f.db.Query("SELECT * FROM t LIMIT 1")
	require.NoError(t, err)
	cols, err := r.Columns()
	require.NoError(t, err)
	r.Close()
	require.Equal(t, []string{"id", "v", "n", "d"}, cols)

	require.Contains(t, queryStrings(t, f.db, "SHOW DATABASES"), []string{"d1"})
	require.Equal(t, [][]string{{"t"}}, queryStrings(t, f.db, "SHOW TABLES"))
	mustExec(t, f.db, "ALTER TABLE t ADD COLUMN w INT DEFAULT 5")
	require.Equal(t, [][]string{{"1", "5"}}, queryStrings(t, f.db, "SELECT id, w FROM t ORDER BY id LIMIT 1"))
	mustExec(t, f.db, "DROP DATABASE d1")
	_, err = f.db.Query("SELECT * FROM d1.t")
	requireMySQLError(t, err, ErBadDB)
}

// MY-Q2: explicit transactions (go-sql-driver's BEGIN/COMMIT/ROLLBACK) and
// autocommit=0 on one connection.
func TestTransactions(t *testing.T) {
	f := startFront(t)
	ctx := testCtx(t)
	mustExec(t, f.db, "CREATE DATABASE tx")
	mustExec(t, f.db, "CREATE TABLE tx.t (id INT PRIMARY KEY, v INT)")
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	mustExec(t, tx, "INSERT INTO tx.t VALUES (1, 1), (2, 2)")
	require.NoError(t, tx.Rollback())
	require.Equal(t, [][]string{{"0"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM tx.t"))
	tx, err = f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	mustExec(t, tx, "INSERT INTO tx.t VALUES (1, 1), (2, 2)")
	mustExec(t, tx, "UPDATE tx.t SET v = 20 WHERE id = 2")
	require.NoError(t, tx.Commit())
	require.Equal(t, [][]string{{"1", "1"}, {"2", "20"}}, queryStrings(t, f.db, "SELECT id, v FROM tx.t ORDER BY id"))
	// MY-D1: an expression UPDATE is evaluated here only outside a transaction.
	tx, err = f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "UPDATE tx.t SET v = v % 7 WHERE id % 2 = 0")
	requireMySQLError(t, err, ErNotSupportedYet)
	require.NoError(t, tx.Rollback())
	mustExec(t, f.db, "UPDATE tx.t SET v = v % 7 WHERE id % 2 = 0")
	require.Equal(t, [][]string{{"1", "1"}, {"2", "6"}}, queryStrings(t, f.db, "SELECT id, v FROM tx.t ORDER BY id"))

	conn, err := f.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	mustExec(t, conn, "SET autocommit = 0")
	mustExec(t, conn, "INSERT INTO tx.t VALUES (3, 3)")
	require.Equal(t, [][]string{{"2"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM tx.t"), "not visible before COMMIT")
	mustExec(t, conn, "COMMIT")
	require.Equal(t, [][]string{{"3"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM tx.t"))
	mustExec(t, conn, "INSERT INTO tx.t VALUES (4, 4)")
	mustExec(t, conn, "SET autocommit = 1") // commits, as in MySQL
	require.Equal(t, [][]string{{"4"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM tx.t"))
}

// MY-R2: AS OF TIMESTAMP at two timestamps shows the two versions; TSO,
// integer and datetime forms; a future ts is refused; tidb_snapshot.
func TestSelectAsOf(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE h")
	mustExec(t, f.db, "CREATE TABLE h.t (id INT PRIMARY KEY, v VARCHAR(10))")
	mustExec(t, f.db, "INSERT INTO h.t VALUES (1, 'a'), (2, 'b')")
	var ts1 uint64
	require.NoError(t, f.db.QueryRow("SELECT TIDB_CURRENT_TSO()").Scan(&ts1))
	mustExec(t, f.db, "UPDATE h.t SET v = 'a2' WHERE id = 1")
	mustExec(t, f.db, "DELETE FROM h.t WHERE id = 2")
	mustExec(t, f.db, "INSERT INTO h.t VALUES (3, 'c')")
	var ts2 uint64
	require.NoError(t, f.db.QueryRow("SELECT @@tidb_current_ts").Scan(&ts2))

	q := "SELECT id, v FROM h.t AS OF TIMESTAMP TIDB_PARSE_TSO(%d) ORDER BY id"
	at1 := queryStrings(t, f.db, fmt.Sprintf(q, ts1))
	at2 := queryStrings(t, f.db, fmt.Sprintf(q, ts2))
	require.Equal(t, [][]string{{"1", "a"}, {"2", "b"}}, at1)
	require.Equal(t, [][]string{{"1", "a2"}, {"3", "c"}}, at2)
	require.Equal(t, at1, queryStrings(t, f.db, fmt.Sprintf("SELECT id, v FROM h.t AS OF TIMESTAMP %d ORDER BY id", ts1)))
	// Before the table existed.
	_, err := f.db.Query("SELECT * FROM h.t AS OF TIMESTAMP TIDB_PARSE_TSO(1)")
	requireMySQLError(t, err, ErBadDB)
	// Datetime form (UTC): a datetime is the TSO with logical 0 at that
	// millisecond. Every write above happened at the virtual clock's
	// start, so the start reads nothing and one second later reads at2.
	require.NoError(t, f.sql.Cluster().Advance(time.Second))
	var dt string
	require.NoError(t, f.db.QueryRow("SELECT TIDB_PARSE_TSO(TIDB_CURRENT_TSO())").Scan(&dt))
	require.Equal(t, "2024-01-01 00:00:01.000000", dt)
	require.Equal(t, at2, queryStrings(t, f.db, "SELECT id, v FROM h.t AS OF TIMESTAMP '"+dt+"' ORDER BY id"))
	_, err = f.db.Query("SELECT id FROM h.t AS OF TIMESTAMP '2024-01-01 00:00:00'")
	requireMySQLError(t, err, ErBadDB)
	_, err = f.db.Query(fmt.Sprintf("SELECT * FROM h.t AS OF TIMESTAMP TIDB_PARSE_TSO(%d)", ts2<<2))
	requireMySQLError(t, err, 8135)

	conn, err := f.db.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	mustExec(t, conn, fmt.Sprintf("SET @@tidb_snapshot = '%d'", ts1))
	require.Equal(t, at1, queryStrings(t, conn, "SELECT id, v FROM h.t ORDER BY id"))
	mustExec(t, conn, "SET @@tidb_snapshot = ''")
	require.Equal(t, at2, queryStrings(t, conn, "SELECT id, v FROM h.t ORDER BY id"))
}

// MY-R3: TIDB_TABLE_ID of information_schema.tables is the SQL front's table
// id; schemata lists databases.
func TestInformationSchemaTableID(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE Sch")
	mustExec(t, f.db, "CREATE TABLE Sch.t (id BIGINT PRIMARY KEY, v VARCHAR(64))")
	mustExec(t, f.db, "CREATE TABLE Sch.u (a INT)")
	var id int64
	require.NoError(t, f.db.QueryRow("SELECT TIDB_TABLE_ID FROM information_schema.tables WHERE table_schema = ? AND table_name = 't'", "Sch").Scan(&id))
	ti, _, err := f.sql.TableInfo("Sch", "t")
	require.NoError(t, err)
	require.Equal(t, ti.ID, id)
	// Names compare case-insensitively there, as in TiDB.
	require.NoError(t, f.db.QueryRow("SELECT tidb_table_id FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'sch' AND TABLE_NAME = 'U'").Scan(&id))
	ui, _, err := f.sql.TableInfo("Sch", "u")
	require.NoError(t, err)
	require.Equal(t, ui.ID, id)
	require.Equal(t, [][]string{{"Sch"}}, queryStrings(t, f.db, "SELECT SCHEMA_NAME FROM information_schema.schemata WHERE schema_name = 'Sch'"))
	require.Equal(t, [][]string{{"tidb_ddl_history"}, {"tidb_ddl_job"}}, queryStrings(t, f.db, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'mysql' ORDER BY table_name"))
}

// MY-E1, MY-E2, MY-P5, MY-Q4: errors come back as *mysql.MySQLError with MySQL's codes.
func TestErrors(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE e")
	mustExec(t, f.db, "CREATE TABLE e.t (id INT PRIMARY KEY)")
	mustExec(t, f.db, "INSERT INTO e.t VALUES (1)")
	cases := []struct {
		q    string
		code uint16
	}{
		{"SELEC 1", ErParse},
		{"SELECT * FROM e.nope", ErNoSuchTable},
		{"SELECT * FROM nope.t", ErBadDB},
		{"INSERT INTO e.t VALUES (1)", ErDupEntry},
		{"CREATE DATABASE e", ErDBCreateExists},
		{"CREATE TABLE e.t (id INT)", ErTableExists},
		{"SELECT nope FROM e.t", ErBadField},
		{"SELECT * FROM e.t a JOIN e.t b", ErNotSupportedYet},
		{"SELECT * FROM t", ErNoDB},
		{"SELECT NO_SUCH_FN(1)", 1305},
		{"CREATE VIEW e.v AS SELECT 1", ErNotSupportedYet},
	}
	for _, c := range cases {
		_, err := f.db.Exec(c.q)
		me := requireMySQLError(t, err, c.code)
		require.NotEmpty(t, me.Message, c.q)
	}
	// Error texts name databases and tables by name, never by internal id.
	_, err := f.db.Exec("SELECT * FROM e.nope")
	me := requireMySQLError(t, err, ErNoSuchTable)
	require.Contains(t, me.Message, `"nope"`)
	require.Contains(t, me.Message, `database "e"`)
	ti, dbID, err := f.sql.TableInfo("e", "t")
	require.NoError(t, err)
	require.NotContains(t, me.Message, strconv.FormatInt(dbID, 10)+" ", "the database id of %s", ti.Name.O)
	// Connection-level: unknown database, bad user, a password.
	for dsn, code := range map[string]uint16{
		"root@tcp(" + f.srv.Addr() + ")/nodb":      ErBadDB,
		"bob@tcp(" + f.srv.Addr() + ")/":           ErAccessDenied,
		"root:secret@tcp(" + f.srv.Addr() + ")/":   ErAccessDenied,
		"root@tcp(" + f.srv.Addr() + ")/e?x=1&y=2": 0,
	} {
		db, err := sql.Open("mysql", dsn)
		require.NoError(t, err)
		err = db.Ping()
		db.Close()
		if code == 0 {
			require.NoError(t, err, "DSN parameters are sent as SET x=1 and remembered")
			continue
		}
		requireMySQLError(t, err, code)
	}
	// Without interpolateParams the driver prepares: a clear ERR.
	db, err := sql.Open("mysql", "root@tcp("+f.srv.Addr()+")/e")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec("INSERT INTO t VALUES (?)", 5)
	me = requireMySQLError(t, err, ErUnsupportedPS)
	require.Contains(t, me.Message, "interpolateParams=true")
}

// MY-Q3: connections are independent sessions and run concurrently.
func TestConcurrentConnections(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE c")
	mustExec(t, f.db, "CREATE TABLE c.t (id INT PRIMARY KEY, w INT)")
	f.db.SetMaxOpenConns(8)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			conn, err := f.db.Conn(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			if _, err := conn.ExecContext(context.Background(), "USE c"); err != nil {
				errs <- err
				return
			}
			for i := 0; i < 25; i++ {
				if _, err := conn.ExecContext(context.Background(), "INSERT INTO t VALUES (?, ?)", w*1000+i, w); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, [][]string{{"200"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM c.t"))
	require.Equal(t, [][]string{{"25"}}, queryStrings(t, f.db, "SELECT COUNT(*) FROM c.t WHERE w = 3"))
}

// MY-D2: LAST_INSERT_ID of auto-committed inserts into AUTO_INCREMENT tables.
func TestLastInsertID(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE a")
	mustExec(t, f.db, "CREATE TABLE a.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
	res := mustExec(t, f.db, "INSERT INTO a.t (v) VALUES (1)")
	id1, err := res.LastInsertId()
	require.NoError(t, err)
	res = mustExec(t, f.db, "INSERT INTO a.t (v) VALUES (2), (3)")
	id2, err := res.LastInsertId()
	require.NoError(t, err)
	require.Equal(t, id1+1, id2, "first id of the multi-row insert")
	got := queryStrings(t, f.db, "SELECT id FROM a.t WHERE v = 1")
	require.Equal(t, [][]string{{strconv.FormatInt(id1, 10)}}, got)
}

// MY-D2: inside an explicit transaction LAST_INSERT_ID is exact too: the
// first id each INSERT generated, before the COMMIT.
func TestLastInsertIDInTransaction(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE a")
	mustExec(t, f.db, "CREATE TABLE a.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
	mustExec(t, f.db, "INSERT INTO a.t (v) VALUES (0), (0)") // ids 1, 2 taken
	tx, err := f.db.Begin()
	require.NoError(t, err)
	res, err := tx.Exec("INSERT INTO a.t (v) VALUES (1), (2)")
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	require.Equal(t, int64(3), id)
	var got int64
	require.NoError(t, tx.QueryRow("SELECT LAST_INSERT_ID()").Scan(&got))
	require.Equal(t, int64(3), got)
	res, err = tx.Exec("INSERT INTO a.t (id, v) VALUES (100, 3)")
	require.NoError(t, err)
	id, err = res.LastInsertId()
	require.NoError(t, err)
	require.Zero(t, id, "an explicit id generates none")
	require.NoError(t, tx.QueryRow("SELECT LAST_INSERT_ID()").Scan(&got))
	require.Equal(t, int64(3), got, "LAST_INSERT_ID keeps the last generated id")
	require.NoError(t, tx.Commit())
	require.Equal(t, [][]string{{"3"}}, queryStrings(t, f.db, "SELECT id FROM a.t WHERE v = 1"))
}

// MY-P1: a DSN with a database selects it; errors from the driver are typed.
func TestDSNWithDatabase(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE withdb")
	db, err := sql.Open("mysql", f.srv.DSN("withdb"))
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, [][]string{{"withdb"}}, queryStrings(t, db, "SELECT DATABASE()"))
	cfg, err := mysql.ParseDSN(f.srv.DSN("withdb"))
	require.NoError(t, err)
	require.True(t, cfg.InterpolateParams)
}

// command sends one command packet and returns the first answer packet.
func (c *rawClient) command(cmd byte, body string) []byte {
	c.t.Helper()
	c.pio.seq = 0
	require.NoError(c.t, c.pio.writeMessage(append([]byte{cmd}, body...)))
	require.NoError(c.t, c.pio.flush())
	m, err := c.pio.readMessage()
	require.NoError(c.t, err)
	return m
}

// MY-P1, MY-Q1, MY-Q2, MY-Q4: COM_PING, COM_INIT_DB, multi-statement queries with
// MORE_RESULTS_EXISTS, IN_TRANS status, COM_RESET_CONNECTION,
// COM_STMT_PREPARE refused, COM_QUIT closes.
func TestRawCommands(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE raw")
	c := dialRaw(t, f.srv.Addr())
	require.Equal(t, byte(0x00), c.command(comPing, "")[0])
	bad := c.command(comInitDB, "nope")
	require.Equal(t, byte(0xff), bad[0])
	require.Equal(t, uint16(ErBadDB), uint16(bad[1])|uint16(bad[2])<<8)
	require.Equal(t, "#42000", string(bad[3:9]))
	require.Equal(t, byte(0x00), c.command(comInitDB, "raw")[0])
	require.Equal(t, [][][]byte{{[]byte("raw")}}, c.query("SELECT DATABASE()"))

	// Two statements: an OK with MORE_RESULTS_EXISTS, then a result set.
	ok := c.command(comQuery, "CREATE TABLE t (id INT PRIMARY KEY); SELECT 7")
	require.Equal(t, byte(0x00), ok[0])
	r := &reader{b: ok[1:], what: "ok"}
	r.lenEncInt()
	r.lenEncInt()
	st := r.bytes(2)
	require.NoError(t, r.err)
	require.NotZero(t, uint16(st[0])|uint16(st[1])<<8&statusMoreResults, "MORE_RESULTS_EXISTS on the first result")
	var rest [][]byte
	for eofs := 0; eofs < 2; {
		m, err := c.pio.readMessage()
		require.NoError(t, err)
		rest = append(rest, m)
		if m[0] == 0xfe && len(m) < 9 {
			eofs++
		}
	}
	require.Len(t, rest, 5, "count, column, EOF, row, EOF")
	require.Equal(t, []byte("\x017"), rest[len(rest)-2], "the row of SELECT 7")

	status := func(ok []byte) uint16 {
		require.Equal(t, byte(0x00), ok[0], "%s", ok)
		r := &reader{b: ok[1:], what: "ok"}
		r.lenEncInt()
		r.lenEncInt()
		st := r.bytes(2)
		require.NoError(t, r.err)
		return uint16(st[0]) | uint16(st[1])<<8
	}
	require.Equal(t, statusAutocommit|statusInTrans, status(c.command(comQuery, "BEGIN")))
	require.Equal(t, statusAutocommit|statusInTrans, status(c.command(comQuery, "INSERT INTO t VALUES (1)")))
	require.Equal(t, statusAutocommit, status(c.command(comQuery, "COMMIT")))
	require.Equal(t, uint16(0), status(c.command(comQuery, "SET autocommit = 0")))

	require.Equal(t, byte(0x00), c.command(comQuery, "SET @@my_var = 3")[0])
	require.Equal(t, [][][]byte{{[]byte("3")}}, c.query("SELECT @@my_var"))
	require.Equal(t, statusAutocommit, status(c.command(comResetConnect, "")))
	unk := c.command(comQuery, "SELECT @@my_var")
	require.Equal(t, byte(0xff), unk[0], "reset forgets session variables")
	require.Equal(t, [][][]byte{{[]byte("raw")}}, c.query("SELECT DATABASE()"), "reset keeps the database")

	ps := c.command(comStmtPrepare, "SELECT 1")
	require.Equal(t, byte(0xff), ps[0])
	require.Contains(t, string(ps), "interpolateParams=true")

	c.pio.seq = 0
	require.NoError(t, c.pio.writeMessage([]byte{comQuit}))
	require.NoError(t, c.pio.flush())
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.pio.readMessage()
	require.ErrorIs(t, err, io.EOF, "COM_QUIT closes the connection")
}

// MY-P5: a client that answers for another auth plugin (mysql 8 clients
// default to caching_sha2_password) is switched to mysql_native_password.
func TestAuthSwitch(t *testing.T) {
	f := startFront(t)
	nc, err := net.Dial("tcp", f.srv.Addr())
	require.NoError(t, err)
	defer nc.Close()
	pio := &packetIO{r: bufio.NewReader(nc), w: bufio.NewWriter(nc), maxMessage: 1 << 24}
	hs, err := pio.readMessage()
	require.NoError(t, err)
	require.Contains(t, string(hs), ServerVersion)
	require.Contains(t, string(hs), nativePassword)
	resp := appendUint32(nil, capProtocol41|capSecureConn|capPluginAuth)
	resp = appendUint32(resp, 1<<24)
	resp = append(resp, collationUTF8MB4Bin)
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "root\x00"...)
	resp = append(resp, 0)
	resp = append(resp, "caching_sha2_password\x00"...)
	require.NoError(t, pio.writeMessage(resp))
	require.NoError(t, pio.flush())
	sw, err := pio.readMessage()
	require.NoError(t, err)
	require.Equal(t, byte(0xfe), sw[0], "auth switch request")
	require.Contains(t, string(sw), nativePassword)
	require.NoError(t, pio.writeMessage(nil)) // empty password
	require.NoError(t, pio.flush())
	ok, err := pio.readMessage()
	require.NoError(t, err)
	require.Equal(t, byte(0x00), ok[0])
}

// MY-R4: expression semantics of the evaluator, as the wire shows them.
func TestExpressions(t *testing.T) {
	f := startFront(t)
	mustExec(t, f.db, "CREATE DATABASE x")
	mustExec(t, f.db, "CREATE TABLE x.t (id INT PRIMARY KEY, s VARCHAR(10) COLLATE utf8mb4_general_ci, b VARCHAR(10))")
	mustExec(t, f.db, "INSERT INTO x.t VALUES (1, 'Abc', 'Abc'), (2, NULL, 'x_y')")
	c := dialRaw(t, f.srv.Addr())
	cases := []struct{ q, want string }{
		{"SELECT NULL AND 0, NULL OR 1, NULL AND 1, NOT NULL", "0|1|NULL|NULL"},
		{"SELECT 2 IN (1, NULL), 1 IN (1, NULL), 3 NOT IN (1, 2)", "NULL|1|1"},
		{"SELECT 9223372036854775807 + 1, -9223372036854775808 - 1", "9223372036854775808|-9223372036854775809"},
		{"SELECT 7 DIV 2, 7 % 0, 1 / 0, 7.5 % 2, -7 % 3", "3|NULL|NULL|1.5|-1"},
		{"SELECT 1.10 + 2.205, 0.1 + 0.2 = 0.3, 1e0 + 1", "3.305|1|2"},
		{"SELECT 'a' = 'A', 10 = '10abc', 2 BETWEEN 1 AND 3", "0|1|1"},
		{"SELECT IFNULL(NULL, 'd'), COALESCE(NULL, NULL, 3), IF(0, 'y', 'n'), ABS(-4)", "d|3|n|4"},
		{"SELECT id FROM x.t WHERE s = 'abc'", "1"},       // _ci column
		{"SELECT COUNT(*) FROM x.t WHERE b = 'abc'", "0"}, // _bin column
		{"SELECT id FROM x.t WHERE b LIKE 'x\\_%'", "2"},
		{"SELECT id, s IS NULL FROM x.t ORDER BY s", "2|1"}, // NULL sorts first; first row only
		{"SELECT LENGTH('é'), CHAR_LENGTH('é'), UPPER('ab'), CONCAT('a', 1, 2.50)", "2|1|AB|a12.50"},
		{"SELECT TIDB_PARSE_TSO(0), TIDB_PARSE_TSO(446710992076800000)", "NULL|2024-01-01 00:00:00.000000"},
	}
	for _, tc := range cases {
		rows := c.query(tc.q)
		require.NotEmpty(t, rows, tc.q)
		var cells []string
		for _, b := range rows[0] {
			if b == nil {
				cells = append(cells, "NULL")
			} else {
				cells = append(cells, string(b))
			}
		}
		require.Equal(t, tc.want, strings.Join(cells, "|"), tc.q)
	}
}

// MY-P2: a message longer than one packet is split into 0xffffff-byte packets
// and joined again on read.
func TestPacketSplitting(t *testing.T) {
	var buf bytes.Buffer
	w := &packetIO{w: bufio.NewWriter(&buf)}
	msg := bytes.Repeat([]byte{'a'}, maxPayload+10)
	require.NoError(t, w.writeMessage(msg))
	require.NoError(t, w.writeMessage([]byte("next")))
	require.NoError(t, w.flush())
	raw := buf.Bytes()
	require.Equal(t, []byte{0xff, 0xff, 0xff, 0}, raw[:4])
	require.Equal(t, []byte{10, 0, 0, 1}, raw[4+maxPayload:8+maxPayload])
	r := &packetIO{r: bufio.NewReader(bytes.NewReader(raw)), maxMessage: 64 << 20}
	got, err := r.readMessage()
	require.NoError(t, err)
	require.Equal(t, msg, got)
	got, err = r.readMessage()
	require.NoError(t, err)
	require.Equal(t, "next", string(got))
	require.Equal(t, uint8(3), r.seq)
}

// MY-P6: Close ends open connections and is idempotent; later dials fail.
func TestCloseEndsConnections(t *testing.T) {
	f := startFront(t)
	c := dialRaw(t, f.srv.Addr())
	require.NoError(t, f.srv.Close())
	require.NoError(t, f.srv.Close())
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.pio.readMessage()
	require.Error(t, err)
	_, err = net.DialTimeout("tcp", f.srv.Addr(), time.Second)
	require.Error(t, err)
}
