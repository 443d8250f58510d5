package adapter

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/verify"
)

// TestLT8_EmptyStartSet: a filter that selects no table at the start
// (shop.order_* here: shop holds other tables) starts an adapter with an
// empty set (M3, M53). It follows the DDL stream: a DDL of another table
// passes, a matching table created later is mirrored from its first row,
// through an ADD COLUMN, and a second one joins the first; the runtime
// never restarts. Without a filter an empty set is still refused.
func TestLT8_EmptyStartSet(t *testing.T)      { testEmptyStartSet(t, false) }
func TestLT8_Wire_EmptyStartSet(t *testing.T) { testEmptyStartSet(t, true) }

func testEmptyStartSet(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	if _, err := Start(r.ctx, r.up, r.emu, Config{DataDir: t.TempDir()}); err == nil {
		t.Fatal("an empty set without a filter started")
	}
	var log bytes.Buffer
	var logMu sync.Mutex
	a := startFiltered(t, r, "shop.order_*", &log, &logMu)
	rt := a.RT
	if got := a.MirroredTables(); len(got) != 0 {
		t.Fatalf("mirrored at the start: %v", got)
	}
	r.exec("ALTER TABLE shop.orders ADD COLUMN x INT") // not selected: passes the unbounded fence
	r.exec("CREATE TABLE shop.order_lines (id BIGINT PRIMARY KEY, v VARCHAR(20))")
	r.exec("INSERT INTO shop.order_lines VALUES (1, 'first')")
	for i := 2; i <= 12; i++ {
		r.exec(fmt.Sprintf("INSERT INTO shop.order_lines (id, v) VALUES (%d, 'v%d')", i, i))
		if i == 6 {
			r.exec("ALTER TABLE shop.order_lines ADD COLUMN n INT DEFAULT 3")
		}
	}
	r.exec("CREATE TABLE shop.order_notes (id BIGINT PRIMARY KEY, note TEXT)")
	r.exec("INSERT INTO shop.order_notes VALUES (1, 'hello')")
	r.exec("DELETE FROM shop.order_lines WHERE id = 2")
	final := r.exec("UPDATE shop.order_lines SET v = 'last' WHERE id = 12")

	tables := []TableRef{{DB: "shop", Table: "order_lines"}, {DB: "shop", Table: "order_notes"}}
	if err := verify.WaitSafe(r.ctx, r.emu, tables, final, 30*time.Second); err != nil {
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%v (runtime: %v; log:\n%s)", err, rt.Err(), log.String())
	}
	expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
	if collectionExists(t, r, "shop.orders") {
		t.Error("shop.orders is not selected but got a collection")
	}
	if a.RT != rt || rt.Err() != nil {
		t.Fatalf("the runtime changed or stopped: %v", rt.Err())
	}
	if got := fmt.Sprint(a.MirroredTables()); got != fmt.Sprint(tables) {
		t.Errorf("mirrored tables %s, want %s", got, fmt.Sprint(tables))
	}
}
