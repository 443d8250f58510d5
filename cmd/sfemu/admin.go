package main

// The admin endpoints of `sfemu run`: restart the adapter, check the
// collections against the upstream.

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/searchfabric/sfemu/adapter"
	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/verify"
)

type restartResult struct {
	StartTs uint64 `json:"start_ts"`
	Epoch   uint64 `json:"epoch"`
	Err     string `json:"error,omitempty"`
}

// restartHandler serves POST /admin/restart-adapter: the run loop restarts
// the adapter and answers with its resume point.
func restartHandler(restarts chan<- chan restartResult, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(restartResult{Err: "missing or wrong bearer token"})
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			_ = json.NewEncoder(w).Encode(restartResult{Err: "use POST"})
			return
		}
		reply := make(chan restartResult, 1)
		select {
		case restarts <- reply:
		case <-r.Context().Done():
			return
		}
		res := <-reply
		if res.Err != "" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		_ = json.NewEncoder(w).Encode(res)
	})
}

type checkResult struct {
	Ts    uint64   `json:"ts"`
	OK    bool     `json:"ok"`
	Diffs []string `json:"diffs"`
	Err   string   `json:"error,omitempty"`
}

// checkHandler serves GET /admin/check: it takes the upstream's current
// ts, waits until every collection's safe_ts reaches it, and compares the
// collections with the tables read by snapshot at that ts through the
// adapter's own snapshot reader (verify.CheckNow; over gRPC in
// the embedded and real-cluster modes). The demo workload pauses
// meanwhile; writes sent through /upstream/sql during the check can show
// up as differences. Against a real cluster (retry) the tables are not
// paused: changes committed after the check's ts show up as differences,
// so a check that finds some is repeated at a fresh ts (up to 3 times)
// and reports the last one's.
func checkHandler(up *adapter.Upstream, emu *emulator.Emulator, tables func() []adapter.TableRef, pause *sync.Mutex, token string, retry bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(checkResult{Err: "missing or wrong bearer token"})
			return
		}
		pause.Lock()
		defer pause.Unlock()
		ctx := r.Context()
		attempts := 1
		if retry {
			attempts = 3
		}
		var res checkResult
		for i := 0; i < attempts; i++ {
			res = checkOnce(ctx, up, emu, tables())
			if res.OK || res.Err != "" {
				break
			}
		}
		if res.Err != "" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		_ = json.NewEncoder(w).Encode(res)
	})
}

// noWriteTimeout lifts the server's write timeout (2 minutes, for the
// API's bounded waits) from one handler's responses: a consistency check
// of millions of rows takes as long as it takes (SR3). A client that
// gives up closes the connection, which cancels the request's context
// and so the check.
func noWriteTimeout(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		h.ServeHTTP(w, r)
	})
}

func checkOnce(ctx context.Context, up *adapter.Upstream, emu *emulator.Emulator, tables []adapter.TableRef) checkResult {
	ts, diffs, err := verify.CheckNow(ctx, up.Clock(), up.Snapshot(), emu, tables, 30*time.Second)
	res := checkResult{Ts: ts, OK: err == nil && len(diffs) == 0, Diffs: []string{}}
	for _, d := range diffs {
		res.Diffs = append(res.Diffs, d.String())
	}
	if err != nil {
		res.Err = err.Error()
	}
	return res
}
