package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// H13 on the binary's own JSON endpoints: ?pretty indents, the status
// code and headers stay, ?pretty=false and no parameter are compact.
func TestPrettyJSONEndpoints(t *testing.T) {
	h := prettyJSON(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(sqlResponse{Error: "bad <sql>"})
	}))
	get := func(q string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/upstream/sql"+q, strings.NewReader(`{}`)))
		return rec
	}
	compact := get("")
	for _, q := range []string{"?pretty", "?pretty=true", "?pretty=1"} {
		rec := get(q)
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %v", q, rec.Code, rec.Header())
		}
		if !strings.Contains(rec.Body.String(), "{\n  \"") {
			t.Fatalf("%s not indented: %q", q, rec.Body.String())
		}
		var a, b map[string]any
		if json.Unmarshal(rec.Body.Bytes(), &a) != nil || json.Unmarshal(compact.Body.Bytes(), &b) != nil || a["error"] != b["error"] {
			t.Fatalf("%s changed the content: %q vs %q", q, rec.Body.String(), compact.Body.String())
		}
	}
	if got := get("?pretty=false").Body.String(); got != compact.Body.String() || strings.Count(got, "\n") != 1 {
		t.Fatalf("pretty=false: %q", got)
	}
}
