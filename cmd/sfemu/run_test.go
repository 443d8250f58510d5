package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/adapter/datadir"
	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// SR5: flag combinations that make no sense are refused before anything
// starts, each with a message naming the flag.
func TestRunFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tables", "db.t1"}, "--tables needs --pd"},
		{[]string{"--start-ts", "5"}, "--start-ts needs --pd"},
		{[]string{"--pd", "127.0.0.1:1", "--in-process", "--tables", "db.t"}, "--in-process"},
		{[]string{"--pd", "127.0.0.1:1"}, "--pd needs --tables"},
		{[]string{"--pd", "127.0.0.1:1", "--tables", "nodot"}, `"nodot" is not db.table`},
		{[]string{"--pd", "127.0.0.1:1", "--tables", "a.b,A.B"}, "listed twice"},
		{[]string{"--pd", "127.0.0.1:1", "--tables", "db.t", "--fresh"}, "--fresh"},
	} {
		cmd := newRootCmd()
		cmd.SetArgs(append([]string{"run", "--data-dir", t.TempDir()}, tc.args...))
		cmd.SetOut(io.Discard)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error containing %q, got %v", tc.args, tc.want, err)
		}
	}
}

// SR5: an unreachable PD fails within --pd-timeout, naming the address.
func TestRealModeUnreachablePD(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetArgs([]string{"run", "--data-dir", t.TempDir(), "--pd", "127.0.0.1:1", "--tables", "db.t1", "--pd-timeout", "1s", "--http", "127.0.0.1:0"})
	cmd.SetOut(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "PD") {
		t.Fatalf("want an error naming the PD address, got %v", err)
	}
}

