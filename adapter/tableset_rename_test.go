package adapter

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/verify"
)

// TestLT7_MultiRename (LT7, LT3, LT6): one RENAME TABLE statement moves
// one followed table out of the filter, one table holding rows into it
// and renames a followed table inside it. The first keeps its collection
// as of the rename, the second is copied at the rename and followed
// after it, the third keeps feeding its collection (N3).
func TestLT7_MultiRename(t *testing.T)      { testMultiRename(t, false) }
func TestLT7_Wire_MultiRename(t *testing.T) { testMultiRename(t, true) }

func testMultiRename(t *testing.T, wire bool) {
	r := newShopRig(t, wire)
	var log bytes.Buffer
	var logMu sync.Mutex
	r.exec("CREATE DATABASE archive")
	r.exec("CREATE TABLE archive.old (id BIGINT PRIMARY KEY, title VARCHAR(10))")
	for i := 1; i <= 30; i++ {
		r.exec(fmt.Sprintf("INSERT INTO archive.old VALUES (%d, 't%d')", i, i))
	}
	a := startFiltered(t, r, "shop.*", &log, &logMu)
	for i := 1; i <= 5; i++ {
		r.exec("INSERT INTO shop.products VALUES " + typedRow(r.rng, i))
		r.exec(fmt.Sprintf("INSERT INTO shop.orders VALUES (%d, 1.5, 'o', NULL)", i))
	}
	renamed := r.exec("RENAME TABLE shop.products TO archive.products, archive.old TO shop.old2, shop.orders TO shop.orders2")
	r.exec("UPDATE shop.old2 SET title = 'after' WHERE id = 3")
	r.exec("DELETE FROM shop.old2 WHERE id = 4")
	r.exec("INSERT INTO shop.old2 VALUES (100, 'new')")
	r.exec("INSERT INTO archive.products VALUES " + typedRow(r.rng, 50))
	final := r.exec("INSERT INTO shop.orders2 VALUES (9, 2.5, 'x', NULL)")

	// shop.orders2 still feeds collection shop.orders (N3); shop.old2 is
	// copied at the rename and streamed after it.
	live := []TableRef{{DB: "shop", Table: "old2"}, {DB: "shop", Table: "orders2", Collection: "shop.orders"}}
	if err := verify.WaitSafe(r.ctx, r.emu, live, final, 30*time.Second); err != nil {
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%v (runtime: %v) feed %v\n%s", err, a.RT.Err(), a.feed.stop(), log.String())
	}
	expectConsistent(t, r.ctx, r.up, r.emu, live, final)
	expectConsistent(t, r.ctx, r.up, r.emu, []TableRef{{DB: "shop", Table: "products"}}, renamed-1)
	if !collectionExists(t, r, "shop.products") {
		t.Fatal("the collection of the table renamed out was dropped, want it kept (LT3)")
	}
	if got := fmt.Sprint(a.MirroredTables()); got != "[shop.old2 shop.orders2]" {
		t.Errorf("mirrored tables %s, want [shop.old2 shop.orders2]", got)
	}
	logMu.Lock()
	if !strings.Contains(log.String(), "outside --tables") || !strings.Contains(log.String(), "renamed into the filter") {
		t.Errorf("log lines for the renames missing:\n%s", log.String())
	}
	logMu.Unlock()
}
