package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/searchfabric/sfemu/adapter"
)

// sqlRequest / sqlResponse are the body of POST /upstream/sql: one or more
// statements (separated by ';') run on a fresh session of the embedded
// upstream's SQL front.
type sqlRequest struct {
	SQL string `json:"sql"`
}

type sqlResponse struct {
	RowsAffected int    `json:"rows_affected"`
	CommitTs     uint64 `json:"commit_ts"`
	DDL          bool   `json:"ddl"`
	Error        string `json:"error,omitempty"`
}

func sqlHandler(up *adapter.Upstream, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(sqlResponse{Error: "missing or wrong bearer token"})
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			_ = json.NewEncoder(w).Encode(sqlResponse{Error: "use POST with {\"sql\": \"...\"}"})
			return
		}
		var req sqlRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || strings.TrimSpace(req.SQL) == "" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(sqlResponse{Error: fmt.Sprintf("body must be {\"sql\": \"...\"}: %v", err)})
			return
		}
		res, err := up.SQL.NewSession("").Exec(r.Context(), req.SQL)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(sqlResponse{Error: err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(sqlResponse{RowsAffected: res.RowsAffected, CommitTs: res.CommitTs, DDL: res.DDL})
	})
}

func newSQLCmd() *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:   `sql "<statements>"`,
		Short: "run SQL on the embedded upstream of a running `sfemu run`",
		Long: `Sends the statements to POST /upstream/sql of a running "sfemu run" and prints
the result, including the commit ts: pass it as min_ts to a search to read
your own write.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, _ := json.Marshal(sqlRequest{SQL: args[0]})
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, "http://"+addr+"/upstream/sql", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				return fmt.Errorf("is `sfemu run` running on %s? %w", addr, err)
			}
			defer resp.Body.Close()
			var out sqlResponse
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				return fmt.Errorf("reading the answer: %w", err)
			}
			if out.Error != "" {
				return fmt.Errorf("%s", out.Error)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: rows_affected=%d commit_ts=%d ddl=%v\n", out.RowsAffected, out.CommitTs, out.DDL)
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "http", "127.0.0.1:8080", "address of the running sfemu's HTTP API")
	cmd.Flags().StringVar(&token, "token", "", "bearer token, when sfemu run was given one")
	return cmd
}
