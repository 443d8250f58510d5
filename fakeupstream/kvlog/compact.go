package kvlog

// Compaction rewrites the log as a new file holding only the live state
// (DUR-11): the state outside the store (GC safe point, TSO mark, region
// layout, meta values) first, then the store key by key in chunks the
// caller copies under the lock that orders its changes. Writers go on
// meanwhile: a change to a key already copied is appended to the new file
// too (teed), a change to a key not yet copied reaches it with the key's
// chunk. Finish makes the new file durable and renames it over the old
// one: a crash before the rename leaves the old log (the unfinished new
// file is removed by the next Open), a crash after it the new one.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
)

// TempName is the file a compaction writes before renaming it to
// FileName.
const TempName = FileName + ".compact"

// CompactIO performs a compaction's file operations. Tests wrap it to
// stop at any step (a crash) or fail one.
type CompactIO interface {
	Create(path string) (*os.File, error)
	WriteAt(f *os.File, b []byte, off int64) error
	Sync(f *os.File) error
	Rename(from, to string) error
	SyncDir(dir string) error
}

type osIO struct{}

func (osIO) Create(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (osIO) WriteAt(f *os.File, b []byte, off int64) error {
	_, err := f.WriteAt(b, off)
	return err
}

func (osIO) Sync(f *os.File) error        { return f.Sync() }
func (osIO) Rename(from, to string) error { return os.Rename(from, to) }
func (osIO) SyncDir(dir string) error     { return syncDir(dir) }

// SetCompactIO replaces the file operations of later compactions (nil:
// the real ones). A test seam.
func (l *Log) SetCompactIO(io CompactIO) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if io == nil {
		io = osIO{}
	}
	l.io = io
}

// removeTemp deletes what an interrupted compaction left (DUR-11): the
// log it was replacing is still the log.
func removeTemp(dir string) error {
	p := filepath.Join(dir, TempName)
	err := os.Remove(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kvlog: remove the unfinished compaction %s: %w", p, err)
	}
	return syncDir(dir)
}

// track records the state a compacted file must start with from a
// replayed record.
func (l *Log) track(r Record) {
	switch r.Type {
	case TypeGC, TypeTSO:
		l.trackUnkeyed(nil, r.Type, r.Ts, "")
	case TypeRegions:
		l.trackUnkeyed(AppendRegions(nil, r.Ts, r.Regions), TypeRegions, 0, "")
	case TypeMeta:
		l.trackUnkeyed(AppendMeta(nil, string(r.Key), r.Write.Value), TypeMeta, 0, string(r.Key))
	}
}

// trackUnkeyed notes a record that belongs to no key (frame: its framed
// bytes, for regions and meta) and tees it to a compaction in progress.
// Called under l.mu.
func (l *Log) trackUnkeyed(frame []byte, t Type, ts uint64, name string) {
	switch t {
	case TypeGC:
		l.gcSP = max(l.gcSP, ts)
	case TypeTSO:
		l.tsoMark = max(l.tsoMark, ts)
	case TypeRegions:
		l.regions = append(l.regions[:0], frame...)
	case TypeMeta:
		l.meta[name] = append([]byte(nil), frame...)
	}
	if c := l.cmp; c != nil {
		if frame == nil {
			c.buf = AppendTs(c.buf, t, ts)
		} else {
			c.buf = append(c.buf, frame...)
		}
	}
}

// Compaction is a rewrite of the log in progress (BeginCompaction).
type Compaction struct {
	l    *Log
	dir  string
	path string
	io   CompactIO

	// Under l.mu: records not yet written to the new file, and the last
	// key copied (keys up to it are teed).
	buf  []byte
	any  bool
	last []byte
	// all: the copy reached the end of the key space, so every key's
	// changes are teed from now on (a key created after the last chunk
	// sorts after it but has nowhere else to go).
	all bool

	// fmu orders the file operations (Write, Finish, discard).
	fmu  sync.Mutex
	f    *os.File
	off  int64
	done bool
}

// ErrCompacting: a compaction is already in progress.
var ErrCompacting = errors.New("kvlog: a compaction is already in progress")

// BeginCompaction creates the new file and starts teeing. The caller then
// copies the store with AddChunk (in key order, under the lock its store
// changes take), writes with Write, and ends with Finish or Abort.
func (l *Log) BeginCompaction() (*Compaction, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.err != nil {
		return nil, l.err
	}
	if l.cmp != nil {
		return nil, ErrCompacting
	}
	dir := filepath.Dir(l.path)
	c := &Compaction{l: l, dir: dir, path: filepath.Join(dir, TempName), io: l.io}
	f, err := c.io.Create(c.path)
	if err != nil {
		return nil, fmt.Errorf("kvlog: create %s: %w", c.path, err)
	}
	c.f = f
	c.buf = append(c.buf, Magic...)
	if l.gcSP > 0 {
		c.buf = AppendTs(c.buf, TypeGC, l.gcSP)
	}
	if l.tsoMark > 0 {
		c.buf = AppendTs(c.buf, TypeTSO, l.tsoMark)
	}
	c.buf = append(c.buf, l.regions...)
	names := make([]string, 0, len(l.meta))
	for n := range l.meta {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c.buf = append(c.buf, l.meta[n]...)
	}
	l.cmp = c
	return c, nil
}

// copied: key's chunk is in the new file, so its later changes are teed.
// Called under l.mu.
func (c *Compaction) copied(key []byte) bool {
	return c.all || (c.any && bytes.Compare(key, c.last) <= 0)
}

