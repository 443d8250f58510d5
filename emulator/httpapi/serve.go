package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where the API listens when the binary is given no address.
const DefaultAddr = "127.0.0.1:8480"

// LoopbackAddr returns addr with an empty host replaced by 127.0.0.1, so
// ":8480" binds loopback rather than every interface (H1). An explicit host,
// including 0.0.0.0 or ::, is kept: binding wider is a deliberate choice.
func LoopbackAddr(addr string) (string, error) {
	if addr == "" {
		return DefaultAddr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("httpapi: bad listen address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// IsLoopback reports whether addr's host is a loopback IP or "localhost".
// The binary can use it to warn when a non-loopback address has no token.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is a running HTTP API listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when the serve loop ends
	err  error         // the serve loop's error; read after done
}

// Start listens on addr (after LoopbackAddr) and serves h in the background.
func Start(addr string, h http.Handler) (*Server, error) {
	a, err := LoopbackAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("httpapi: listen %s: %w", a, err)
	}
	return Serve(ln, h), nil
}

// Serve serves h on an existing listener in the background.
func Serve(ln net.Listener, h http.Handler) *Server {
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			// Long enough for a bounded min_ts wait plus a large search.
			WriteTimeout: 2 * time.Minute,
			IdleTimeout:  2 * time.Minute,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s
}

// Addr is the address actually bound (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://" + Addr().
func (s *Server) URL() string { return "http://" + s.Addr() }

// Shutdown stops accepting, waits for in-flight requests until ctx ends, and
// returns the serve loop's error, if any.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	<-s.done
	return s.err
}

// Done is closed when the serve loop ends; Err then tells why.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the serve loop's error after Done is closed (nil after Shutdown).
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}
