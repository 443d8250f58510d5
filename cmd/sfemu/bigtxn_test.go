package main

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinaryBigTransactionThroughMySQLFront is issue 15's reproduction:
// through the embedded upstream's MySQL front, BEGIN, INSERTs of 1,000
// rows each, COMMIT, while the demo workload runs. The process stays
// alive, every row is readable with min_ts at a later write, and
// /admin/check finds the collections equal to the upstream. By default
// 20k rows with --memory-quota 2MiB (the matcher and the reorder buffer
// spill); SFEMU_BIGTXN_MYSQL_ROWS=200000 runs the size, with
// SFEMU_BIGTXN_MYSQL_QUOTA (a --memory-quota value, e.g. 512MiB, the
// default) to choose the quota.
func TestBinaryBigTransactionThroughMySQLFront(t *testing.T) {
	t.Parallel() // its own process, data dir and ports
	rows, quota := 20_000, "2MiB"
	if n := os.Getenv("SFEMU_BIGTXN_MYSQL_ROWS"); n != "" {
		fmt.Sscan(n, &rows)
	}
	if q := os.Getenv("SFEMU_BIGTXN_MYSQL_QUOTA"); q != "" {
		quota = q
	}
	p, _ := startRun(t, t.TempDir(), "--rate", "20", "--memory-quota", quota)
	db, err := sql.Open("mysql", "root@tcp("+p.mysqlAddr+")/demo?interpolateParams=true")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	const base = 2_000_000
	var sb strings.Builder
	for from := 0; from < rows; from += 1000 {
		sb.Reset()
		sb.WriteString("INSERT INTO products (id, title, stock) VALUES ")
		for i := from; i < min(from+1000, rows); i++ {
			if i > from {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,'bulk row %d',%d)", base+i, i, i%50)
		}
		if _, err := tx.Exec(sb.String()); err != nil {
			t.Fatalf("insert rows from %d: %v", from, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	t.Logf("%d rows committed through the MySQL front in %s", rows, time.Since(start))
	// A write after the transaction: readable with min_ts only once the
	// whole transaction is (safe_ts passes it after its last batch).
	after := p.sql(fmt.Sprintf("INSERT INTO demo.products (id, title, stock) VALUES (%d, 'after the bulk', 0)", base+rows))
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if d := p.tryDoc("demo.products", fmt.Sprint(base+rows), after); strings.Contains(d, "after the bulk") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write after the transaction never became readable: %s", p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond) // poll interval (each try waits on min_ts itself)
	}
	t.Logf("safe after %s", time.Since(start))
	for _, id := range []int{0, rows / 2, rows - 1} {
		if d := p.doc("demo.products", fmt.Sprint(base+id), after); !strings.Contains(d, fmt.Sprintf("bulk row %d", id)) {
			t.Fatalf("row %d of the transaction: %q", id, d)
		}
	}
	p.check()
	if p.cmd.ProcessState != nil {
		t.Fatalf("sfemu exited: %s", p.stderr.String())
	}
	p.stop(syscall.SIGINT)
}

// tryDoc is doc that answers "" instead of failing when the min_ts wait
// ran out (the drain of a large transaction can take longer).
func (p *runProc) tryDoc(coll, pk string, minTs uint64) string {
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/collections/%s/docs/%s?min_ts=%d", p.httpAddr, coll, pk, minTs))
	if err != nil {
		return ""
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return ""
	}
	return string(raw)
}
