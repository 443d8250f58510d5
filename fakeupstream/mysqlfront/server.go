package mysqlfront

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/tidb/pkg/parser"

	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// Config tunes a Server. Zero fields take defaults.
type Config struct {
	// Addr to listen on (default 127.0.0.1:0, a port chosen at start).
	Addr string
	// Logf receives one line per connection problem (malformed packet,
	// failed handshake, write error). Default: the standard logger.
	Logf func(format string, args ...any)
	// MaxAllowedPacket bounds one client message (default 64 MiB, TiDB's
	// max_allowed_packet).
	MaxAllowedPacket int
	// User and Password, when Password is set, are the one account the
	// front accepts (mysql_native_password, MY-P7; User defaults to root).
	// Without a password only root with an empty password logs in (MY-P5).
	User, Password string
}

// Server is a MySQL-protocol front over one sqlfront.Server: every
// connection is one sqlfront session.
type Server struct {
	sql *sqlfront.Server
	cfg Config
	lis net.Listener

	// execMu serialises statements that reach the SQL front from this
	// server, so a statement expanded into several (see expand.go) is not
	// interleaved with another connection's write.
	execMu sync.Mutex

	mu     sync.Mutex
	conns  map[*conn]struct{}
	nextID uint32
	closed bool

	wg sync.WaitGroup
}

// Start listens on addr (host:port; port 0 picks one) and serves MySQL
// clients on it until Close. (MY-P1)
func Start(srv *sqlfront.Server, addr string) (*Server, error) {
	return StartConfig(srv, Config{Addr: addr})
}

