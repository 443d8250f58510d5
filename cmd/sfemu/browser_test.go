package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browserPath finds Debian's chromium (.ci/run installs it when missing).
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the status page's browser test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)")
	return ""
}

// H15, SR13: the status page in a real browser against a running demo
// started with --token: the page asks for the token (a wrong one is
// refused, the right one opens it), then it loads with no console error
// (but the expected 401s of /v1/status before the token), shows both demo
// collections with documents, its lag plot gets points, and a DDL sent
// through /upstream/sql shows up in its DDL list; a second tab opened at
// /#token=<token> shows the status at once and drops the fragment. A screenshot is kept in the test's temp dir (and copied to
// $SFEMU_STATUS_SCREENSHOT when set, which is how docs/status-page.png is
// made) and checked not to be blank.
func TestStatusPageInBrowser(t *testing.T) {
	t.Parallel() // its own process, browser, data dir and ports
	exe := browserPath(t)
	const token = "browser-s3cret"
	// No demo DDLs: the board keeps one row per collection per sampling
	// period (the later change), so a demo DDL landing in the same second
	// as this test's would hide the row it waits for.
	p, _ := startRun(t, t.TempDir(), "--token", token, "--ddl-every", "0")
	defer p.stop(syscall.SIGINT)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	var mu sync.Mutex
	var consoleErrs []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, fmt.Sprint(a.Value), a.Description)
				}
				consoleErrs = append(consoleErrs, fmt.Sprintf("console.%s %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			consoleErrs = append(consoleErrs, fmt.Sprintf("exception: %s at %s:%d:%d", d.Text, d.URL, d.LineNumber, d.ColumnNumber))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				consoleErrs = append(consoleErrs, fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}
	// The listener is there from the tab's first message: no console
	// error of the page's load escapes it. chromedp enables the Runtime and
	// Log domains itself.
	ctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithListener(listen))
	defer cancelBrowser()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	url := "http://" + p.httpAddr + "/"
	// No token yet: /v1/status answers 401 and the page shows its form.
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`#login-form`))); err != nil {
		t.Fatalf("loading %s: the token form: %v", url, err)
	}
	submit := func(tok string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#login-token`), tok), chromedp.Click(chromedp.CSS(`#login-form button`))); err != nil {
			t.Fatalf("submitting the token form: %v", err)
		}
	}
	submit("wrong-token")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById("login").hidden && document.getElementById("login-why").textContent.includes("refused")`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("a wrong token was not refused: %v", err)
	}
	submit(token)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"]`))); err != nil {
		t.Fatalf("the status after the right token: %v", err)
	}
	// The only console errors so far are the browser's own lines for the
	// two 401s of /v1/status (no token, the wrong one).
	mu.Lock()
	for _, e := range consoleErrs {
		if !strings.Contains(e, "401") || !strings.Contains(e, "/v1/status") {
			t.Errorf("console error before the token: %s", e)
		}
	}
	consoleErrs = nil
	mu.Unlock()

	// waitFor evaluates js until it returns true.
	waitFor := func(what, js string, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
				t.Fatalf("the page never showed %s; it shows:\n%s", what, body)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	waitFor("both demo collections with documents", `(() => {
		const rows = Array.from(document.querySelectorAll("#collections tbody tr"));
		const docs = Object.fromEntries(rows.map((tr) => [tr.cells[0].textContent, Number(tr.cells[1].textContent.replace(/,/g, ""))]));
		return docs["demo.products"] > 0 && docs["demo.events"] > 0;
	})()`, 60*time.Second)
	waitFor("points in the lag plot", `Number(document.getElementById("plot-lag").dataset.points || 0) >= 3 &&
		document.querySelectorAll("#plot-lag polyline").length >= 2`, 60*time.Second)
	waitFor("the adapter streaming", `document.querySelector("#adapter .state").textContent === "streaming"`, 30*time.Second)

	ts := sqlWithToken(t, p.httpAddr, token, "ALTER TABLE demo.products ADD COLUMN browser_note VARCHAR(16)")
	waitFor("the DDL in the DDL list", fmt.Sprintf(`Array.from(document.querySelectorAll("#ddls tbody tr")).some((tr) =>
		tr.cells[0].textContent === %q && tr.cells[1].textContent === "demo.products" &&
		tr.cells[2].textContent === "ADDITIVE" && tr.cells[4].textContent.includes("browser_note"))`, strconv.FormatUint(ts, 10)), 30*time.Second)

	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "status-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	checkNotBlank(t, shot)
	if out := os.Getenv("SFEMU_STATUS_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A second tab (its own sessionStorage) given the token in the
	// fragment: no form, the status at once, the fragment dropped.
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(url+"#token="+token), chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"]`))); err != nil {
		t.Fatalf("opening %s#token=...: %v", url, err)
	}
	hash, err := chromedp.Run(tab, chromedp.Evaluate[string](`location.hash`))
	if err != nil {
		t.Fatal(err)
	}
	if hash != "" {
		t.Errorf("the token stayed in the address: %q", hash)
	}
	if formShown, err := chromedp.Run(tab, chromedp.Evaluate[bool](`!document.getElementById("login").hidden`)); err != nil || formShown {
		t.Errorf("the token form showed with a token in the fragment (%v)", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrs) > 0 {
		t.Fatalf("console errors on the status page:\n%s", strings.Join(consoleErrs, "\n"))
	}
}

// sqlWithToken runs a statement through POST /upstream/sql of a run
// started with --token and returns its commit ts.
func sqlWithToken(t *testing.T, addr, token, stmt string) uint64 {
	t.Helper()
	body, _ := json.Marshal(sqlRequest{SQL: stmt})
	req, err := http.NewRequest("POST", "http://"+addr+"/upstream/sql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var sr sqlResponse
	if err := json.Unmarshal(raw, &sr); err != nil || resp.StatusCode != 200 || sr.CommitTs == 0 {
		t.Fatalf("/upstream/sql %q: %d %s", stmt, resp.StatusCode, raw)
	}
	return sr.CommitTs
}

// checkNotBlank decodes the screenshot and wants a page, not one color:
// many distinct colors and a good share of non-background pixels.
func checkNotBlank(t *testing.T, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() < 800 || b.Dy() < 600 {
		t.Fatalf("screenshot is %v", b)
	}
	bg := img.At(b.Min.X, b.Min.Y)
	colors := map[[4]uint32]bool{}
	differ, total := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			c := img.At(x, y)
			r, g, bl, a := c.RGBA()
			colors[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}] = true
			if !sameColor(c, bg) {
				differ++
			}
			total++
		}
	}
	if len(colors) < 50 || differ*100 < total*5 {
		t.Fatalf("screenshot looks blank: %d colors, %d of %d pixels differ from the background", len(colors), differ, total)
	}
}

func sameColor(a, b interface{ RGBA() (r, g, b, a uint32) }) bool {
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}
