package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/internal/testpki"
)

// rule: SR22 — --ca/--cert/--key need --pd; a missing or bad file is
// refused before anything starts, naming it.
func TestSR22_TLSFlagRefusals(t *testing.T) {
	pki := testpki.New(t)
	missing := filepath.Join(t.TempDir(), "missing-ca.pem")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ca", pki.CA}, "need --pd"},
		{[]string{"--pd", "127.0.0.1:1", "--tables", "db.t", "--ca", missing}, missing},
		{[]string{"--pd", "127.0.0.1:1", "--tables", "db.t", "--ca", pki.CA, "--cert", pki.ClientCert}, "--cert and --key go together"},
		{[]string{"--pd", "127.0.0.1:1", "--tables", "db.t", "--ca", pki.CA, "--cert", pki.ClientCert, "--key", pki.ServerKey}, pki.ServerKey},
	} {
		dir := filepath.Join(t.TempDir(), "never")
		cmd := newRootCmd()
		cmd.SetOut(io.Discard)
		cmd.SetArgs(append([]string{"run", "--data-dir", dir}, tc.args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error containing %q, got %v", tc.args, tc.want, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v: the data dir was created before the refusal", tc.args)
		}
	}
}

// rule: SR22 — sfemu run --pd with --ca/--cert/--key mirrors a cluster
// whose servers require mutual TLS (the embedded cluster's servers with
// G60), and /admin/check agrees with the upstream read over TLS.
func TestSR22_RealModeOverTLS(t *testing.T) {
	pki := testpki.New(t)
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 3, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := sqlfront.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{TLS: pki.ServerTLS()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ss := front.NewSession("")
	var created uint64
	for _, q := range []string{"CREATE DATABASE shop", "CREATE TABLE shop.items (id BIGINT PRIMARY KEY, title VARCHAR(64))"} {
		res, err := ss.Exec(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		created = res.CommitTs
	}
	cfg := defaultRunConfig()
	cfg.PD, cfg.Tables, cfg.HTTP, cfg.GRPC, cfg.DataDir, cfg.StatusInterval = s.PDAddr(), "shop.items", "127.0.0.1:0", "", t.TempDir(), 200*time.Millisecond
	cfg.StartTs, cfg.Snapshot = created, "never"
	cfg.CA, cfg.Cert, cfg.Key = pki.CA, pki.ClientCert, pki.ClientKey

	rctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- runMain(rctx, cfg, pw); pw.Close() }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	var httpAddr string
	for httpAddr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sfemu stopped: %v", <-done)
			}
			if m := regexp.MustCompile(`running: http=http://(\S+) `).FindStringSubmatch(l); m != nil {
				httpAddr = m[1]
			}
		case <-time.After(60 * time.Second): // hang guard
			t.Fatal("no startup line")
		}
	}
	if _, err := ss.Exec(ctx, "INSERT INTO shop.items VALUES (1, 'over tls'), (2, 'two')"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + httpAddr + "/admin/check")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cr checkResult
	if err := json.Unmarshal(raw, &cr); err != nil || resp.StatusCode != 200 || !cr.OK {
		t.Fatalf("check over TLS: %d %s", resp.StatusCode, raw)
	}
}
