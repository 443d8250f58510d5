package mysqlfront

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/internal/testlog"
)

// TestMain quiets the PD client's and client-go's logs (testlog).
func TestMain(m *testing.M) {
	testlog.Quiet()
	os.Exit(m.Run())
}

// logSink collects the server's log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

type front struct {
	sql  *sqlfront.Server
	srv  *Server
	db   *sql.DB
	logs *logSink
}

// startFront builds a virtual-clock cluster, its SQL front and this MySQL
// front, and opens a go-sql-driver pool on it.
func startFront(t testing.TB) *front {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	require.NoError(t, err)
	s, err := sqlfront.New(context.Background(), c)
	require.NoError(t, err)
	logs := &logSink{}
	srv, err := StartConfig(s, Config{Addr: "127.0.0.1:0", Logf: logs.logf})
	require.NoError(t, err)
	db, err := sql.Open("mysql", srv.DSN(""))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = db.Close()
		require.NoError(t, srv.Close())
	})
	return &front{sql: s, srv: srv, db: db, logs: logs}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustExec(t testing.TB, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) sql.Result {
	t.Helper()
	res, err := db.ExecContext(context.Background(), q, args...)
	require.NoError(t, err, q)
	return res
}

// queryStrings runs q and returns every row as strings ("NULL" for NULL).
func queryStrings(t testing.TB, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out [][]string
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		row := make([]string, len(cols))
		for i, r := range raw {
			if r == nil {
				row[i] = "NULL"
			} else {
				row[i] = string(r)
			}
		}
		out = append(out, row)
	}
	require.NoError(t, rows.Err(), q)
	return out
}

func requireMySQLError(t testing.TB, err error, code uint16) *mysql.MySQLError {
	t.Helper()
	require.Error(t, err)
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "want *mysql.MySQLError, got %T: %v", err, err)
	require.Equal(t, code, me.Number, "error %v", me)
	return me
}

// queryRaw runs q and returns the column names and every row's raw cells
// (nil for NULL); the rows are closed before it returns, so a failing
// assertion afterwards cannot leave the connection busy.
func queryRaw(t testing.TB, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) ([]string, [][][]byte) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out [][][]byte
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		row := make([][]byte, len(cols))
		for i, r := range raw {
			if r != nil {
				row[i] = append([]byte{}, r...)
			}
		}
		out = append(out, row)
	}
	require.NoError(t, rows.Err(), q)
	return cols, out
}

// rawClient speaks the protocol directly, so tests see the exact bytes the
// server sends (go-sql-driver re-formats numbers of the text protocol).
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	pio *packetIO
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	c := &rawClient{t: t, nc: nc, pio: &packetIO{r: bufio.NewReader(nc), w: bufio.NewWriter(nc), maxMessage: 1 << 30}}
	hs, err := c.pio.readMessage()
	require.NoError(t, err)
	require.Equal(t, byte(10), hs[0], "protocol version")
	resp := appendUint32(nil, capProtocol41|capSecureConn|capPluginAuth)
	resp = appendUint32(resp, 1<<24)
	resp = append(resp, collationUTF8MB4Bin)
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "root\x00"...)
	resp = append(resp, 0) // empty auth response
	resp = append(resp, nativePassword+"\x00"...)
	require.NoError(t, c.pio.writeMessage(resp))
	require.NoError(t, c.pio.flush())
	ok, err := c.pio.readMessage()
	require.NoError(t, err)
	require.Equal(t, byte(0), ok[0], "handshake answered %x", ok)
	return c
}

// query sends COM_QUERY and returns the rows of a result set (nil cells
// are NULL); an ERR packet fails the test.
func (c *rawClient) query(q string) [][][]byte {
	c.t.Helper()
	c.pio.seq = 0
	require.NoError(c.t, c.pio.writeMessage(append([]byte{comQuery}, q...)))
	require.NoError(c.t, c.pio.flush())
	first, err := c.pio.readMessage()
	require.NoError(c.t, err)
	require.NotEqual(c.t, byte(0xff), first[0], "%s: %s", q, first)
	if first[0] == 0 {
		return nil
	}
	r := &reader{b: first, what: "column count"}
	n := int(r.lenEncInt())
	for i := 0; i < n; i++ {
		_, err := c.pio.readMessage()
		require.NoError(c.t, err)
	}
	eof, err := c.pio.readMessage()
	require.NoError(c.t, err)
	require.Equal(c.t, byte(0xfe), eof[0])
	var rows [][][]byte
	for {
		m, err := c.pio.readMessage()
		require.NoError(c.t, err)
		if m[0] == 0xfe && len(m) < 9 {
			return rows
		}
		rr := &reader{b: m, what: "row"}
		row := make([][]byte, n)
		for i := range row {
			if rr.left() > 0 && rr.b[rr.pos] == 0xfb {
				rr.pos++
				continue
			}
			row[i] = append([]byte{}, rr.lenEncString()...)
		}
		require.NoError(c.t, rr.err)
		rows = append(rows, row)
	}
}
