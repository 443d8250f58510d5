package schemastore

import (
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/model"
)

// SS61: Stats reports the last applied job's schema version and commit ts,
// the versions and events held (GC trims them), the live tables and the
// resolved and GC ts.
func TestStatsFollowHistoryAndGC(t *testing.T) {
	if (&Store{}).Stats() != (Stats{}) {
		t.Fatal("a store before RegisterKeyspace reports figures")
	}
	e := baseEnv(t)
	s0 := e.store.Stats()
	if s0.SchemaVersion != 0 || s0.LastDDLTs != 0 || s0.Tables != 2 || s0.TableVersions < 2 || s0.Events != 0 || s0.ResolvedTs != snapTs || s0.GCTs != snapTs {
		t.Fatalf("after the snapshot: %+v", s0)
	}
	e.apply(1100, withTable(job(1, model.ActionAddColumn, 10, 20, 2), tbl(20, "t", 3)))
	e.apply(1200, withTable(job(2, model.ActionAddColumn, 10, 20, 3), tbl(20, "t", 4)))
	s1 := e.store.Stats()
	if s1.SchemaVersion != 3 || s1.LastDDLTs != 1200 || s1.Tables != 2 || s1.TableVersions != s0.TableVersions+2 || s1.Events != 2 || s1.ResolvedTs != 1200 {
		t.Fatalf("after two jobs: %+v (snapshot %+v)", s1, s0)
	}
	if err := e.store.GC(1200); err != nil {
		t.Fatal(err)
	}
	s2 := e.store.Stats()
	if s2.GCTs != 1200 || s2.TableVersions != s0.TableVersions || s2.Events != 0 || s2.SchemaVersion != 3 {
		t.Fatalf("after GC at 1200: %+v", s2)
	}
}