// AddChunk appends the records of the store's keys up to last (encoded
// with an Encoder, in key order after the previous chunk's last key; n
// keys, possibly none). done says the copy reached the end of the key
// space: from then on the changes of every key are teed. Call it under
// the lock that orders the store's changes, in the same hold as the copy,
// so no change of those keys falls between.
func (c *Compaction) AddChunk(last []byte, n int, records []byte, done bool) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	c.buf = append(c.buf, records...)
	if n > 0 {
		c.last = append(c.last[:0], last...)
		c.any = true
	}
	c.all = c.all || done
}

// Buffered is the size of what is not yet written to the new file.
func (c *Compaction) Buffered() int {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return len(c.buf)
}

// Write writes what is buffered to the new file (outside every lock the
// writers take, so they go on).
func (c *Compaction) Write() error {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.writeLocked()
}

func (c *Compaction) writeLocked() error {
	l := c.l
	l.mu.Lock()
	if c.done || l.cmp != c {
		l.mu.Unlock()
		return fmt.Errorf("kvlog: compaction of %s was abandoned", l.path)
	}
	data := c.buf
	c.buf = nil
	l.mu.Unlock()
	if len(data) == 0 {
		return nil
	}
	if err := c.io.WriteAt(c.f, data, c.off); err != nil {
		return fmt.Errorf("kvlog: write %s at offset %d: %w", c.path, c.off, err)
	}
	c.off += int64(len(data))
	return nil
}

// Finish makes the new file durable and puts it in the old one's place;
// from then on appends go to it and every offset handed out so far counts
// as durable (all of it is in the new file). It returns the new file's
// size. On an error before the rename the old log stays the log and the
// new file is removed; an error after it (the directory's fsync) is the
// log's sticky error, since the old file is no longer the log.
func (c *Compaction) Finish() (int64, error) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	// Most of the tail goes out without holding the log.
	if err := c.writeLocked(); err != nil {
		c.abortLocked()
		return 0, err
	}
	l := c.l
	l.mu.Lock()
	for l.flushing {
		l.cond.Wait()
	}
	if c.done || l.cmp != c || l.closed || l.err != nil {
		err := l.err
		l.mu.Unlock()
		c.abortLocked()
		if err == nil {
			err = fmt.Errorf("kvlog: compaction of %s was abandoned", l.path)
		}
		return 0, err
	}
	// Appenders now wait for l.mu: the rest of the tail, the fsync and
	// the rename happen with nothing new arriving.
	l.flushing = true
	fail := func(err error) (int64, error) {
		l.flushing = false
		l.cmp = nil
		l.cond.Broadcast()
		l.mu.Unlock()
		c.abortLocked()
		return 0, err
	}
	if len(c.buf) > 0 {
		if err := c.io.WriteAt(c.f, c.buf, c.off); err != nil {
			return fail(fmt.Errorf("kvlog: write %s at offset %d: %w", c.path, c.off, err))
		}
		c.off += int64(len(c.buf))
		c.buf = nil
	}
	if err := c.io.Sync(c.f); err != nil {
		return fail(fmt.Errorf("kvlog: sync %s: %w", c.path, err))
	}
	if err := c.io.Rename(c.path, l.path); err != nil {
		return fail(fmt.Errorf("kvlog: rename %s to %s: %w", c.path, l.path, err))
	}
	old := l.f
	l.f, c.f = c.f, nil
	c.done = true
	l.base = l.appended - c.off
	l.durable, l.written = l.appended, l.appended
	l.buf = l.buf[:0]
	l.cmp = nil
	if err := c.io.SyncDir(c.dir); err != nil {
		l.err = fmt.Errorf("kvlog: %s: sync the directory after compaction: %w", l.path, err)
	}
	err := l.err
	l.flushing = false
	l.cond.Broadcast()
	l.mu.Unlock()
	old.Close()
	return c.off, err
}

// Abort abandons the compaction: the new file is removed and the old log
// stays the log.
func (c *Compaction) Abort() {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.abortLocked()
}

func (c *Compaction) abortLocked() {
	l := c.l
	l.mu.Lock()
	if l.cmp == c {
		l.cmp = nil
	}
	done := c.done
	c.done = true
	l.mu.Unlock()
	if !done {
		c.removeFile()
	}
}

// discard is Close's end of a compaction still in progress.
func (c *Compaction) discard() {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.l.mu.Lock()
	done := c.done
	c.done = true
	c.l.mu.Unlock()
	if !done {
		c.removeFile()
	}
}

func (c *Compaction) removeFile() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
	os.Remove(c.path)
}

// Encoder encodes a store's state as log records (mvcc.Journal): a
// compaction's chunks.
type Encoder struct{ B []byte }

var _ mvcc.Journal = (*Encoder)(nil)

// PutLock implements mvcc.Journal.
func (e *Encoder) PutLock(l *mvcc.Lock) { e.B = AppendLock(e.B, l) }

// AddWrite implements mvcc.Journal.
func (e *Encoder) AddWrite(key []byte, w mvcc.Write, unlock bool) {
	e.B = AppendWrite(e.B, key, &w, unlock)
}

// DelLock implements mvcc.Journal.
func (e *Encoder) DelLock(key []byte, startTs uint64) { e.B = AppendDelLock(e.B, key, startTs) }

// GC implements mvcc.Journal.
func (e *Encoder) GC(sp uint64) { e.B = AppendTs(e.B, TypeGC, sp) }
