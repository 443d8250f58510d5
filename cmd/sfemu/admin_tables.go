package main

// /admin/tables: the table set of the running adapter, changed while it
// runs (specs/tableset.md LT5).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/adapter"
)

type tablesRequest struct {
	Add    []string `json:"add"`
	Remove []string `json:"remove"`
}

type tablesResult struct {
	// Tables are the tables mirrored after the request.
	Tables  []string           `json:"tables"`
	Added   map[string][]int64 `json:"added,omitempty"`
	Removed map[string][]int64 `json:"removed,omitempty"`
	Err     string             `json:"error,omitempty"`
}

// tablesHandler serves GET /admin/tables (the mirrored tables) and POST
// /admin/tables {"add": ["db.t"], "remove": ["db.u"]}: each change is
// applied in order by the running adapter (current, re-read per request:
// /admin/restart-adapter replaces it) without a restart. The first error
// stops the request with 400, naming the table; what was applied before
// it is listed.
func tablesHandler(current func() *adapter.Adapter, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		reply := func(code int, res tablesResult) {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(res)
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			reply(http.StatusUnauthorized, tablesResult{Err: "missing or wrong bearer token"})
			return
		}
		a := current()
		if a == nil {
			reply(http.StatusServiceUnavailable, tablesResult{Err: "the adapter is not running"})
			return
		}
		res := tablesResult{}
		names := func() []string {
			var out []string
			for _, t := range a.MirroredTables() {
				out = append(out, t.String())
			}
			return out
		}
		switch r.Method {
		case http.MethodGet:
			res.Tables = names()
			reply(http.StatusOK, res)
			return
		case http.MethodPost:
		default:
			reply(http.StatusMethodNotAllowed, tablesResult{Err: "use GET or POST"})
			return
		}
		var req tablesRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply(http.StatusBadRequest, tablesResult{Err: fmt.Sprintf(`body: %v (want {"add": ["db.table"], "remove": ["db.table"]})`, err)})
			return
		}
		if len(req.Add)+len(req.Remove) == 0 {
			reply(http.StatusBadRequest, tablesResult{Err: `nothing to do: give "add" and/or "remove"`})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		fail := func(err error) {
			res.Err = err.Error()
			res.Tables = names()
			reply(http.StatusBadRequest, res)
		}
		for _, name := range req.Remove {
			db, table, err := splitTableName(name)
			if err != nil {
				fail(err)
				return
			}
			ids, err := a.RemoveTable(ctx, db, table)
			if err != nil {
				fail(err)
				return
			}
			if res.Removed == nil {
				res.Removed = map[string][]int64{}
			}
			res.Removed[name] = ids
		}
		for _, name := range req.Add {
			db, table, err := splitTableName(name)
			if err != nil {
				fail(err)
				return
			}
			ids, err := a.AddTable(ctx, db, table)
			if err != nil {
				fail(err)
				return
			}
			if res.Added == nil {
				res.Added = map[string][]int64{}
			}
			res.Added[name] = ids
		}
		res.Tables = names()
		reply(http.StatusOK, res)
	})
}

// splitTableName parses db.table.
func splitTableName(s string) (string, string, error) {
	db, table, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok || db == "" || table == "" || strings.Contains(table, ".") {
		return "", "", fmt.Errorf("%q is not db.table", s)
	}
	return db, table, nil
}

// currentAdapter is the adapter the status view knows is running (nil
// while none is).
func (v *statusView) currentAdapter() *adapter.Adapter {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sup == nil {
		return nil
	}
	return v.sup.Adapter()
}
