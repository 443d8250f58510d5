package schemastore

import (
	"sync"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// TestMutatingReturnedValuesCannotCorruptStore (rule SS40): a caller that
// writes into a TableInfo from GetTableInfo or into fetched DDL events does
// not change the history the store derives later DDLs from, the events it
// returns, or what it persists.
func TestMutatingReturnedValuesCannotCorruptStore(t *testing.T) {
	e := baseEnv(t)
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))

	// vandalize everything we were handed
	ti := e.info(20, 1100)
	ti.Name = model.NewCIStr("vandal")
	ti.Columns[0].Name = model.NewCIStr("vandal")
	ti.Columns = ti.Columns[:1]
	pti := e.info(31, snapTs)
	pti.Partition.Definitions[0].ID = 999
	pti.ID = 999
	evs := e.events(snapTs)
	evs[0].TableInfo.Name.O = "vandal"
	evs[0].TableInfo.Columns[1].ID = 999

	// events come back intact
	if ev := e.events(snapTs)[0]; ev.TableInfo.Name.O != "t" || ev.TableInfo.Columns[1].ID != 2 {
		t.Errorf("fetched event changed by a caller: %s %d", ev.TableInfo.Name.O, ev.TableInfo.Columns[1].ID)
	}
	// a rename derives the old name from the store's private copy
	e.apply(1200, withTable(job(2, model.ActionRenameTable, 10, 20, 3), tbl(20, "t2", 3)))
	if ev := e.events(1100)[0]; ev.ExtraTableName != "t" {
		t.Errorf("rename saw the caller's mutation: old name %q", ev.ExtraTableName)
	}
	// dropping the partitioned table uses the private partition ids
	e.apply(1300, job(3, model.ActionDropTable, 10, 30, 4))
	if ev := e.events(1200)[0]; len(ev.NeedDroppedTables) != 3 || ev.NeedDroppedTables[0] != 31 {
		t.Errorf("drop saw the caller's mutation: %v", ev.NeedDroppedTables)
	}
	// what is on disk is what the store had, not what callers wrote
	e.cfg.Snapshot = nil
	e.reopen()
	if got := e.info(20, 1100); got.Name.O != "t" || colNames(got) != "id,c1,c2,c3" {
		t.Errorf("persisted version changed by a caller: %s %s", got.Name.O, colNames(got))
	}
	if got := e.info(31, snapTs); got.ID != 30 || got.Partition.Definitions[0].ID != 31 {
		t.Errorf("persisted partitioned table changed by a caller: %d", got.ID)
	}
}

// TestConcurrentLookupsDuringIngestion exercises the locking under -race:
// readers poll while DDLs are applied and persisted.
//
// Rule SS45: readers at the published resolved ts always find the versions
// applied (and persisted) below it while newer ones are being applied.
func TestConcurrentLookupsDuringIngestion(t *testing.T) {
	e := baseEnv(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, err := e.store.GetTableDDLEventState(20)
				if err != nil {
					t.Error(err)
					return
				}
				ti, err := e.store.GetTableInfo(20, st.ResolvedTs)
				if err != nil {
					t.Error(err)
					return
				}
				_ = ti.ColumnByID(1)
				if _, _, err := e.store.FetchTableTriggerDDLEvents(snapTs, 3); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 1; i <= 30; i++ {
		ts := uint64(1000 + 10*i)
		e.apply(ts, withTable(job(int64(i), model.ActionAddColumn, 10, 20, int64(i+1)), tbl(20, "t", 2+i)))
	}
	close(stop)
	wg.Wait()
	if n := len(e.info(20, 1300).Columns); n != 33 {
		t.Errorf("%d columns", n)
	}
}

// TestSharedVersionPointers: repeated lookups of one version return the same
// shared value (callers may cache decoders by pointer), partitions of one
// table share it, and a new DDL yields a new value.
func TestSharedVersionPointers(t *testing.T) {
	e := baseEnv(t)
	a, b := e.info(31, snapTs), e.info(32, snapTs)
	if a != b || a != e.info(31, snapTs) {
		t.Error("one version of a partitioned table is not one shared value")
	}
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 30, 2), withParts(tbl(30, "pt", 2), 31, 32, 33)))
	if c := e.info(31, 1100); c == a || len(c.Columns) != 3 || e.info(31, 1099) != a {
		t.Error("a DDL must produce a new value and keep the old one for older ts")
	}
}
