package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// H15, H3: with a token configured, the page's static files (/, /ui/*) are
// served without one (they carry no data), while /v1/status, other
// methods on those paths and every other path still need it; the page's
// script sends the token it is given as a bearer header and asks for one
// on a 401.
func TestStatusPageWithToken(t *testing.T) {
	h := start(t, Options{Token: "s3cret"})
	for _, p := range []string{"/", "/ui/app.js", "/ui/style.css"} {
		r := h.do("GET", p, "", "Authorization", "")
		require.Equal(t, 200, r.code, "%s: %s", p, r.body)
		require.Contains(t, r.header.Get("Content-Security-Policy"), "default-src 'self'", p)
	}
	r := h.do("HEAD", "/", "", "Authorization", "")
	require.Equal(t, 200, r.code)
	js := h.do("GET", "/ui/app.js", "", "Authorization", "").body
	for _, want := range []string{`"Bearer " + t`, "sessionStorage", "resp.status === 401", "token="} {
		require.True(t, strings.Contains(js, want), "app.js lacks %q", want)
	}
	page := h.do("GET", "/", "", "Authorization", "").body
	require.Contains(t, page, `id="login-form"`)

	requireErr(t, h.do("GET", "/v1/status", "", "Authorization", ""), 401, "UNAUTHORIZED")
	requireErr(t, h.do("GET", "/v1/status", "", "Authorization", "Bearer wrong"), 401, "UNAUTHORIZED")
	requireErr(t, h.do("POST", "/", "x", "Authorization", ""), 401, "UNAUTHORIZED")
	requireErr(t, h.do("GET", "/uix", "", "Authorization", ""), 401, "UNAUTHORIZED")
	requireErr(t, h.do("GET", "/metrics", "", "Authorization", ""), 401, "UNAUTHORIZED")
	require.Zero(t, h.fake.ncalls(), "a page asset or a rejected request touched the backend")

	r = h.do("GET", "/v1/status", "")
	require.Equal(t, 200, r.code, r.body)
}
