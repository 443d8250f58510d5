package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// sfemuBinary builds the sfemu binary once per test process.
func sfemuBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "sfemu-bin")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "sfemu")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// runProc is one `sfemu run` process of a binary test.
type runProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *lockedBuffer
	// From the startup line.
	running, httpAddr, mysqlAddr, state string
	epoch                               int
	startTs                             uint64
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var runningRE = regexp.MustCompile(`^sfemu: running: http=http://(\S+) grpc=(\S+) mysql=(\S+) mode=(\S+) pd=(\S+) .*start-ts=(\d+) epoch=(\d+) .*state=(\w+)`)

// startRun starts `sfemu run` on dataDir (loopback, ephemeral ports) and
// waits for its startup line; before is every line printed before it.
func startRun(t *testing.T, dataDir string, extra ...string) (p *runProc, before []string) {
	t.Helper()
	args := append([]string{"run", "--data-dir", dataDir, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--mysql", "127.0.0.1:0",
		"--status-interval", "500ms"}, extra...)
	cmd := exec.Command(sfemuBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p = &runProc{t: t, cmd: cmd, lines: make(chan string, 1000), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // status lines nobody reads
			}
		}
		close(p.lines)
	}()
	for {
		l := p.next("startup line")
		m := runningRE.FindStringSubmatch(l)
		if m == nil {
			before = append(before, l)
			continue
		}
		p.running, p.httpAddr, p.mysqlAddr, p.state = l, m[1], m[3], m[8]
		p.epoch, _ = strconv.Atoi(m[7])
		p.startTs, _ = strconv.ParseUint(m[6], 10, 64)
		return p, before
	}
}

func (p *runProc) next(what string) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("sfemu exited while waiting for %s: %s", what, p.stderr.String())
		}
		return l
	case <-time.After(60 * time.Second): // hang guard
		p.t.Fatalf("no %s from sfemu: %s", what, p.stderr.String())
	}
	return ""
}

