package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// prettyJSON gives the binary's own JSON endpoints (/upstream/sql,
// /admin/check, /admin/restart-adapter) the API's ?pretty (H13): with
// ?pretty or ?pretty=true the JSON body is indented; the handler itself
// writes it compact.
func prettyJSON(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vs, ok := r.URL.Query()["pretty"]
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		if v := vs[len(vs)-1]; v != "" {
			if b, err := strconv.ParseBool(v); err != nil || !b {
				h.ServeHTTP(w, r) // pretty=false, or a value the handler ignores
				return
			}
		}
		rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		body := rec.body.Bytes()
		var out bytes.Buffer
		if json.Indent(&out, body, "", "  ") == nil {
			out.WriteByte('\n')
			body = out.Bytes()
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.code)
		_, _ = w.Write(body)
	})
}

// bufferedResponse holds a handler's answer until it is indented.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
