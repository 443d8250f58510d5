package main

import "testing"

// H14: --pprof auto serves profiles on loopback only; on/off are explicit.
func TestPprofEnabled(t *testing.T) {
	for _, c := range []struct {
		mode, addr string
		want       bool
	}{
		{"auto", "127.0.0.1:8080", true},
		{"", "[::1]:8080", true},
		{"auto", "localhost:8080", true},
		{"auto", "0.0.0.0:8080", false},
		{"auto", "10.1.2.3:8080", false},
		{"on", "0.0.0.0:8080", true},
		{"off", "127.0.0.1:8080", false},
	} {
		got, err := pprofEnabled(c.mode, c.addr)
		if err != nil || got != c.want {
			t.Fatalf("pprofEnabled(%q, %q) = %v, %v; want %v", c.mode, c.addr, got, err, c.want)
		}
	}
	if _, err := pprofEnabled("yes", "127.0.0.1:1"); err == nil {
		t.Fatal("--pprof yes accepted")
	}
}
