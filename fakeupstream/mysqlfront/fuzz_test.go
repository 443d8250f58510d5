package mysqlfront

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// packet frames payload with sequence id seq.
func packet(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

func validHandshakeResponse() []byte {
	resp := appendUint32(nil, capProtocol41|capSecureConn|capPluginAuth|capConnectWithDB)
	resp = appendUint32(resp, 1<<24)
	resp = append(resp, collationUTF8MB4Bin)
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "root\x00"...)
	resp = append(resp, 0)
	resp = append(resp, 0) // empty database
	return append(resp, nativePassword+"\x00"...)
}

// MY-P4: the handshake-response decoder never panics on any input and names
// the malformed field.
func FuzzHandshakeResponse(f *testing.F) {
	f.Add(validHandshakeResponse())
	f.Add([]byte{})
	f.Add(appendUint32(nil, capProtocol41|capPluginAuthLenenc|capConnectAttrs))
	f.Add(append(validHandshakeResponse()[:36], 0xfe, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHandshakeResponse(b)
		if err == nil && !h.sslRequest && len(b) < 32 {
			t.Fatalf("accepted a %d-byte handshake response", len(b))
		}
		if err != nil && err.Error() == "" {
			t.Fatal("empty error text")
		}
	})
}

// fuzzFront is one SQL front shared by a fuzz run's iterations.
var (
	fuzzOnce sync.Once
	fuzzSrv  *Server
	fuzzErr  error
)

func fuzzServer() (*Server, error) {
	fuzzOnce.Do(func() {
		c, err := fakeupstream.New(fakeupstream.Config{Seed: 7})
		if err != nil {
			fuzzErr = err
			return
		}
		s, err := sqlfront.New(context.Background(), c)
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzSrv, fuzzErr = StartConfig(s, Config{Logf: func(string, ...any) {}, MaxAllowedPacket: 1 << 16})
	})
	return fuzzSrv, fuzzErr
}

// runStream serves one connection over loopback TCP: the client
// authenticates, writes stream and half-closes; the server must close the
// connection without panicking and within the deadline.
func runStream(t *testing.T, stream []byte) {
	srv, err := fuzzServer()
	if err != nil {
		t.Fatal(err)
	}
	var panicked atomic.Value
	hook := func(r any) { panicked.Store(fmt.Sprint(r)) }
	panicHook.Store(&hook)
	defer panicHook.Store(nil)
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	msg := append(packet(1, validHandshakeResponse()), stream...)
	if _, err := nc.Write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	// Drain until the server closes.
	if _, err := io.Copy(io.Discard, nc); err != nil && !isClosedErr(err) {
		t.Fatalf("connection did not end on stream %x: %v", stream, err)
	}
	if p := panicked.Load(); p != nil {
		t.Fatalf("panic on stream %x: %v", stream, p)
	}
}

// MY-P4, MY-Q1: any byte stream after the handshake (commands, broken frames,
// arbitrary SQL) ends the connection cleanly: no panic, no hang.
func FuzzConnStream(f *testing.F) {
	q := func(seq byte, s string) []byte { return packet(seq, append([]byte{comQuery}, s...)) }
	f.Add(q(0, "SELECT 1"))
	f.Add(append(q(0, "CREATE DATABASE fz"), q(0, "CREATE TABLE fz.t (id INT PRIMARY KEY, v VARCHAR(8))")...))
	f.Add(q(0, "SELECT id, v FROM fz.t WHERE id IN (1, NULL) OR v LIKE 'a%' ORDER BY 2 DESC LIMIT 1"))
	f.Add(q(0, "UPDATE fz.t SET v = CONCAT(v, 'x') WHERE id % 2 = 1"))
	f.Add(q(0, "SELECT * FROM fz.t AS OF TIMESTAMP TIDB_PARSE_TSO(-1)"))
	f.Add(packet(0, []byte{comPing}))
	f.Add(packet(0, []byte{comStmtPrepare, 'x'}))
	f.Add(packet(0, []byte{comInitDB}))
	f.Add(packet(5, []byte{comPing}))                // out of order
	f.Add([]byte{0xff, 0xff, 0xff, 0x00, comQuery})  // 16 MiB header, short body
	f.Add([]byte{0x00, 0x00, 0x01, 0x00})            // over max_allowed_packet
	f.Add(packet(0, nil))                            // empty command
	f.Add(q(0, "SELECT 1; SELECT 2; SET @a = 1/0"))  // multi-statement
	f.Add(q(0, "SELECT COUNT(*), MAX(v) FROM fz.t")) // aggregates
	f.Add(q(0, "SELECT @@x, @y, -9223372036854775808 - 1, 1 DIV 0"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		runStream(t, stream)
	})
}