// realUpstream is a cluster behind its gRPC servers, as `sfemu run --pd`
// sees a real one (PD and TiKV over gRPC, nothing else), plus a SQL
// session to change it from the test.
//
// created is a ts at which shop.items exists and is still empty: the
// adapter delivers changes after its start ts (no initial load, as TiCDC),
// so a run that must hold every row starts there.
func realUpstream(t *testing.T) (c *fakeupstream.Cluster, ss *sqlfront.Session, pdAddr string, created uint64) {
	t.Helper()
	ctx := context.Background()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 3, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := sqlfront.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ss = front.NewSession("")
	for _, q := range []string{
		"CREATE DATABASE shop",
		"CREATE TABLE shop.items (id BIGINT PRIMARY KEY, title VARCHAR(64), price INT)",
		"INSERT INTO shop.items VALUES (1, 'one', 10), (2, 'two', 20)",
	} {
		res, err := ss.Exec(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if res.DDL {
			created = res.CommitTs
		}
	}
	return c, ss, s.PDAddr(), created
}

// SR5: real-cluster mode refuses a table that does not exist at the start
// ts and a start ts below the GC safe point, naming what and where.
func TestRealModeStartupErrors(t *testing.T) {
	c, ss, pdAddr, _ := realUpstream(t)
	ctx := context.Background()
	cfg := defaultRunConfig()
	cfg.PD, cfg.HTTP, cfg.GRPC, cfg.DataDir = pdAddr, "127.0.0.1:0", "", t.TempDir()

	cfg.Tables = "shop.items,shop.nope"
	err := runMain(ctx, cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "shop.nope") || !strings.Contains(err.Error(), "does not exist at ts") {
		t.Fatalf("missing table: got %v", err)
	}

	res, err := ss.Exec(ctx, "INSERT INTO shop.items VALUES (3, 'three', 30)")
	if err != nil {
		t.Fatal(err)
	}
	early := res.CommitTs - 1
	res, err = ss.Exec(ctx, "INSERT INTO shop.items VALUES (4, 'four', 40)")
	if err != nil {
		t.Fatal(err)
	}
	c.GC(res.CommitTs)
	cfg.Tables, cfg.StartTs, cfg.DataDir = "shop.items", early, t.TempDir()
	err = runMain(ctx, cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "GC safe point") || !strings.Contains(err.Error(), fmt.Sprint(early)) {
		t.Fatalf("start ts below GC: got %v", err)
	}
}

// SR4, SR3: `sfemu run --pd --tables` mirrors the tables of a cluster it
// reaches only through PD and TiKV gRPC (no demo workload, no
// /upstream/sql), /admin/check compares them through snapshot reads, and
// a second run on the same data dir resumes with the next epoch.
func TestRealModeMirrorsAndChecks(t *testing.T) {
	_, ss, pdAddr, created := realUpstream(t)
	dir := t.TempDir()
	cfg := defaultRunConfig()
	cfg.PD, cfg.Tables, cfg.HTTP, cfg.GRPC, cfg.DataDir, cfg.StatusInterval = pdAddr, "shop.items", "127.0.0.1:0", "", dir, 200*time.Millisecond
	cfg.StartTs = created // the second run resumes from the stored progress instead

	run := func(wantEpoch string, firstID int) {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- runMain(ctx, cfg, pw); pw.Close() }()
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				default: // status lines nobody reads
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
				if strings.HasPrefix(l, "sfemu: upstream ") && !strings.Contains(l, "mode=real-cluster pd="+pdAddr) {
					t.Fatalf("mode line %q", l)
				}
				if m := regexp.MustCompile(`running: http=http://(\S+) .* epoch=(\d+) .*workload=none`).FindStringSubmatch(l); m != nil {
					if m[2] != wantEpoch {
						t.Fatalf("epoch %s, want %s: %q", m[2], wantEpoch, l)
					}
					httpAddr = m[1]
				}
			case <-time.After(60 * time.Second): // hang guard
				t.Fatal("no startup line")
			}
		}
		for i := 0; i < 20; i++ {
			if _, err := ss.Exec(context.Background(), fmt.Sprintf("INSERT INTO shop.items VALUES (%d, 'row %d', %d)", firstID+i, firstID+i, i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ss.Exec(context.Background(), "UPDATE shop.items SET price = price + 1 WHERE id = 1"); err != nil {
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
			t.Fatalf("check: %d %s", resp.StatusCode, raw)
		}
		resp, err = http.Post("http://"+httpAddr+"/upstream/sql", "application/json", strings.NewReader(`{"sql":"SELECT 1"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("/upstream/sql in real-cluster mode: status %d, want 404", resp.StatusCode)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	run("1", 100)
	run("2", 200)

	// The data dir is bound to this cluster: the embedded mode refuses it.
	ecfg := defaultRunConfig()
	ecfg.DataDir, ecfg.HTTP, ecfg.GRPC, ecfg.MySQL = dir, "127.0.0.1:0", "", ""
	if err := runMain(context.Background(), ecfg, io.Discard); err == nil || !strings.Contains(err.Error(), "another upstream") {
		t.Fatalf("embedded run on a real-cluster data dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, clientLogFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// SR4: --in-process keeps the old in-process source and says so; its
// /admin/check works as in the other modes.
func TestRunInProcessMode(t *testing.T) {
	cfg := defaultRunConfig()
	cfg.InProcess, cfg.HTTP, cfg.GRPC, cfg.MySQL, cfg.DataDir, cfg.Rate = true, "127.0.0.1:0", "", "", t.TempDir(), 50
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- runMain(ctx, cfg, pw); pw.Close() }()
	sc := bufio.NewScanner(pr)
	var httpAddr string
	for httpAddr == "" && sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "sfemu: upstream ") && !strings.HasPrefix(l, "sfemu: upstream mode=in-process pd=none ") {
			t.Fatalf("mode line %q", l)
		}
		if m := regexp.MustCompile(`running: http=http://(\S+) .*mode=in-process pd=none `).FindStringSubmatch(l); m != nil {
			httpAddr = m[1]
		}
	}
	if httpAddr == "" {
		t.Fatalf("no running line (run: %v)", <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	resp, err := http.Get("http://" + httpAddr + "/admin/check")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cr checkResult
	if err := json.Unmarshal(raw, &cr); err != nil || resp.StatusCode != 200 || !cr.OK {
		t.Fatalf("check: %d %s", resp.StatusCode, raw)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// SR5, SR6: a data dir another sfemu holds is refused naming the lock; an
// embedded data dir whose collections came from an in-memory upstream
// (no upstream/) is refused pointing at --fresh.
func TestDataDirLockedAndOldState(t *testing.T) {
	cfg := defaultRunConfig()
	cfg.HTTP, cfg.GRPC, cfg.MySQL = "127.0.0.1:0", "", ""

	cfg.DataDir = t.TempDir()
	unlock, err := datadir.Lock(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	err = runMain(context.Background(), cfg, io.Discard)
	unlock()
	if err == nil || !strings.Contains(err.Error(), "in use by another sfemu") || !strings.Contains(err.Error(), datadir.LockFile) {
		t.Fatalf("run on a locked data dir: %v", err)
	}

	for name, marker := range map[string]bool{"with upstream.json": true, "without upstream.json": false} {
		cfg.DataDir = t.TempDir()
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, "emulator"), 0o755); err != nil {
			t.Fatal(err)
		}
		if marker {
			if err := os.WriteFile(filepath.Join(cfg.DataDir, datadir.Marker), []byte(`{"mode":"embedded"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := runMain(context.Background(), cfg, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--fresh") {
			t.Fatalf("%s: run on an in-memory era data dir: %v", name, err)
		}
		if _, serr := os.Stat(filepath.Join(cfg.DataDir, datadir.Upstream)); serr == nil {
			t.Fatalf("%s: the refused run created %s", name, datadir.Upstream)
		}
	}
}
