package adapter

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/snapshot"
	"github.com/searchfabric/sfemu/verify"
)

// TestLT6_DDLDuringAddedTableCopy (LT6): a TRUNCATE or DROP TABLE of a
// table committed while its copy (POST /admin/tables) runs: the copy
// still reads every row at S (GC held), and the DDL is applied after the
// copy as the stream would apply it — after TRUNCATE the collection equals
// the table at the final ts; after DROP the collection is dropped (E30)
// while the other table keeps streaming.
func TestLT6_DDLDuringAddedTableCopy(t *testing.T) {
	for _, ddl := range []string{"truncate", "drop"} {
		for _, wire := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wire=%v", ddl, wire), func(t *testing.T) {
				r := newAddRig(t, wire, 23)
				log := &syncWriter{w: &bytes.Buffer{}}
				var once sync.Once
				fired := false
				cfg := r.addConfig(t, log, func(snapshot.Task, int) error {
					once.Do(func() {
						fired = true
						if ddl == "truncate" {
							r.exec(t, "TRUNCATE TABLE shop.items")
							r.exec(t, "INSERT INTO shop.items VALUES (1, 1, 'after', 'truncate')")
						} else {
							r.exec(t, "DROP TABLE shop.items")
						}
					})
					return nil
				})
				a, err := Start(r.ctx, r.up, r.emu, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.Close() })
				if _, err := a.AddTable(r.ctx, "shop", "items"); err != nil {
					t.Fatal(err)
				}
				rows, err := a.WaitAdded(r.ctx, "shop", "items")
				if err != nil {
					t.Fatal(err)
				}
				if !fired {
					t.Fatal("the DDL did not run during the copy")
				}
				if int64(rows) != r.rows {
					t.Errorf("the copy read %d rows at S, the table held %d", rows, r.rows)
				}
				r.exec(t, fmt.Sprintf("INSERT INTO shop.other VALUES (%d, 2)", r.rng.Int63()))
				final, err := r.up.CurrentTs(r.ctx)
				if err != nil {
					t.Fatal(err)
				}
				tables := otherTables
				if ddl == "truncate" {
					tables = append(append([]TableRef{}, otherTables...), snapTables...)
				}
				if err := verify.WaitSafe(r.ctx, r.emu, tables, final, 60*time.Second); err != nil {
					t.Fatalf("%v\nlog:\n%s", err, log.String())
				}
				expectConsistent(t, r.ctx, r.up, r.emu, tables, final)
				if ddl == "drop" {
					deadline := time.Now().Add(60 * time.Second)
					for {
						st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: "shop.items"})
						if err != nil {
							t.Fatal(err)
						}
						if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED && st.GetDocCount() == 0 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("shop.items not dropped 60 s after the DROP: %v\nlog:\n%s", st, log.String())
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// hasField reports whether collection coll (not dropped) has field name.
func hasField(t *testing.T, r *snapRig, coll, name string) bool {
	t.Helper()
	st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: coll})
	if err != nil {
		return false
	}
	for _, f := range st.GetDefinition().GetFields() {
		if f.GetName() == name {
			return true
		}
	}
	return false
}

// waitFor polls cond every 10 ms for up to 60 s (a bound for a hang, not
// a speed assertion).
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestLT9_DDLScopeDuringAddedTableCopy (LT9): while an added table's copy
// runs (held at its first chunk by the hook), a DDL of another table
// (ALTER TABLE shop.other ADD COLUMN) is applied at once: the hook waits
// for shop.other's new field with the copy stopped, which a DDL waiting
// for every copy would never reach. A DDL of the copied table (ALTER
// TABLE shop.items ADD COLUMN) waits in OnDDL until the copy ends and is
// applied after it; both collections then equal their tables.
func TestLT9_DDLScopeDuringAddedTableCopy(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(fmt.Sprintf("wire=%v", wire), func(t *testing.T) {
			r := newAddRig(t, wire, 29)
			log := &syncWriter{w: &bytes.Buffer{}}
			var ad atomic.Pointer[Adapter]
			var once sync.Once
			var hookErr error
			cfg := r.addConfig(t, log, func(snapshot.Task, int) error {
				once.Do(func() {
					r.exec(t, "ALTER TABLE shop.other ADD COLUMN z INT DEFAULT 5")
					r.exec(t, "INSERT INTO shop.other (id, v) VALUES (1, 1)")
					if !waitFor(func() bool { return hasField(t, r, "shop.other", "z") }) {
						hookErr = errors.New("the DDL of shop.other was not applied while shop.items was copied")
						return
					}
					r.exec(t, "ALTER TABLE shop.items ADD COLUMN w INT DEFAULT 9")
					if !waitFor(func() bool { return ad.Load().live.ddlWaiting.Load() == 1 }) {
						hookErr = errors.New("the DDL of shop.items did not wait for its copy")
						return
					}
					if hasField(t, r, "shop.items", "w") {
						hookErr = errors.New("the DDL of shop.items was applied during its copy")
					}
				})
				return nil
			})
			a, err := Start(r.ctx, r.up, r.emu, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			ad.Store(a)
			if _, err := a.AddTable(r.ctx, "shop", "items"); err != nil {
				t.Fatal(err)
			}
			rows, err := a.WaitAdded(r.ctx, "shop", "items")
			if err != nil {
				t.Fatal(err)
			}
			if hookErr != nil {
				t.Fatalf("%v\nlog:\n%s", hookErr, log.String())
			}
			if int64(rows) != r.rows {
				t.Errorf("the copy read %d rows at S, the table held %d", rows, r.rows)
			}
			r.exec(t, "UPDATE shop.items SET w = 10 WHERE id = 1")
			final := r.exec(t, "INSERT INTO shop.other (id, v, z) VALUES (2, 2, 3)")
			all := append(append([]TableRef{}, otherTables...), snapTables...)
			if err := verify.WaitSafe(r.ctx, r.emu, all, final, 60*time.Second); err != nil {
				t.Fatalf("%v\nlog:\n%s", err, log.String())
			}
			expectConsistent(t, r.ctx, r.up, r.emu, all, final)
			if !hasField(t, r, "shop.items", "w") {
				t.Error("the DDL of shop.items was not applied after its copy")
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