// MY-P2, MY-P3, MY-P4: malformed input is answered with an ERR packet where the
// protocol allows one, logged with what was wrong, and the connection is
// closed.
func TestMalformedPacketsCloseConnection(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	require.NoError(t, err)
	s, err := sqlfront.New(context.Background(), c)
	require.NoError(t, err)
	logs := &logSink{}
	srv, err := StartConfig(s, Config{Logf: logs.logf, MaxAllowedPacket: 1 << 10})
	require.NoError(t, err)
	defer srv.Close()

	// expectClosed reads until EOF and returns the ERR packets' texts.
	expectClosed := func(nc net.Conn) string {
		t.Helper()
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		pio := &packetIO{r: bufio.NewReader(nc), maxMessage: 1 << 24}
		var errs []string
		for {
			hdr := make([]byte, 4)
			if _, err := io.ReadFull(pio.r, hdr); err != nil {
				require.ErrorIs(t, err, io.EOF, "connection must be closed, not stalled")
				return strings.Join(errs, "; ")
			}
			n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
			body := make([]byte, n)
			_, err := io.ReadFull(pio.r, body)
			require.NoError(t, err)
			if len(body) > 0 && body[0] == 0xff {
				errs = append(errs, string(body[9:]))
			}
		}
	}
	handshake := func() net.Conn {
		nc, err := net.Dial("tcp", srv.Addr())
		require.NoError(t, err)
		pio := &packetIO{r: bufio.NewReader(nc), maxMessage: 1 << 24}
		_, err = pio.readMessage()
		require.NoError(t, err)
		return nc
	}

	// A handshake response too short to hold its fields.
	nc := handshake()
	_, err = nc.Write(packet(1, []byte{0x00, 0x02, 0x00}))
	require.NoError(t, err)
	require.Contains(t, expectClosed(nc), "Bad handshake")
	require.Eventually(t, func() bool { return strings.Contains(logs.text(), "malformed handshake response") }, 5*time.Second, 10*time.Millisecond, logs.text())

	login := func() net.Conn {
		nc := handshake()
		_, err := nc.Write(packet(1, validHandshakeResponse()))
		require.NoError(t, err)
		pio := &packetIO{r: bufio.NewReader(nc), maxMessage: 1 << 24, seq: 2}
		ok, err := pio.readMessage()
		require.NoError(t, err)
		require.Equal(t, byte(0), ok[0])
		return nc
	}
	// A command packet out of sequence.
	nc = login()
	_, err = nc.Write(packet(3, []byte{comPing}))
	require.NoError(t, err)
	require.Contains(t, expectClosed(nc), "out of order")
	// A message over max_allowed_packet.
	nc = login()
	_, err = nc.Write(packet(0, append([]byte{comQuery}, strings.Repeat("x", 2000)...)))
	require.NoError(t, err)
	require.Contains(t, expectClosed(nc), "max_allowed_packet")
	// A frame cut short by the client going away: the server just ends.
	nc = login()
	_, err = nc.Write([]byte{0x10, 0x00, 0x00, 0x00, comQuery, 'S'})
	require.NoError(t, err)
	require.NoError(t, nc.(*net.TCPConn).CloseWrite())
	require.Equal(t, "", expectClosed(nc))
	require.Eventually(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) == 0
	}, 5*time.Second, 10*time.Millisecond, "every broken connection was closed")
	t.Log(fmt.Sprintf("server log:\n%s", logs.text()))
}

// The fuzz harness really gets past the handshake and runs commands (so
// the fuzz targets above exercise the query path, not only the login).
func TestStreamHarnessRunsQueries(t *testing.T) {
	runStream(t, packet(0, append([]byte{comQuery}, "CREATE DATABASE harness_check"...)))
	srv, err := fuzzServer()
	require.NoError(t, err)
	_, err = srv.sql.DBInfo("harness_check")
	require.NoError(t, err)
}
