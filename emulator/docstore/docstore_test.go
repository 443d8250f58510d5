package docstore

import (
	"testing"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// E38: the guard within one batch sees the batch's own earlier writes, and
// nothing is visible before Commit.
func TestBatchVersionGuardAndCommit(t *testing.T) {
	s := New()
	b := s.NewBatch(4)
	if !b.Upsert("a", 10, map[string]*apiv1.Value{}, "table:1") {
		t.Fatal("first upsert")
	}
	if b.Upsert("a", 9, nil, "table:1") {
		t.Fatal("older upsert in same batch applied")
	}
	if !b.Delete("a", 10) {
		t.Fatal("delete at equal version of live doc must apply")
	}
	if b.Delete("a", 10) {
		t.Fatal("second delete at equal version applied")
	}
	if !b.Upsert("a", 10, nil, "table:2") {
		t.Fatal("re-insert at same ts after delete must apply")
	}
	if _, ok := s.Get("a"); ok {
		t.Fatal("visible before commit")
	}
	ch := b.Changes()
	if len(ch) != 1 || ch[0].Old != nil || ch[0].New.Deleted || ch[0].New.Partition != "table:2" {
		t.Fatalf("changes %+v", ch)
	}
	if b.Applied != 3 || b.Stale != 2 {
		t.Fatalf("applied %d stale %d", b.Applied, b.Stale)
	}
	s.Commit(b)
	if s.Live() != 1 || s.Tombstones() != 0 {
		t.Fatalf("live %d tombs %d", s.Live(), s.Tombstones())
	}
}

// E39: tombstones are collected in version order, only up to the horizon,
// and a rewritten key is not collected.
func TestCollectTombstones(t *testing.T) {
	s := New()
	b := s.NewBatch(3)
	b.Delete("x", 5)
	b.Delete("y", 7)
	b.Delete("z", 9)
	s.Commit(b)
	b = s.NewBatch(1)
	b.Upsert("y", 8, nil, "p") // y is live again
	s.Commit(b)
	if got := s.CollectTombstones(4); len(got) != 0 {
		t.Fatalf("collected below horizon: %v", got)
	}
	got := s.CollectTombstones(8)
	if len(got) != 1 || got[0] != "x" {
		t.Fatalf("collected %v", got)
	}
	if e, ok := s.Get("y"); !ok || e.Deleted {
		t.Fatal("rewritten key collected")
	}
	if s.Tombstones() != 1 {
		t.Fatalf("tombstones %d", s.Tombstones())
	}
	if keys := s.Keys(); len(keys) != 1 || keys[0] != "y" {
		t.Fatalf("keys %v", keys)
	}
}
