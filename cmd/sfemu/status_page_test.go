package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator/httpapi"
)

func getStatus(t *testing.T, addr string) httpapi.StatusDoc {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/v1/status: %d %s", resp.StatusCode, raw)
	}
	var doc httpapi.StatusDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("/v1/status: %v: %s", err, raw)
	}
	return doc
}

// H15-H17 through the binary: /v1/status carries the upstream, the
// adapter streaming, both demo collections, a plot that fills, and a DDL
// sent through /upstream/sql with its statement and policy; /debug/pprof/ is
// on by default on loopback (H14).
func TestBinaryStatusPage(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	// A low demo rate: the page needs documents, not many.
	p, _ := startRun(t, t.TempDir(), "--rate", "50")
	defer p.stop(syscall.SIGINT)

	var doc httpapi.StatusDoc
	deadline := time.Now().Add(60 * time.Second)
	for {
		doc = getStatus(t, p.httpAddr)
		ok := len(doc.Collections) == 2 && len(doc.Series.Points) >= 2
		for _, c := range doc.Collections {
			ok = ok && c.Documents > 0
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed 2 collections with documents and plot points: %+v", doc)
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	if doc.Upstream == nil || doc.Upstream.Mode != "embedded-grpc" || doc.Upstream.CurrentTs == 0 || doc.Upstream.Address == "" {
		t.Fatalf("upstream %+v", doc.Upstream)
	}
	if a := doc.Adapter; a == nil || a.State != httpapi.AdapterStreaming || a.Epoch != 1 || a.StartTs == 0 {
		t.Fatalf("adapter %+v", doc.Adapter)
	}
	if len(doc.Partitions) != 5 { // products + 4 event partitions
		t.Fatalf("partitions %+v", doc.Partitions)
	}

	ts := p.sql("ALTER TABLE demo.products ADD COLUMN status_note VARCHAR(32)")
	deadline = time.Now().Add(30 * time.Second)
	for {
		doc = getStatus(t, p.httpAddr)
		var found *httpapi.DDLRow
		for i, d := range doc.DDLs {
			if d.Ts == ts {
				found = &doc.DDLs[i]
			}
		}
		if found != nil && found.Policy != "" && found.Query != "" {
			if found.Collection != "demo.products" || !strings.Contains(found.Query, "status_note") || found.Policy != "SCHEMA_UPDATE_POLICY_ADDITIVE" {
				t.Fatalf("DDL row %+v", *found)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DDL at %d never listed with its policy and statement: %+v", ts, doc.DDLs)
		}
		time.Sleep(300 * time.Millisecond)
	}

	for path, want := range map[string]string{"/": "<title>sfemu status</title>", "/debug/pprof/": "goroutine"} {
		resp, err := http.Get("http://" + p.httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(raw), want) {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, fmt.Sprintf("%.200s", raw))
		}
	}
}
