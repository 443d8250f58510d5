package main

// GET /v1/progress/snapshot: the initial snapshot's progress per table
// (specs/sfemu-run.md SN8), served while the snapshot runs (the HTTP API
// is up before the adapter starts) and afterwards (every table "done").

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/searchfabric/sfemu/snapshot"
)

// snapshotProgressDoc is the answer of GET /v1/progress/snapshot.
type snapshotProgressDoc struct {
	// Active: some table is still being read.
	Active bool                     `json:"active"`
	Tables []snapshot.TableProgress `json:"tables"`
}

func snapshotProgressHandler(p *snapshot.Progress, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "use GET"})
			return
		}
		doc := snapshotProgressDoc{Active: p.Active(), Tables: p.Report(time.Now())}
		_ = json.NewEncoder(w).Encode(doc)
	})
}
