package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzSearchBody: any body and path key gets a JSON answer with a 2xx/4xx
// status (or the mux's redirect of an unclean path); nothing panics or
// becomes a 500.
func FuzzSearchBody(f *testing.F) {
	f.Add(`{"text":{"query":"x"}}`, "1")
	f.Add(`{"vector":{"field":"e","vector":[1e39,"NaN"]}}`, "a%2Fb")
	f.Add(`{"limit":-1}`, "")
	f.Add("\xff\xfe", "%zz")
	f.Add(`{"filters":[{"op":"NOPE"}]}`, "../..")
	fake := &fakeBackend{docs: nil}
	h, err := New(Options{Backend: fake, MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, key string) {
		for _, req := range []*http.Request{
			httptest.NewRequest("POST", "/v1/collections/books/search", strings.NewReader(body)),
			newGet("/v1/collections/books/docs/" + key),
		} {
			if req == nil {
				continue
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code >= 500 && w.Code != 503 {
				t.Fatalf("%s %s: status %d body %s", req.Method, req.URL, w.Code, w.Body)
			}
			if w.Code == http.StatusMovedPermanently || w.Code == http.StatusTemporaryRedirect || w.Code == http.StatusPermanentRedirect {
				continue // ServeMux redirects unclean paths ("a/../b") to their clean form
			}
			if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("non-JSON answer %q", w.Header().Get("Content-Type"))
			}
		}
	})
}

// newGet builds a GET request, or nil when the path is not a valid URL.
func newGet(path string) (r *http.Request) {
	defer func() {
		if recover() != nil {
			r = nil
		}
	}()
	return httptest.NewRequest("GET", path, nil)
}