// StartConfig is Start with a Config.
func StartConfig(srv *sqlfront.Server, cfg Config) (*Server, error) {
	if srv == nil {
		return nil, errors.New("mysqlfront: nil sqlfront server")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	if cfg.MaxAllowedPacket <= 0 {
		cfg.MaxAllowedPacket = 64 << 20
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("mysqlfront: listen on %s: %w", cfg.Addr, err)
	}
	s := &Server{sql: srv, cfg: cfg, lis: lis, conns: map[*conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// DSN is a go-sql-driver/mysql DSN for this server (user root, no
// password, client-side parameter interpolation: the server does not
// implement prepared statements).
func (s *Server) DSN(db string) string {
	if s.cfg.Password != "" {
		return fmt.Sprintf("%s:%s@tcp(%s)/%s?interpolateParams=true", s.cfg.user(), s.cfg.Password, s.Addr(), db)
	}
	return fmt.Sprintf("root@tcp(%s)/%s?interpolateParams=true", s.Addr(), db)
}

// Close stops accepting, closes every connection (an open transaction is
// rolled back) and returns when all connection goroutines have ended. (MY-P6)
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.lis.Close()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.lis.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if !closed {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				s.cfg.Logf("mysqlfront: accept on %s: %v", s.Addr(), err)
			}
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.nextID++
		c := s.newConn(nc, s.nextID)
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// conn is one client connection.
type conn struct {
	srv  *Server
	nc   net.Conn
	pio  *packetIO
	id   uint32
	host string
	ctx  context.Context
	stop context.CancelFunc

	caps   uint32
	sess   *sqlfront.Session
	db     string
	parser *parser.Parser

	autocommit bool
	// implicitTxn: the open transaction was started because autocommit
	// is off (not by BEGIN).
	implicitTxn  bool
	vars         map[string]string // session system variables set by SET
	userVars     map[string]val
	lastInsertID uint64
}

func (s *Server) newConn(nc net.Conn, id uint32) *conn {
	ctx, stop := context.WithCancel(context.Background())
	host := "127.0.0.1"
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		host = a.IP.String()
	}
	return &conn{
		srv: s, nc: nc, id: id, host: host, ctx: ctx, stop: stop,
		pio:        &packetIO{r: bufio.NewReaderSize(nc, 16<<10), w: bufio.NewWriterSize(nc, 16<<10), maxMessage: s.cfg.MaxAllowedPacket},
		parser:     parser.New(),
		autocommit: true,
		vars:       map[string]string{},
		userVars:   map[string]val{},
	}
}

// panicHook, when set (by fuzz tests), sees a recovered panic so the test
// fails instead of the connection just closing.
var panicHook atomic.Pointer[func(any)]

// serve runs the handshake and then the command loop. Any protocol error
// closes the connection after logging what and where (MY-P4).
func (c *conn) serve() {
	defer func() {
		if r := recover(); r != nil {
			c.srv.cfg.Logf("mysqlfront: conn %d (%s): internal error, closing: %v\n%s", c.id, c.nc.RemoteAddr(), r, debug.Stack())
			if h := panicHook.Load(); h != nil {
				(*h)(r)
			}
		}
		c.close()
	}()
	if err := c.handshake(); err != nil {
		if !isClosedErr(err) {
			c.srv.cfg.Logf("mysqlfront: conn %d (%s): handshake: %v", c.id, c.nc.RemoteAddr(), err)
		}
		return
	}
	for {
		c.pio.seq = 0
		msg, err := c.pio.readMessage()
		if err != nil {
			c.protocolError(err)
			return
		}
		if quit := c.dispatch(msg); quit {
			return
		}
		if err := c.pio.flush(); err != nil {
			if !isClosedErr(err) {
				c.srv.cfg.Logf("mysqlfront: conn %d: write: %v", c.id, err)
			}
			return
		}
	}
}

func (c *conn) close() {
	c.stop()
	if c.sess != nil && c.sess.InTxn() {
		c.srv.execMu.Lock()
		_, _ = c.sess.Exec(context.Background(), "ROLLBACK")
		c.srv.execMu.Unlock()
	}
	_ = c.nc.Close()
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset by peer") || strings.Contains(err.Error(), "broken pipe")
}

// protocolError answers a broken message with an ERR packet when the
// protocol allows one, logs it, and the caller closes the connection.
func (c *conn) protocolError(err error) {
	if isClosedErr(err) {
		return
	}
	var oo errOutOfOrder
	switch {
	case errors.Is(err, errPacketTooLarge):
		c.writeErr(newError(ErNetPacketTooLarge, "08S01", "%v", err))
	case errors.As(err, &oo):
		c.writeErr(newError(ErNetOutOfOrder, "08S01", "%v", err))
	}
	_ = c.pio.flush()
	c.srv.cfg.Logf("mysqlfront: conn %d (%s): closing: %v", c.id, c.nc.RemoteAddr(), err)
}

func (c *conn) handshake() error {
	salt := make([]byte, 20)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	for i := range salt { // the salt is NUL-free printable bytes
		salt[i] = salt[i]%94 + 33
	}
	_ = c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = c.nc.SetDeadline(time.Time{}) }()
	if err := c.pio.writeMessage(handshakeV10(c.id, salt)); err != nil {
		return err
	}
	if err := c.pio.flush(); err != nil {
		return err
	}
	msg, err := c.pio.readMessage()
	if err != nil {
		return err
	}
	h, err := parseHandshakeResponse(msg)
	if err != nil {
		c.writeErr(newError(ErHandshake, "08S01", "Bad handshake: %v", err))
		_ = c.pio.flush()
		return err
	}
	if h.sslRequest {
		c.writeErr(newError(ErHandshake, "08S01", "Bad handshake: the sfemu MySQL front does not support TLS (use tls=false / --ssl-mode=DISABLED)"))
		_ = c.pio.flush()
		return errors.New("client asked for TLS")
	}
	c.caps = h.caps & serverCaps
	auth := h.authResp
	if h.caps&capPluginAuth != 0 && h.plugin != "" && h.plugin != nativePassword {
		// The client answered for another plugin: switch it to
		// mysql_native_password and take its new answer. (MY-P5)
		if err := c.pio.writeMessage(authSwitchRequest(salt)); err != nil {
			return err
		}
		if err := c.pio.flush(); err != nil {
			return err
		}
		if auth, err = c.pio.readMessage(); err != nil {
			return err
		}
	}
	if !c.srv.cfg.authOK(h.user, auth, salt) {
		using := "NO"
		if len(auth) != 0 {
			using = "YES"
		}
		hint := "; the sfemu front accepts user root with an empty password"
		if c.srv.cfg.Password != "" {
			hint = "" // a configured account is not named to strangers
		}
		c.writeErr(newError(ErAccessDenied, "28000", "Access denied for user '%s'@'%s' (using password: %s)%s", cleanString([]byte(h.user)), c.host, using, hint))
		_ = c.pio.flush()
		return fmt.Errorf("access denied for user %q", h.user)
	}
	if h.db != "" {
		if _, err := c.srv.sql.DBInfo(h.db); err != nil {
			c.writeErr(newError(ErBadDB, "42000", "Unknown database '%s'", cleanString([]byte(h.db))))
			_ = c.pio.flush()
			return fmt.Errorf("unknown database %q", h.db)
		}
		c.db = h.db
	}
	c.sess = c.srv.sql.NewSession(c.db)
	if err := c.writeOK(0, 0, ""); err != nil {
		return err
	}
	return c.pio.flush()
}

func (c *conn) status() uint16 {
	var st uint16
	if c.autocommit {
		st |= statusAutocommit
	}
	if c.sess != nil && c.sess.InTxn() {
		st |= statusInTrans
	}
	return st
}

func (c *conn) writeOK(affected, lastID uint64, info string) error {
	return c.pio.writeMessage(okPacket(affected, lastID, c.status(), info))
}

func (c *conn) writeErr(e *Error) {
	_ = c.pio.writeMessage(errPacket(e))
}

// dispatch runs one command; it reports whether the connection ends.
func (c *conn) dispatch(msg []byte) bool {
	if len(msg) == 0 {
		c.writeErr(newError(ErUnknownCom, "08S01", "empty command packet"))
		return false
	}
	body := msg[1:]
	switch msg[0] {
	case comQuit:
		return true
	case comPing:
		_ = c.writeOK(0, 0, "")
	case comInitDB:
		db := string(body)
		if err := c.useDB(db); err != nil {
			c.writeErr(toMySQLError(err))
			return false
		}
		_ = c.writeOK(0, 0, "")
	case comQuery:
		c.query(string(body))
	case comResetConnect:
		c.srv.execMu.Lock()
		if c.sess.InTxn() {
			_, _ = c.sess.Exec(c.ctx, "ROLLBACK")
		}
		c.srv.execMu.Unlock()
		c.sess = c.srv.sql.NewSession(c.db)
		c.autocommit, c.implicitTxn = true, false
		c.vars, c.userVars = map[string]string{}, map[string]val{}
		_ = c.writeOK(0, 0, "")
	case comStmtPrepare, comStmtExecute, comStmtReset:
		c.writeErr(newError(ErUnsupportedPS, "HY000",
			"sfemu mysqlfront does not implement prepared statements (COM_STMT_*); use client-side interpolation, e.g. interpolateParams=true in a go-sql-driver DSN"))
	case comStmtClose:
		// No response is sent for COM_STMT_CLOSE.
	case comFieldList:
		c.writeErr(newError(ErUnknownCom, "08S01", "COM_FIELD_LIST is not supported by sfemu mysqlfront"))
	default:
		c.writeErr(newError(ErUnknownCom, "08S01", "Unknown command 0x%02x", msg[0]))
	}
	return false
}

func (c *conn) useDB(db string) error {
	if db == "" {
		return newError(ErNoDB, "3D000", "No database selected")
	}
	c.srv.execMu.Lock()
	_, err := c.sess.Exec(c.ctx, "USE "+quoteIdent(db))
	c.srv.execMu.Unlock()
	if err != nil {
		return err
	}
	c.db = db
	return nil
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
