package adapter

import (
	"sync"
	"testing"
	"time"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/snapshot"
)

// TestSN10_DropDuringSnapshot: a DROP TABLE committed while the table's
// snapshot runs does not affect the rows read at S (GC holds S), and the
// stream then applies the DROP as it would without a snapshot: the
// collection is dropped (N29, LT3: state DROPPED, no documents, E30), in place, without an adapter error.
func TestSN10_DropDuringSnapshot(t *testing.T) {
	for _, wire := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "wire"}[wire], func(t *testing.T) {
			r := newSnapRig(t, wire, 11, snapRows(t)/4)
			r.split(t, 4)
			var once sync.Once
			cfg := r.config(t, SnapshotConfig{Concurrency: 2, ChunkRows: 300, AfterChunk: func(snapshot.Task, int) error {
				once.Do(func() { r.exec(t, "DROP TABLE shop.items") })
				return nil
			}})
			sup, log := r.startSupervisor(t, cfg)
			first := sup.Adapter()
			deadline := time.Now().Add(60 * time.Second)
			for {
				st, err := r.emu.GetCollection(r.ctx, &apiv1.GetCollectionRequest{Name: "shop.items"})
				if err != nil {
					t.Fatal(err)
				}
				if st.GetState() == apiv1.CollectionState_COLLECTION_STATE_DROPPED {
					if n := st.GetDocCount(); n != 0 {
						t.Fatalf("dropped collection holds %d documents (E30)", n)
					}
					break
				}
				if e := sup.Err(); e != nil {
					t.Fatalf("supervisor stopped: %v", e)
				}
				if time.Now().After(deadline) {
					t.Fatalf("collection shop.items still exists 60 s after the DROP; log:\n%s", log.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if e := sup.Err(); e != nil || sup.Adapter() != first {
				t.Fatalf("after the DROP: supervisor error %v, adapter replaced %v", e, sup.Adapter() != first)
			}
			if err := sup.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
