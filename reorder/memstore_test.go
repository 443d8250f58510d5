package reorder

import (
	"errors"
	"fmt"
)

// memStore is a RunStore in memory for the core's tests: runs are slices,
// each row costs recBytes "disk" bytes, and failures can be injected.
type memStore[T any] struct {
	recBytes int64
	seq      int
	live     map[string][]Item[T] // finished runs not removed
	open     map[string]bool      // writers not finished or aborted
	// failStage makes the n-th Stage (1-based, counting all) fail.
	failStage int
	stages    int
	// damage makes reading run name fail at row index at.
	damage   map[string]int
	removed  []string
	finished []string
}

func newMemStore[T any](recBytes int64) *memStore[T] {
	return &memStore[T]{recBytes: recBytes, live: map[string][]Item[T]{}, open: map[string]bool{}, damage: map[string]int{}}
}

func (s *memStore[T]) Create(partition string) (RunWriter[T], error) {
	s.seq++
	name := fmt.Sprintf("%s/run-%d", partition, s.seq)
	s.open[name] = true
	return &memWriter[T]{s: s, name: name}, nil
}

type memWriter[T any] struct {
	s      *memStore[T]
	name   string
	rows   []Item[T]
	staged *Item[T]
	done   bool
}

func (w *memWriter[T]) Stage(it Item[T]) (int64, error) {
	if w.done {
		return 0, errors.New("stage after finish")
	}
	w.s.stages++
	if w.s.failStage > 0 && w.s.stages == w.s.failStage {
		return 0, fmt.Errorf("spill: no space left on %s", w.name)
	}
	if n := len(w.rows); n > 0 && less(w.rows[n-1], it) >= 0 {
		return 0, fmt.Errorf("run %s: row (%d,%d) appended out of order", w.name, it.CommitTs, it.Ordinal)
	}
	w.staged = &it
	return w.s.recBytes, nil
}

func (w *memWriter[T]) Commit() error {
	if w.staged == nil {
		return errors.New("commit without stage")
	}
	w.rows = append(w.rows, *w.staged)
	w.staged = nil
	return nil
}

func (w *memWriter[T]) Finish() (Run[T], error) {
	w.done = true
	delete(w.s.open, w.name)
	w.s.live[w.name] = w.rows
	w.s.finished = append(w.s.finished, w.name)
	return &memRun[T]{s: w.s, name: w.name}, nil
}

func (w *memWriter[T]) Abort() error {
	w.done = true
	delete(w.s.open, w.name)
	return nil
}

type memRun[T any] struct {
	s    *memStore[T]
	name string
}

func (r *memRun[T]) Name() string { return r.name }

func (r *memRun[T]) Open() (RunReader[T], error) {
	rows, ok := r.s.live[r.name]
	if !ok {
		return nil, fmt.Errorf("run %s was removed", r.name)
	}
	return &memReader[T]{s: r.s, name: r.name, rows: rows}, nil
}

func (r *memRun[T]) Remove() error {
	if _, ok := r.s.live[r.name]; !ok {
		return fmt.Errorf("run %s removed twice", r.name)
	}
	delete(r.s.live, r.name)
	r.s.removed = append(r.s.removed, r.name)
	return nil
}

type memReader[T any] struct {
	s    *memStore[T]
	name string
	rows []Item[T]
	i    int
}

func (r *memReader[T]) Next() (Item[T], bool, error) {
	if at, ok := r.s.damage[r.name]; ok && r.i == at {
		return Item[T]{}, false, fmt.Errorf("spill: %s: damaged record at offset %d", r.name, int64(at)*r.s.recBytes)
	}
	if r.i >= len(r.rows) {
		return Item[T]{}, false, nil
	}
	r.i++
	return r.rows[r.i-1], true, nil
}

func (r *memReader[T]) Close() error { return nil }
