package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/emulator/contract"
)

// The status page (H15): one HTML file with its script and style, embedded
// in the binary (no fetch from anywhere but its own origin), drawing its
// tables and SVG plots from GET /v1/status, which it polls.
//
//go:embed ui
var uiFiles embed.FS

func registerPage(mux *http.ServeMux, b *Board) {
	ui, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(ui)
	mux.HandleFunc("GET /{$}", named("page", func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		http.ServeFileFS(w, r, ui, "index.html")
	}))
	mux.Handle("GET /ui/", named("page", func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		http.StripPrefix("/ui", files).ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /v1/status", named("status", func(w http.ResponseWriter, r *http.Request) {
		if !onlyParams(w, r.URL.Query()) {
			return
		}
		doc, err := b.Status(r.Context(), time.Now())
		if err != nil {
			writeBackendError(w, err)
			return
		}
		body, err := renderJSON(w, doc)
		if err != nil {
			writeError(w, http.StatusInternalServerError, &contract.Error{Reason: contract.ReasonInternal, Message: "encoding status: " + err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	}))
}

// pageAsset reports whether r asks for the status page's static files (the
// HTML at / and its script and style under /ui/), which carry no data and
// are the same in every binary: a browser cannot send a bearer token with a
// navigation, so they are served without one, and the page then sends the
// token the user gives it with its own fetches of /v1/status (H15). Only
// GET and HEAD; every other path, unknown ones included, stays behind the
// token (H3).
func pageAsset(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == "/" || (strings.HasPrefix(p, "/ui/") && !strings.Contains(p, ".."))
}

// pageHeaders keep the page on its own origin: scripts, styles and fetches
// from 'self' only (H15).
func pageHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
}
