package logpuller

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
)

// T14: the client announces a 1 MiB stream window and an 8 MiB connection
// window in its HTTP/2 preface (static: gRPC's BDP estimation is off).
// TiCDC's 64 KiB − 1 stream window made the server stall on flow control
// under load on a 2-core box: commit -> row lag rose to ~0.7 s at 60k
// rows/s over loopback (measured with BenchmarkE2E_Wire_InsertToSafeTs).
func TestT14WindowsAnnounced(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := grpc.NewClient(ln.Addr().String(), dialOptions(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Connect()
	if tl, ok := ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(20 * time.Second)) // a hang guard, not a timing assertion
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		t.Fatalf("client preface %q: %v", preface, err)
	}
	fr := http2.NewFramer(io.Discard, c)
	var streamWindow uint32
	var connIncrement uint32
	for streamWindow == 0 || connIncrement == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the client's frames: %v (stream window %d, conn increment %d)", err, streamWindow, connIncrement)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				streamWindow = v
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connIncrement = f.Increment
			}
		}
	}
	if streamWindow != 1<<20 {
		t.Errorf("stream window %d, want %d", streamWindow, 1<<20)
	}
	// The connection window starts at 64 KiB − 1 and is raised by one update.
	if got := connIncrement + 65535; got != 8<<20 {
		t.Errorf("connection window %d, want %d", got, 8<<20)
	}
}
