package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	rebuildLineRE   = regexp.MustCompile(`^sfemu: demo\.products: rebuild of generation (\d+) \(serving (\d+)\) \d+% \(\d+%/100%\) at \d+%/s ETA `)
	rebuildStatusRE = regexp.MustCompile(`demo\.products\(safe_ts_lag=[0-9.a-zµ]+ rebuilding gen=(\d+) \d+% serving=(\d+)\)`)
)

// H17, SR13 (issue 18 item 2): `sfemu run` prints a rebuild's progress
// line after its status line while the rebuild runs, and its status line
// shows the collection as rebuilding with the safe_ts lag it holds (never
// a lag from a zero safe_ts). The table is made big enough (51,200 rows)
// that re-indexing its text spans many 100 ms status intervals.
func TestBinaryProgressLines(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	p, _ := startRun(t, t.TempDir(), "--rate", "0", "--status-interval", "100ms")
	defer p.stop(syscall.SIGINT)

	var vals []string
	for i := 1; i <= 100; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 'progress lamp %d', 'a warm reading lamp with a linen shade, number %d', %d)", i, i, i, i))
	}
	p.sql("INSERT INTO demo.products (id, title, description, stock) VALUES " + strings.Join(vals, ", "))
	n := 100
	var ts uint64
	for n < 51200 {
		ts = p.sql(fmt.Sprintf("INSERT INTO demo.products (id, title, description, stock) SELECT id + %d, title, description, stock FROM demo.products", n))
		n *= 2
	}
	waitDoc(t, p, "demo.products", "51200", ts)

	p.sql("ALTER TABLE demo.products DROP COLUMN updated_at")
	var sawLine, sawStatus bool
	deadline := time.Now().Add(2 * time.Minute)
	for !(sawLine && sawStatus) {
		if time.Now().After(deadline) {
			t.Fatalf("no rebuild progress within 2 minutes: progress line %v, status line %v", sawLine, sawStatus)
		}
		l := p.next("a rebuild's progress")
		if m := rebuildLineRE.FindStringSubmatch(l); m != nil {
			if m[1] == m[2] {
				t.Fatalf("rebuild serving its own generation: %q", l)
			}
			sawLine = true
		}
		if m := rebuildStatusRE.FindStringSubmatch(l); m != nil {
			sawStatus = true
		}
		if strings.Contains(l, "rows/s=") && strings.Contains(l, "demo.products(") && !strings.Contains(l, "demo.products(safe_ts_lag=") {
			t.Fatalf("status line without the collection's safe_ts lag: %q", l)
		}
	}
}

// waitDoc waits until a document is readable at min_ts (the min_ts wait
// itself is bounded, so a large ingest is waited for in rounds).
func waitDoc(t *testing.T, p *runProc, coll, pk string, minTs uint64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/collections/%s/docs/%s?min_ts=%d", p.httpAddr, coll, pk, minTs))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return
		case http.StatusServiceUnavailable: // NOT_YET_FRESH: ask again
		default:
			t.Fatalf("GET doc %s/%s at min_ts %d: %d %s", coll, pk, minTs, resp.StatusCode, raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("doc %s/%s not readable at min_ts %d after 3 minutes", coll, pk, minTs)
		}
	}
}
