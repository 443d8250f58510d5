package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSR3_CheckOutlivesTheWriteTimeout (specs/sfemu-run.md SR3): behind a
// server whose write timeout passes while the handler still works (as a
// check of millions of rows outlives the API server's 2 minutes), the
// /admin/check wrapper still delivers the answer; without it the client
// gets an empty reply.
func TestSR3_CheckOutlivesTheWriteTimeout(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // the work outlives the 50 ms write timeout
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	srv := httptest.NewUnstartedServer(noWriteTimeout(slow))
	srv.Config.WriteTimeout = 50 * time.Millisecond
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/admin/check")
	if err != nil {
		t.Fatalf("the check's answer was lost to the write timeout (SR3): %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != `{"ok":true}` {
		t.Fatalf("answer %q, %v; want the handler's (SR3)", body, err)
	}
}
