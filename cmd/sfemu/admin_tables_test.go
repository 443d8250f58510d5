package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/verify"
)

// TestLT5_AdminTablesAddRemove: POST /admin/tables adds a table of the
// running adapter's cluster (mirrored from the change on, rows before it
// not copied) and removes one (its collection kept as it was), with no
// restart; bad requests answer 400 naming the table and change nothing.
func TestLT5_AdminTablesAddRemove(t *testing.T)      { testAdminTables(t, false) }
func TestLT5_Wire_AdminTablesAddRemove(t *testing.T) { testAdminTables(t, true) }

func testAdminTables(t *testing.T, wire bool) {
	ctx := context.Background()
	up, err := adapter.NewUpstream(ctx, adapter.UpstreamConfig{Seed: 3, RealClock: true, ResolvedTsInterval: 20 * time.Millisecond, Wire: wire})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ss := up.SQL.NewSession("")
	exec := func(q string) uint64 {
		t.Helper()
		res, err := ss.Exec(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return res.CommitTs
	}
	exec("CREATE DATABASE shop")
	exec("CREATE TABLE shop.items (id BIGINT PRIMARY KEY, v VARCHAR(10))")
	exec("CREATE TABLE shop.later (id BIGINT PRIMARY KEY, v VARCHAR(10))")
	exec("INSERT INTO shop.later VALUES (1, 'before')") // not copied: no snapshot (LT5)
	dir := t.TempDir()
	emu, err := emulator.Open(filepath.Join(dir, "emulator"), emulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	a, err := adapter.Start(ctx, up, emu, adapter.Config{DataDir: dir, Tables: []adapter.TableRef{{DB: "shop", Table: "items"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rt := a.RT
	srv := httptest.NewServer(tablesHandler(func() *adapter.Adapter { return a }, "tok"))
	defer srv.Close()
	call := func(method, body, token string) (int, tablesResult) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res tablesResult
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		if err := json.Unmarshal(buf.Bytes(), &res); err != nil {
			t.Fatalf("%s %s: %v: %s", method, body, err, buf.String())
		}
		return resp.StatusCode, res
	}

	if code, _ := call(http.MethodGet, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	code, res := call(http.MethodPost, `{"add": ["shop.later"]}`, "tok")
	if code != http.StatusOK || len(res.Added["shop.later"]) != 1 || strings.Join(res.Tables, ",") != "shop.items,shop.later" {
		t.Fatalf("add: %d %+v", code, res)
	}
	exec("INSERT INTO shop.later VALUES (2, 'after')")
	exec("UPDATE shop.later SET v = 'changed' WHERE id = 1") // a row from before: now its new image arrives
	exec("INSERT INTO shop.items VALUES (1, 'i')")
	final := exec("INSERT INTO shop.later VALUES (3, 'after')")
	both := []adapter.TableRef{{DB: "shop", Table: "items"}, {DB: "shop", Table: "later"}}
	if err := verify.WaitSafe(ctx, emu, both, final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime %v)", err, rt.Err())
	}
	docs, err := verify.Documents(ctx, emu, "shop.later")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 {
		t.Fatalf("shop.later has %d documents, want 3 (ids 1 updated after the add, 2, 3)", len(docs))
	}
	diffs, err := verify.CheckConsistency(ctx, up.Snapshot(), emu, both, final)
	if err != nil || len(diffs) != 0 {
		t.Fatalf("after the add: %v %v", diffs, err)
	}

	// Errors: 400 naming the table, nothing changed.
	for _, body := range []string{`{"add": ["shop.nope"]}`, `{"add": ["shop.later"]}`, `{"remove": ["shop.nope"]}`, `{"add": ["nodot"]}`, `{"bogus": 1}`, `{}`} {
		code, res := call(http.MethodPost, body, "tok")
		if code != http.StatusBadRequest || res.Err == "" {
			t.Errorf("%s: %d %+v, want 400 with an error", body, code, res)
		}
		if strings.Contains(body, "nope") && !strings.Contains(res.Err, "shop.nope") {
			t.Errorf("%s: error %q does not name the table", body, res.Err)
		}
	}

	// Remove: the collection is kept as it was.
	code, res = call(http.MethodPost, `{"remove": ["shop.items"]}`, "tok")
	if code != http.StatusOK || strings.Join(res.Tables, ",") != "shop.later" {
		t.Fatalf("remove: %d %+v", code, res)
	}
	exec("INSERT INTO shop.items VALUES (2, 'unseen')")
	final = exec("INSERT INTO shop.later VALUES (4, 'after')")
	if err := verify.WaitSafe(ctx, emu, both[1:], final, 30*time.Second); err != nil {
		t.Fatalf("%v (runtime %v)", err, rt.Err())
	}
	items, err := verify.Documents(ctx, emu, "shop.items")
	if err != nil || len(items) != 1 {
		t.Fatalf("shop.items after the remove: %d documents (%v), want the 1 from before", len(items), err)
	}
	if code, res := call(http.MethodGet, "", "tok"); code != http.StatusOK || strings.Join(res.Tables, ",") != "shop.later" {
		t.Fatalf("GET: %d %+v", code, res)
	}
	if a.RT != rt || rt.Err() != nil {
		t.Fatalf("the runtime changed or stopped: %v", rt.Err())
	}
}
