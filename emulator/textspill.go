package emulator

import (
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/emulator/docstore"
	"github.com/searchfabric/sfemu/emulator/text"
)

// defaultTextMemoryBudget is Options.TextMemoryBudget's default, per
// collection (TXT-M7).
const defaultTextMemoryBudget = 256 << 20

// textSpill applies document changes to a collection's text index and,
// when the in-memory index passes the budget, moves the collection to the
// disk-backed bleve engine (TXT-M7): the house rule is that memory is
// bounded by a quota, never by correctness, so past it the index spills.
// It runs on the text modality's worker goroutine only.
type textSpill struct {
	e      *Emulator
	name   string // collection, for the log line
	slot   *textSlot
	fields []string
	docs   *docstore.Store
	w      *asyncIndex // set right after the worker is created
	apply  func([]docstore.Change) error
	failed bool // a spill failed: keep the memory index, do not retry
}

func (e *Emulator) newTextSpill(name string, slot *textSlot, fields []string, docs *docstore.Store) *textSpill {
	return &textSpill{e: e, name: name, slot: slot, fields: fields, docs: docs, apply: textApplier(slot, fields)}
}

func (s *textSpill) run(changes []docstore.Change) error {
	if err := s.apply(changes); err != nil {
		return err
	}
	budget := s.e.opts.TextMemoryBudget
	mem, ok := s.slot.current().(*text.Mem)
	if !ok || s.failed || budget < 0 || mem.Bytes() <= budget {
		return nil
	}
	return s.spill(mem.Bytes(), budget)
}

// spill rebuilds the index from the document store into a bleve scratch
// index while the memory index keeps answering searches, then swaps them.
// The store is read, and the worker's queued changes dropped, under the
// emulator's read lock: every queued change was committed to the store
// before it was queued, so the snapshot already holds it, and a change
// committed but not yet queued is applied again after the swap, which
// leaves its key as the snapshot has it. Queued marks stay: they fire once
// the snapshot, which covers them, is indexed.
func (s *textSpill) spill(used, budget int64) error {
	start := time.Now()
	s.e.mu.RLock()
	if s.e.closed {
		s.e.mu.RUnlock()
		return nil
	}
	ops := make([]text.Op, 0, s.docs.Live())
	s.docs.Each(func(pk string, ent *docstore.Entry) {
		if ent.Deleted {
			return
		}
		texts := make([]string, len(s.fields))
		has := false
		for i, f := range s.fields {
			texts[i] = ent.Text(f)
			has = has || texts[i] != ""
		}
		if has {
			ops = append(ops, text.Op{PK: pk, Texts: texts})
		}
	})
	dropped := s.w.dropQueuedChanges()
	s.e.mu.RUnlock()

	idx, err := s.build(ops)
	if err != nil {
		// Correctness first: the memory index stays, over budget, with
		// the changes the snapshot was to cover.
		s.failed = true
		s.e.logf("sfemu: collection %q: text index uses %d bytes, over its %d byte budget, but the rebuild on disk failed (%v); it stays in memory", s.name, used, budget, err)
		for _, ch := range dropped {
			if err := s.apply(ch); err != nil {
				return err
			}
		}
		return nil
	}
	old := s.slot.swap(idx)
	_ = old.Close()
	s.e.logf("sfemu: collection %q: text index passed its memory budget (%d bytes used, budget %d): rebuilt %d documents into the on-disk bleve engine in %s", s.name, used, budget, len(ops), time.Since(start).Round(time.Millisecond))
	return nil
}

// build indexes ops into a new bleve scratch index in batches of
// maxCoalesce.
func (s *textSpill) build(ops []text.Op) (text.Engine, error) {
	idx, err := text.OpenEngine(text.EngineBleve, s.e.opts.TextScratchDir, s.fields)
	if err != nil {
		return nil, err
	}
	for len(ops) > 0 {
		n := min(len(ops), maxCoalesce)
		if err := idx.Apply(ops[:n]); err != nil {
			_ = idx.Close()
			return nil, fmt.Errorf("index %d documents: %w", n, err)
		}
		ops = ops[n:]
	}
	return idx, nil
}
