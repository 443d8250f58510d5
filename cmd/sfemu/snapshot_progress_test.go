package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/snapshot"
)

// TestSN8_ProgressEndpointAndFlags: GET /v1/progress/snapshot answers the
// snapshot's per-table progress behind the token; --snapshot and
// --snapshot-concurrency parse (auto is the default) and bad values are
// refused naming the flag (SN1, SN4).
func TestSN8_ProgressEndpointAndFlags(t *testing.T) {
	p := &snapshot.Progress{}
	p.Begin(&snapshot.State{Version: snapshot.StateVersion, Ts: 42, Tables: []snapshot.Table{
		{Name: "shop.items", Collection: "shop.items", PhysicalID: 7, Ranges: []snapshot.Range{{Start: []byte("a"), End: []byte("b")}, {Start: []byte("b"), End: []byte("c")}}}}}, nowForTest())
	h := snapshotProgressHandler(p, "secret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/progress/snapshot", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/progress/snapshot", nil)
	req.Header.Set("Authorization", "Bearer secret")
	h.ServeHTTP(rec, req)
	var doc snapshotProgressDoc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Active || len(doc.Tables) != 1 || doc.Tables[0].Table != "shop.items" || doc.Tables[0].Ts != 42 || doc.Tables[0].RangesTotal != 2 || doc.Tables[0].State != "waiting" {
		t.Fatalf("progress %s", rec.Body.String())
	}

	cfg := defaultRunConfig()
	sc, err := cfg.snapshotConfig()
	if err != nil || sc.Mode != adapter.SnapshotAuto || sc.Concurrency != 4 {
		t.Fatalf("default snapshot config %+v (%v)", sc, err)
	}
	for _, bad := range []runConfig{{Snapshot: "sometimes", SnapshotConc: 4}, {Snapshot: "never", SnapshotConc: 0}} {
		if _, err := bad.snapshotConfig(); err == nil || !strings.Contains(err.Error(), "--snapshot") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func nowForTest() (t0 time.Time) { return time.Unix(1000, 0) }
