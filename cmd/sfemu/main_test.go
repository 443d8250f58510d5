package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinaryRunServesAndMirrors builds the sfemu binary, runs it on
// loopback (ephemeral ports) for a few seconds in the default mode (the
// adapter reads the embedded cluster over its PD and TiKV gRPC servers,
// SR4), writes through `sfemu sql`, reads the write back through the HTTP
// API with min_ts, checks the collections against the upstream
// (/admin/check), and stops it with SIGINT.
func TestBinaryRunServesAndMirrors(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sfemu")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "run", "--data-dir", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
		"--status-interval", "500ms", "--rate", "100")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sfemu exited while waiting for %s: %s", what, stderr.String())
			}
			return l
		case <-time.After(60 * time.Second): // hang guard
			t.Fatalf("no %s from sfemu: %s", what, stderr.String())
		}
		return ""
	}
	modeLine := next("mode line")
	if !regexp.MustCompile(`^sfemu: upstream mode=embedded-grpc pd=127\.0\.0\.1:\d+ `).MatchString(modeLine) {
		t.Fatalf("first line %q does not say the gRPC mode and the PD address", modeLine)
	}
	startLine := next("startup line")
	m := regexp.MustCompile(`http=http://(\S+) grpc=(\S+) mode=embedded-grpc pd=127\.0\.0\.1:\d+ `).FindStringSubmatch(startLine)
	if m == nil {
		t.Fatalf("startup line %q", startLine)
	}
	httpAddr := m[1]

	sql := exec.Command(bin, "sql", "--http", httpAddr,
		"INSERT INTO demo.products (id, title, description, stock) VALUES (990001, 'binary test lamp', 'written by the binary test', 1)")
	out, err := sql.CombinedOutput()
	if err != nil {
		t.Fatalf("sfemu sql: %v %s", err, out)
	}
	cm := regexp.MustCompile(`commit_ts=(\d+)`).FindSubmatch(out)
	if cm == nil {
		t.Fatalf("sfemu sql output %q", out)
	}
	commitTs := string(cm[1])

	body := fmt.Sprintf(`{"text":{"query":"binary test lamp"},"min_ts":%s,"limit":1,"keys_only":true}`, commitTs)
	resp, err := http.Post("http://"+httpAddr+"/v1/collections/demo.products/search", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sr struct {
		Hits []struct {
			PrimaryKey string `json:"primary_key"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(raw, &sr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("search: %d %s", resp.StatusCode, raw)
	}
	if len(sr.Hits) != 1 || sr.Hits[0].PrimaryKey != "990001" {
		t.Fatalf("read-your-write search found %s", raw)
	}

	// Restarting the adapter in process resumes from the stored progress
	// with the next epoch, and the collections keep following the upstream.
	resp, err = http.Post("http://"+httpAddr+"/admin/restart-adapter", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var rr restartResult
	if err := json.Unmarshal(raw, &rr); err != nil || resp.StatusCode != 200 || rr.Epoch != 2 {
		t.Fatalf("restart: %d %s", resp.StatusCode, raw)
	}
	out, err = exec.Command(bin, "sql", "--http", httpAddr, "UPDATE demo.products SET title = 'binary test lamp after restart' WHERE id = 990001").CombinedOutput()
	if err != nil {
		t.Fatalf("sfemu sql: %v %s", err, out)
	}
	cm = regexp.MustCompile(`commit_ts=(\d+)`).FindSubmatch(out)
	if cm == nil {
		t.Fatalf("sfemu sql output %q", out)
	}
	resp, err = http.Get("http://" + httpAddr + "/v1/collections/demo.products/docs/990001?min_ts=" + string(cm[1]))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "after restart") {
		t.Fatalf("read after restart: %d %s", resp.StatusCode, raw)
	}

	// The built-in consistency check: collections equal the upstream read
	// by snapshot (the workload pauses meanwhile).
	resp, err = http.Get("http://" + httpAddr + "/admin/check")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var cr checkResult
	if err := json.Unmarshal(raw, &cr); err != nil || resp.StatusCode != 200 || !cr.OK {
		t.Fatalf("check: %d %s", resp.StatusCode, raw)
	}

	// A status line arrives and reports progress.
	for {
		l := next("status line")
		if strings.Contains(l, "rows/s=") {
			if !strings.Contains(l, "demo.products(safe_ts_lag=") {
				t.Fatalf("status line without collection lag: %q", l)
			}
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sfemu exited with %v: %s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("sfemu did not stop after SIGINT")
	}
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
