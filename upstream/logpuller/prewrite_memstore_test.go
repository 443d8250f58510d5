package logpuller

import (
	"errors"
	"fmt"
	"strings"
)

// memPrewriteStore is a PrewriteStore in memory for the core's tests: a
// run is a slice of records; an offset is a record number. failAppend
// makes the n-th Append from now fail (0: never); damaged makes every
// ReadBlock fail.
type memPrewriteStore struct {
	seq        int
	live       map[string]bool // run names not removed
	failAppend int
	damaged    bool
}

func newMemPrewriteStore() *memPrewriteStore { return &memPrewriteStore{live: map[string]bool{}} }

func (s *memPrewriteStore) Create(region uint64) (PrewriteWriter, error) {
	s.seq++
	name := fmt.Sprintf("run%d-r%d", s.seq, region)
	s.live[name] = true
	return &memPrewriteWriter{s: s, run: &memPrewriteRun{s: s, name: name}}, nil
}

func (s *memPrewriteStore) CreateDelivered() (PrewriteWriter, error) {
	s.seq++
	name := fmt.Sprintf("delivered%d", s.seq)
	s.live[name] = true
	return &memPrewriteWriter{s: s, run: &memPrewriteRun{s: s, name: name}}, nil
}

// deliveredFiles counts the live runs of delivered rows (LP17).
func (s *memPrewriteStore) deliveredFiles() int {
	n := 0
	for name := range s.live {
		if strings.HasPrefix(name, "delivered") {
			n++
		}
	}
	return n
}

// files lists the live prewrite runs (sorted by creation).
func (s *memPrewriteStore) files() int { return len(s.live) - s.deliveredFiles() }

type memPrewriteWriter struct {
	s    *memPrewriteStore
	run  *memPrewriteRun
	done bool
}

func (w *memPrewriteWriter) Append(rec *PrewriteRecord) (int64, error) {
	if w.done {
		return 0, errors.New("append after finish")
	}
	if w.s.failAppend > 0 {
		w.s.failAppend--
		if w.s.failAppend == 0 {
			return 0, fmt.Errorf("spill: no space left on memstore (writing %s)", w.run.name)
		}
	}
	if n := len(w.run.recs); n > 0 && compareRecord(&w.run.recs[n-1], matchKey{startTs: rec.StartTs, key: string(rec.Key)}) >= 0 {
		return 0, fmt.Errorf("%s: record out of order", w.run.name)
	}
	w.run.recs = append(w.run.recs, PrewriteRecord{StartTs: rec.StartTs, Key: cloneBytes(rec.Key), Value: cloneBytes(rec.Value), OldValue: cloneBytes(rec.OldValue)})
	return int64(len(w.run.recs) - 1), nil
}

func (w *memPrewriteWriter) Finish() (PrewriteRun, error) {
	w.done = true
	return w.run, nil
}

func (w *memPrewriteWriter) Abort() error {
	w.done = true
	delete(w.s.live, w.run.name)
	return nil
}

type memPrewriteRun struct {
	s    *memPrewriteStore
	name string
	recs []PrewriteRecord
}

func (r *memPrewriteRun) Name() string { return r.name }

func (r *memPrewriteRun) ReadBlock(off int64, n int) ([]PrewriteRecord, error) {
	if r.s.damaged {
		return nil, fmt.Errorf("spill: %s: damaged record at offset %d: checksum mismatch", r.name, off)
	}
	if !r.s.live[r.name] {
		return nil, fmt.Errorf("%s: read after remove", r.name)
	}
	if off < 0 || int(off)+n > len(r.recs) {
		return nil, fmt.Errorf("%s: block [%d, +%d) out of range", r.name, off, n)
	}
	out := make([]PrewriteRecord, n)
	for i := range out {
		s := r.recs[int(off)+i]
		out[i] = PrewriteRecord{StartTs: s.StartTs, Key: cloneBytes(s.Key), Value: cloneBytes(s.Value), OldValue: cloneBytes(s.OldValue)}
	}
	return out, nil
}

func (r *memPrewriteRun) Remove() error {
	if !r.s.live[r.name] {
		return fmt.Errorf("%s: removed twice", r.name)
	}
	delete(r.s.live, r.name)
	return nil
}
