package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/emulator/httpapi"
)

func fixedStatus() *httpapi.StatusDoc {
	lag := func(v float64) *float64 { return &v }
	eta := 4.0
	return &httpapi.StatusDoc{
		Now:      time.Unix(1_700_000_000, 0),
		Upstream: &httpapi.UpstreamStatus{Mode: "embedded-grpc", Address: "127.0.0.1:2379", CurrentTs: 470000000000000000},
		Adapter: &httpapi.AdapterStatus{State: httpapi.AdapterStreaming, Epoch: 3, Rows: 1234, DDLs: 2, Buffered: 5, Restarts: 1, CheckpointLag: lag(0.25),
			Progress: &httpapi.Progress{What: "catch-up", Unit: "s", Done: 30, Total: 60, Rate: 7, ETASeconds: &eta}},
		Collections: []httpapi.CollectionRow{{Name: "demo.products", Documents: 992, Tombstones: 357, Generation: 3, SchemaVersion: 6, SafeTs: 469999999999999999, SafeLag: lag(0.088),
			Applied: []httpapi.AppliedRow{{Modality: "document", AppliedTs: 1, Lag: lag(0.088)}, {Modality: "text", AppliedTs: 1, Lag: lag(0.2)}},
			Rebuild: &httpapi.Progress{What: "rebuild of generation 3 (serving 2)", Unit: "%", Done: 30, Total: 100, Rate: 10, ETASeconds: &eta}}},
		Partitions: []httpapi.PartitionRow{{SourcePartition: "table:104", Collection: "demo.products", Epoch: 3, LastSeq: 2679, ResolvedTs: 469999999999999999, Lag: lag(0.088)}},
		DDLs:       []httpapi.DDLRow{{Ts: 469999999999999990, Collection: "demo.products", Policy: "SCHEMA_UPDATE_POLICY_ADDITIVE", SchemaVersion: 6, Query: "ALTER TABLE demo.products ADD COLUMN note VARCHAR(64)"}},
		Errors:     []httpapi.ErrorRow{{At: time.Unix(1_700_000_000, 0), Message: "adapter restarted (epoch 3): table set changed"}},
		Series:     httpapi.Series{Points: []httpapi.Point{{T: 1, RowsPerSec: 150}}},
	}
}

// SR13: `sfemu status` prints the page's tables from /v1/status; --watch
// redraws until interrupted.
func TestStatusCommand(t *testing.T) {
	var hits atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"reason":"UNAUTHORIZED"}`, http.StatusUnauthorized)
			return
		}
		hits.Add(1)
		_ = json.NewEncoder(w).Encode(fixedStatus())
	}))
	defer srv.Close()

	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"status", "--http", srv.Listener.Addr().String(), "--token", "tok"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"upstream embedded-grpc 127.0.0.1:2379",
		"adapter streaming epoch=3 rows=1234 ddls=2 buffered=5 restarts=1 checkpoint_lag=250ms",
		"  catch-up 50% (30.0s/60.0s) at 7.0s/s ETA 4s",
		"ingest 150 rows/s",
		"demo.products  992   357         3    6       469999999999999999  88ms      document=88ms text=200ms",
		"  demo.products: rebuild of generation 3 (serving 2) 30% (30%/100%) at 10%/s ETA 4s",
		"table:104  demo.products  3      2679      469999999999999999  88ms",
		"469999999999999990  demo.products  ADDITIVE  6       ALTER TABLE demo.products ADD COLUMN note VARCHAR(64)",
		"adapter restarted (epoch 3): table set changed",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in:\n%s", want, got)
		}
	}

	// The second redraw interrupts the watch (as Ctrl-C would).
	cw := &cancelAfter{clears: 2, cancel: cancel}
	if err := runStatus(ctx, cw, srv.URL, "tok", true, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(cw.buf.String(), "\033[H\033[2J"); n != 2 || hits.Load() != 3 {
		t.Fatalf("--watch drew %d times over %d requests", n, hits.Load())
	}
	if !strings.Contains(cw.buf.String(), "demo.products") {
		t.Fatalf("--watch output:\n%s", cw.buf.String())
	}

	root = newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"status", "--http", srv.Listener.Addr().String()})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("no token: %v", err)
	}
}

// cancelAfter cancels once it has seen clears screen clears.
type cancelAfter struct {
	buf    bytes.Buffer
	clears int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("\033[H\033[2J")) {
		if c.clears--; c.clears == 0 {
			c.cancel()
		}
	}
	return c.buf.Write(p)
}
