package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rule: SR21 — a non-loopback --http or --grpc without --token is refused
// before anything starts, with a message naming the flag, --token and
// --insecure-listen; loopback addresses, a token, or --insecure-listen
// pass. (Only the check runs here: tests bind loopback addresses only.)
func TestSR21_TokenRequiredForNonLoopbackListen(t *testing.T) {
	base := defaultRunConfig()
	for _, tc := range []struct {
		name    string
		mod     func(*runConfig)
		refused string // the flag named, "" = accepted
	}{
		{"defaults", func(*runConfig) {}, ""},
		{"empty host binds loopback", func(c *runConfig) { c.HTTP = ":8080" }, ""},
		{"localhost", func(c *runConfig) { c.HTTP = "localhost:8080" }, ""},
		{"ipv6 loopback", func(c *runConfig) { c.GRPC = "[::1]:9090" }, ""},
		{"all interfaces http", func(c *runConfig) { c.HTTP = "0.0.0.0:8080" }, "--http"},
		{"all interfaces grpc", func(c *runConfig) { c.GRPC = "[::]:9090" }, "--grpc"},
		{"lan address", func(c *runConfig) { c.HTTP = "192.168.1.5:8080" }, "--http"},
		{"host name", func(c *runConfig) { c.GRPC = "search.internal:9090" }, "--grpc"},
		{"grpc off", func(c *runConfig) { c.GRPC = "" }, ""},
		{"with a token", func(c *runConfig) { c.HTTP, c.Token = "0.0.0.0:8080", "s3cret" }, ""},
		{"insecure-listen", func(c *runConfig) { c.HTTP, c.InsecureListen = "0.0.0.0:8080", true }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			err := checkListen(cfg)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range []string{tc.refused + " ", "not a loopback address", "--token", "--insecure-listen"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
	// runMain refuses before it creates or locks anything.
	cfg := base
	cfg.HTTP = "0.0.0.0:8080"
	cfg.DataDir = filepath.Join(t.TempDir(), "never")
	if err := runMain(context.Background(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "--insecure-listen") {
		t.Fatalf("runMain: %v", err)
	}
	if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created before the refusal: %v", err)
	}
}

// The config file key insecure_listen works like the flag.
func TestSR21_ConfigKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"http":"0.0.0.0:8080","insecure_listen":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newRunCmd()
	cfg := defaultRunConfig()
	if err := loadConfigFile(path, &cfg, cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if !cfg.InsecureListen || checkListen(cfg) != nil {
		t.Fatalf("config key: %+v %v", cfg, checkListen(cfg))
	}
}
