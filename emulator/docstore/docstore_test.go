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
	if b.Delete("a", 10) {
		t.Fatal("delete at the equal version of a live doc applied (E38: stale)")
	}
	if b.Delete("a", 9) {
		t.Fatal("older delete applied")
	}
	if !b.Upsert("a", 10, nil, "table:2") {
		t.Fatal("upsert at the same version must replace")
	}
	if _, ok := s.Get("a"); ok {
		t.Fatal("visible before commit")
	}
	ch := b.Changes()
	if len(ch) != 1 || ch[0].Old != nil || ch[0].New.Deleted || ch[0].New.Partition != "table:2" {
		t.Fatalf("changes %+v", ch)
	}
	if b.Applied != 2 || b.Stale != 3 {
		t.Fatalf("applied %d stale %d", b.Applied, b.Stale)
	}
	s.Commit(b)
	if s.Live() != 1 || s.Tombstones() != 0 {
		t.Fatalf("live %d tombs %d", s.Live(), s.Tombstones())
	}
}

// E38: a row that moves between partitions of one collection is a delete in
// the old partition and an upsert in the new one at the same commit_ts; the
// row survives whichever batch is applied first.
func TestPartitionMoveSurvivesEitherOrder(t *testing.T) {
	for _, deleteFirst := range []bool{true, false} {
		s := New()
		b := s.NewBatch(1)
		b.Upsert("k", 5, map[string]*apiv1.Value{}, "table:1")
		s.Commit(b)
		del := func() {
			b := s.NewBatch(1)
			b.Delete("k", 10)
			s.Commit(b)
		}
		ins := func() {
			b := s.NewBatch(1)
			b.Upsert("k", 10, map[string]*apiv1.Value{}, "table:2")
			s.Commit(b)
		}
		if deleteFirst {
			del()
			ins()
		} else {
			ins()
			del()
		}
		e, ok := s.Get("k")
		if !ok || e.Deleted || e.Partition != "table:2" || e.Version != 10 {
			t.Fatalf("deleteFirst=%v: row after the move = %+v, %v; want live in table:2 at 10", deleteFirst, e, ok)
		}
		// Redelivery of either mutation changes nothing.
		del()
		ins()
		if e, ok := s.Get("k"); !ok || e.Deleted {
			t.Fatalf("deleteFirst=%v: redelivery removed the row", deleteFirst)
		}
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

// E38: a batch reuses the key index of the previous committed batch; a
// reused index starts empty, so the next batch's first touch of a key
// records the committed entry as Old and the version guard reads the store.
// The change slices of earlier batches (held by the async modalities) are
// not touched by later batches.
func TestBatchIndexReuseStartsEmpty(t *testing.T) {
	s := New()
	b1 := s.NewBatch(2)
	b1.Upsert("a", 10, nil, "table:1")
	b1.Upsert("b", 10, nil, "table:1")
	ch1 := b1.Changes()
	s.Commit(b1)

	b2 := s.NewBatch(2)
	if b2.Upsert("a", 9, nil, "table:1") {
		t.Fatal("older upsert applied after index reuse (guard must read the store)")
	}
	if !b2.Delete("b", 11) {
		t.Fatal("newer delete not applied")
	}
	ch2 := b2.Changes()
	if len(ch2) != 1 || ch2[0].PK != "b" || ch2[0].Old == nil || ch2[0].Old.Version != 10 || !ch2[0].New.Deleted {
		t.Fatalf("second batch changes %+v", ch2)
	}
	s.Commit(b2)
	if len(ch1) != 2 || ch1[0].PK != "a" || ch1[1].PK != "b" || ch1[1].New.Deleted {
		t.Fatalf("first batch's changes were modified: %+v", ch1)
	}
	if s.Live() != 1 || s.Tombstones() != 1 {
		t.Fatalf("live %d tombs %d", s.Live(), s.Tombstones())
	}
}