// stop sends sig and waits for the exit; after SIGINT the exit must be
// clean.
func (p *runProc) stop(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range p.lines {
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		if sig == syscall.SIGINT && err != nil {
			p.t.Fatalf("sfemu exited with %v after SIGINT: %s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second): // hang guard
		p.t.Fatalf("sfemu did not stop after %v", sig)
	}
}

// sql runs statements through POST /upstream/sql and returns the commit ts.
func (p *runProc) sql(stmt string) uint64 {
	p.t.Helper()
	ts, err := p.trySQL(stmt)
	if err != nil {
		p.t.Fatal(err)
	}
	return ts
}

func (p *runProc) trySQL(stmt string) (uint64, error) {
	body, _ := json.Marshal(sqlRequest{SQL: stmt})
	resp, err := http.Post("http://"+p.httpAddr+"/upstream/sql", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sr sqlResponse
	if err := json.Unmarshal(raw, &sr); err != nil || resp.StatusCode != 200 || sr.CommitTs == 0 {
		return 0, fmt.Errorf("/upstream/sql %q: %d %s", stmt, resp.StatusCode, raw)
	}
	return sr.CommitTs, nil
}

// doc reads a document with min_ts (read your write); "" when absent.
func (p *runProc) doc(coll, pk string, minTs uint64) string {
	p.t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/collections/%s/docs/%s?min_ts=%d", p.httpAddr, coll, pk, minTs))
	if err != nil {
		p.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case 200:
		return string(raw)
	case 404:
		return ""
	}
	p.t.Fatalf("GET doc %s/%s: %d %s", coll, pk, resp.StatusCode, raw)
	return ""
}

// search runs a keys-only text search of a collection with min_ts.
func (p *runProc) search(coll, query string, minTs uint64) []string {
	p.t.Helper()
	body := fmt.Sprintf(`{"text":{"query":%q},"min_ts":%d,"limit":1,"keys_only":true}`, query, minTs)
	resp, err := http.Post("http://"+p.httpAddr+"/v1/collections/"+coll+"/search", "application/json", strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sr struct {
		Hits []struct {
			PrimaryKey string `json:"primary_key"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(raw, &sr); err != nil || resp.StatusCode != 200 {
		p.t.Fatalf("search: %d %s", resp.StatusCode, raw)
	}
	var keys []string
	for _, h := range sr.Hits {
		keys = append(keys, h.PrimaryKey)
	}
	return keys
}

// check runs /admin/check: the collections must equal the upstream read
// by snapshot (SR3).
func (p *runProc) check() {
	p.t.Helper()
	resp, err := http.Get("http://" + p.httpAddr + "/admin/check")
	if err != nil {
		p.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cr checkResult
	if err := json.Unmarshal(raw, &cr); err != nil || resp.StatusCode != 200 || !cr.OK {
		p.t.Fatalf("check: %d %s", resp.StatusCode, raw)
	}
}

// TestBinaryRunServesAndMirrors builds the sfemu binary, runs it on
// loopback (ephemeral ports) for a few seconds in the default mode (the
// adapter reads the embedded cluster over its PD and TiKV gRPC servers,
// SR4), writes through `sfemu sql` and through the MySQL front (SR8),
// reads the writes back through the HTTP API with min_ts, restarts the
// adapter in process, checks the collections against the upstream
// (/admin/check), and stops it with SIGINT.
func TestBinaryRunServesAndMirrors(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	bin := sfemuBinary(t)
	p, before := startRun(t, filepath.Join(t.TempDir(), "data"), "--rate", "100")
	if len(before) == 0 || !regexp.MustCompile(`^sfemu: upstream mode=embedded-grpc pd=127\.0\.0\.1:\d+ `).MatchString(before[0]) {
		t.Fatalf("first lines %q do not say the gRPC mode and the PD address", before)
	}
	if !strings.Contains(p.running, "mode=embedded-grpc pd=127.0.0.1:") || p.state != "new" || p.epoch != 1 {
		t.Fatalf("startup line %q", p.running)
	}

	out, err := exec.Command(bin, "sql", "--http", p.httpAddr,
		"INSERT INTO demo.products (id, title, description, stock) VALUES (990001, 'binary test lamp', 'written by the binary test', 1)").CombinedOutput()
	if err != nil {
		t.Fatalf("sfemu sql: %v %s", err, out)
	}
	cm := regexp.MustCompile(`commit_ts=(\d+)`).FindSubmatch(out)
	if cm == nil {
		t.Fatalf("sfemu sql output %q", out)
	}
	commitTs, _ := strconv.ParseUint(string(cm[1]), 10, 64)
	if keys := p.search("demo.products", "binary test lamp", commitTs); len(keys) != 1 || keys[0] != "990001" {
		t.Fatalf("read-your-write search found %v", keys)
	}

	// The MySQL front of the embedded upstream (SR8): a write through it is
	// mirrored like any other.
	db, err := sql.Open("mysql", "root@tcp("+p.mysqlAddr+")/demo?interpolateParams=true")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO products (id, title, stock) VALUES (990002, 'mysql protocol kettle', 2)"); err != nil {
		t.Fatalf("insert through the MySQL front: %v", err)
	}
	var title string
	if err := db.QueryRow("SELECT title FROM products WHERE id = 990002").Scan(&title); err != nil || title != "mysql protocol kettle" {
		t.Fatalf("select through the MySQL front: %q %v", title, err)
	}
	afterMySQL := p.sql("INSERT INTO demo.products (id, title, stock) VALUES (990003, 'marker', 0)") // a ts after the MySQL write
	if d := p.doc("demo.products", "990002", afterMySQL); !strings.Contains(d, "mysql protocol kettle") {
		t.Fatalf("row written through the MySQL front not mirrored: %q", d)
	}

	// Restarting the adapter in process resumes from the stored progress
	// with the next epoch, and the collections keep following the upstream.
	resp, err := http.Post("http://"+p.httpAddr+"/admin/restart-adapter", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rr restartResult
	if err := json.Unmarshal(raw, &rr); err != nil || resp.StatusCode != 200 || rr.Epoch != 2 {
		t.Fatalf("restart: %d %s", resp.StatusCode, raw)
	}
	ts := p.sql("UPDATE demo.products SET title = 'binary test lamp after restart' WHERE id = 990001")
	if d := p.doc("demo.products", "990001", ts); !strings.Contains(d, "after restart") {
		t.Fatalf("read after restart: %q", d)
	}
	p.check()

	// A status line arrives and reports progress.
	for {
		l := p.next("status line")
		if strings.Contains(l, "rows/s=") {
			if !strings.Contains(l, "demo.products(safe_ts_lag=") {
				t.Fatalf("status line without collection lag: %q", l)
			}
			break
		}
	}
	p.stop(syscall.SIGINT)
}

// TestBinaryRestartResumes (SR6, SR9): `sfemu run` stopped with SIGINT and
// run again on the same data dir reopens the persisted upstream, says
// "resumed" with the next epoch, still serves the earlier write, mirrors
// new writes (with a commit ts above every earlier one) and passes
// /admin/check.
func TestBinaryRestartResumes(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	data := filepath.Join(t.TempDir(), "data")
	p, _ := startRun(t, data, "--rate", "100")
	if p.state != "new" || p.epoch != 1 {
		t.Fatalf("first run's startup line %q", p.running)
	}
	// The test's rows go to demo.events, which the workload only inserts
	// into (ids above the stored ones): nothing else changes them.
	ts1 := p.sql("INSERT INTO demo.events VALUES (-990101, 1, 'view', 'persistent restart lantern')")
	if keys := p.search("demo.events", "persistent restart lantern", ts1); len(keys) != 1 || keys[0] != "-990101" {
		t.Fatalf("first run: search found %v", keys)
	}
	p.stop(syscall.SIGINT)

	p, _ = startRun(t, data, "--rate", "100")
	if p.state != "resumed" || p.epoch < 2 || !regexp.MustCompile(`upstream_records=[1-9]\d* `).MatchString(p.running) {
		t.Fatalf("second run's startup line %q does not say resumed with epoch >= 2 and the restored records", p.running)
	}
	if p.startTs < ts1 {
		t.Fatalf("second run resumed at %d, below the first run's acknowledged write at %d", p.startTs, ts1)
	}
	if keys := p.search("demo.events", "persistent restart lantern", ts1); len(keys) != 1 || keys[0] != "-990101" {
		t.Fatalf("after the restart: search found %v", keys)
	}
	ts2 := p.sql("INSERT INTO demo.events VALUES (-990102, 2, 'cart', 'written after the restart')")
	if ts2 <= ts1 {
		t.Fatalf("commit ts %d after the restart is not above %d before it", ts2, ts1)
	}
	if d := p.doc("demo.events", "-990102", ts2); !strings.Contains(d, "written after the restart") {
		t.Fatalf("write after the restart not mirrored: %q", d)
	}
	p.check()
	p.stop(syscall.SIGINT)
}

// TestBinaryKillResumes (SR9): SIGKILL in the middle of the workload and
// of a stream of acknowledged writes, then a restart: every write
// /upstream/sql acknowledged before the kill is in the upstream and in
// the collection, and /admin/check passes. Then --fresh starts over and
// says so.
func TestBinaryKillResumes(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	data := filepath.Join(t.TempDir(), "data")
	p, _ := startRun(t, data, "--rate", "500")

	var mu sync.Mutex
	var acked []int
	var maxTs uint64
	ctx, cancel := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for id := -990201; ctx.Err() == nil; id++ {
			ts, err := p.trySQL(fmt.Sprintf("INSERT INTO demo.events VALUES (%d, 3, 'view', 'acknowledged %d')", id, id))
			if err != nil {
				return // the kill
			}
			mu.Lock()
			acked = append(acked, id)
			maxTs = max(maxTs, ts)
			mu.Unlock()
		}
	}()
	// Let the workload and the writer run through some status lines.
	for n := 0; n < 3; {
		if strings.Contains(p.next("status line"), "rows/s=") {
			n++
		}
	}
	p.stop(syscall.SIGKILL)
	cancel()
	<-writerDone
	mu.Lock()
	ids, last := append([]int(nil), acked...), maxTs
	mu.Unlock()
	if len(ids) == 0 {
		t.Fatal("no write acknowledged before the kill")
	}
	t.Logf("%d writes acknowledged before SIGKILL, the last at ts %d", len(ids), last)

	p, _ = startRun(t, data, "--rate", "500")
	if p.state != "resumed" || p.epoch < 2 {
		t.Fatalf("startup line after the kill %q", p.running)
	}
	t.Logf("after the kill: %s", p.running)
	for _, id := range ids {
		if d := p.doc("demo.events", strconv.Itoa(id), last); !strings.Contains(d, fmt.Sprintf("acknowledged %d", id)) {
			t.Fatalf("row %d acknowledged before the kill (of %d, last commit ts %d) is missing after the restart: %q", id, len(ids), last, d)
		}
	}
	p.check()
	p.stop(syscall.SIGINT)

	p, before := startRun(t, data, "--rate", "0", "--fresh")
	if p.state != "new" || p.epoch != 1 || !strings.Contains(strings.Join(before, "\n"), "--fresh: removed the previous state of "+data) {
		t.Fatalf("--fresh run: %q then %q", before, p.running)
	}
	if d := p.doc("demo.events", strconv.Itoa(ids[0]), p.sql("INSERT INTO demo.events VALUES (-990300, 0, 'view', 'marker')")); d != "" {
		t.Fatalf("--fresh kept row %d: %q", ids[0], d)
	}
	p.stop(syscall.SIGINT)
}

func TestConfigFileAndFlagPrecedence(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sfemu.json")
	if err := os.WriteFile(p, []byte(`{"data_dir":"/from/file","rate":7,"status_interval":"2s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newRunCmd()
	if err := cmd.ParseFlags([]string{"--config", p, "--rate", "9"}); err != nil {
		t.Fatal(err)
	}
	cfg := defaultRunConfig()
	// Re-read the values the flags hold.
	cfg.Rate, _ = cmd.Flags().GetInt("rate")
	if err := loadConfigFile(p, &cfg, cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/file" || cfg.Rate != 9 || cfg.StatusInterval != 2*time.Second || cfg.HTTP != "127.0.0.1:8080" {
		t.Fatalf("merged config %+v", cfg)
	}
	if err := os.WriteFile(p, []byte(`{"dataDir":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := loadConfigFile(p, &cfg, cmd.Flags()); err == nil {
		t.Fatal("unknown config key accepted")
	}
}
