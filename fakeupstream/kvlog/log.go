package kvlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/searchfabric/sfemu/fakeupstream/mvcc"
	"github.com/searchfabric/sfemu/fakeupstream/topology"
)

// FileName is the log file inside the directory; LockName is the file
// holding the directory's exclusive lock.
const (
	FileName = "upstream.log"
	LockName = "LOCK"
)

// ErrClosed: the log was closed.
var ErrClosed = errors.New("kvlog: log is closed")

// ErrLocked: another open log (another cluster, in this process or another)
// holds the directory.
var ErrLocked = errors.New("kvlog: directory is in use by another cluster")

// CorruptError: the log holds a record that is not a torn tail and cannot
// be read. Off is the record's frame offset in File.
type CorruptError struct {
	File string
	Off  int64
	What string
	Err  error
}

func (e *CorruptError) Error() string {
	s := fmt.Sprintf("kvlog: %s: record at offset %d: %s", e.File, e.Off, e.What)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Stats describes what Open found.
type Stats struct {
	// Records replayed and the file size after recovery.
	Records int
	Size    int64
	// TornBytes were dropped from the end of the file: an incomplete or
	// unreadable last record, never acknowledged (DUR-4).
	TornBytes int64
}

// Log is an open log. Append methods buffer a record; Sync makes every
// record appended up to an offset durable, sharing one write and one fsync
// among all concurrent callers (group commit). Safe for concurrent use.
type Log struct {
	path  string
	f     *os.File
	lockf *os.File

	mu    sync.Mutex
	cond  sync.Cond
	buf   []byte // records in [written, appended)
	spare []byte
	// appended and durable are logical offsets: bytes ever appended, so
	// an offset a caller holds stays meaningful after a compaction
	// replaced the file; base is the logical offset of the file's first
	// byte (file offset = logical - base).
	appended int64
	durable  int64
	// written: records below it are in the file, maybe not yet fsynced
	// (durable <= written <= appended); a large transaction's records
	// are written behind (writeBehindBytes) before its commit syncs them.
	written  int64
	base     int64
	flushing bool
	syncs    int64 // fsyncs of appended records done so far
	// writeBehinds counts writes without an fsync (writeBehindLocked).
	writeBehinds int64
	err          error // sticky write error
	closed       bool
	readOnly     bool // Verify: replay reports a torn tail instead of dropping it

	// The state outside the MVCC store that a compacted file must start
	// with: the highest GC safe point and TSO mark, the last region
	// layout and the last value of each meta name (frames).
	gcSP    uint64
	tsoMark uint64
	regions []byte
	meta    map[string][]byte
	// cmp is the compaction in progress (nil: none); io performs its
	// file operations (a test seam).
	cmp *Compaction
	io  CompactIO
}

// Open locks dir (creating it), replays every record of its log in order
// through apply, drops a torn tail and returns the log positioned for
// appends. apply must copy what it keeps (records alias a read buffer). An
// unreadable record that is not the tail, or an apply error, fails with a
// *CorruptError naming the file and offset.
func Open(dir string, apply func(off int64, r Record) error) (*Log, Stats, error) {
	var st Stats
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, st, fmt.Errorf("kvlog: %w", err)
	}
	lockPath := filepath.Join(dir, LockName)
	lockf, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, st, fmt.Errorf("kvlog: %w", err)
	}
	if err := syscall.Flock(int(lockf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lockf.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, st, fmt.Errorf("%w: %s is locked (close the other cluster first)", ErrLocked, lockPath)
		}
		return nil, st, fmt.Errorf("kvlog: lock %s: %w", lockPath, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		lockf.Close()
		return nil, st, fmt.Errorf("kvlog: %w", err)
	}
	l := &Log{path: path, f: f, lockf: lockf, meta: map[string][]byte{}, io: osIO{}}
	l.cond.L = &l.mu
	if err := removeTemp(dir); err != nil {
		f.Close()
		lockf.Close()
		return nil, st, err
	}
	end, err := l.replay(func(off int64, r Record) error {
		l.track(r)
		return apply(off, r)
	}, &st)
	if err != nil {
		f.Close()
		lockf.Close()
		return nil, st, err
	}
	l.appended, l.durable, l.written = end, end, end
	st.Size = end
	return l, st, nil
}

// replay reads the file, applies its records and truncates a torn tail;
// it returns the end offset of the last good record.
func (l *Log) replay(apply func(int64, Record) error, st *Stats) (int64, error) {
	fi, err := l.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("kvlog: %w", err)
	}
	size := fi.Size()
	hdr := int64(len(Magic))
	if size < hdr {
		// A new file, or a header torn before it was ever synced (the
		// header is synced before the first record is appended).
		head := make([]byte, size)
		if _, err := l.f.ReadAt(head, 0); err != nil && err != io.EOF {
			return 0, fmt.Errorf("kvlog: %s: %w", l.path, err)
		}
		if string(head) != Magic[:size] && !allZero(head) {
			return 0, &CorruptError{File: l.path, Off: 0, What: "not a kvlog file (bad magic)"}
		}
		if l.readOnly {
			st.TornBytes = size
			return 0, nil
		}
		if err := l.f.Truncate(0); err != nil {
			return 0, fmt.Errorf("kvlog: %w", err)
		}
		if _, err := l.f.WriteAt([]byte(Magic), 0); err != nil {
			return 0, fmt.Errorf("kvlog: %s: write header: %w", l.path, err)
		}
		if err := l.f.Sync(); err != nil {
			return 0, fmt.Errorf("kvlog: %s: sync: %w", l.path, err)
		}
		if err := syncDir(filepath.Dir(l.path)); err != nil {
			return 0, err
		}
		return hdr, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, size), 1<<20)
	magic := make([]byte, hdr)
	if _, err := io.ReadFull(br, magic); err != nil {
		return 0, fmt.Errorf("kvlog: %s: %w", l.path, err)
	}
	if string(magic) != Magic {
		return 0, &CorruptError{File: l.path, Off: 0, What: fmt.Sprintf("not a kvlog file (magic %q)", magic)}
	}
	off := hdr
	var payload []byte
	var fh [frameHeader]byte
	torn := func(what string) (int64, error) {
		// Only the tail may be torn: everything from off to the end.
		st.TornBytes = size - off
		if l.readOnly {
			return off, nil
		}
		if err := l.f.Truncate(off); err != nil {
			return 0, fmt.Errorf("kvlog: %s: drop torn tail (%s) at offset %d: %w", l.path, what, off, err)
		}
		if err := l.f.Sync(); err != nil {
			return 0, fmt.Errorf("kvlog: %s: sync: %w", l.path, err)
		}
		return off, nil
	}
	for off < size {
		if size-off < frameHeader {
			return torn("short frame header")
		}
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			return 0, fmt.Errorf("kvlog: %s: read at offset %d: %w", l.path, off, err)
		}
		n := int64(binary.LittleEndian.Uint32(fh[:]))
		sum := binary.LittleEndian.Uint32(fh[4:])
		if n == 0 {
			rest, err := l.restZero(off)
			if err != nil {
				return 0, err
			}
			if rest {
				return torn("zero-filled tail")
			}
			return 0, &CorruptError{File: l.path, Off: off, What: "empty record followed by data"}
		}
		if off+frameHeader+n > size {
			return torn("record runs past the end of the file")
		}
		if n > MaxRecord {
			return 0, &CorruptError{File: l.path, Off: off, What: fmt.Sprintf("record length %d above the limit %d", n, MaxRecord)}
		}
		if int64(cap(payload)) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			return 0, fmt.Errorf("kvlog: %s: read at offset %d: %w", l.path, off, err)
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			if off+frameHeader+n == size {
				return torn("checksum mismatch in the last record")
			}
			return 0, &CorruptError{File: l.path, Off: off, What: "checksum mismatch"}
		}
		rec, err := DecodePayload(payload)
		if err != nil {
			return 0, &CorruptError{File: l.path, Off: off, What: "undecodable record", Err: err}
		}
		if err := apply(off, rec); err != nil {
			return 0, &CorruptError{File: l.path, Off: off, What: fmt.Sprintf("cannot replay %s record", rec.Type), Err: err}
		}
		st.Records++
		off += frameHeader + n
	}
	return off, nil
}

func (l *Log) restZero(off int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := l.f.ReadAt(buf, off)
		if !allZero(buf[:n]) {
			return false, nil
		}
		off += int64(n)
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("kvlog: %s: %w", l.path, err)
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("kvlog: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("kvlog: sync dir %s: %w", dir, err)
	}
	return nil
}

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// ---- appends (mvcc.Journal) ----

var _ mvcc.Journal = (*Log)(nil)

// PutLock implements mvcc.Journal.
func (l *Log) PutLock(lk *mvcc.Lock) {
	l.mu.Lock()
	if l.writable() {
		n := len(l.buf)
		l.buf = AppendLock(l.buf, lk)
		l.appended += int64(len(l.buf) - n)
		if c := l.cmp; c != nil && c.copied(lk.Key) {
			c.buf = AppendLock(c.buf, lk)
		}
		l.writeBehindLocked()
	}
	l.mu.Unlock()
}

// AddWrite implements mvcc.Journal.
func (l *Log) AddWrite(key []byte, w mvcc.Write, unlock bool) {
	l.mu.Lock()
	if l.writable() {
		n := len(l.buf)
		l.buf = AppendWrite(l.buf, key, &w, unlock)
		l.appended += int64(len(l.buf) - n)
		if c := l.cmp; c != nil && c.copied(key) {
			c.buf = AppendWrite(c.buf, key, &w, unlock)
		}
		l.writeBehindLocked()
	}
	l.mu.Unlock()
}

// DelLock implements mvcc.Journal.
func (l *Log) DelLock(key []byte, startTs uint64) {
	l.mu.Lock()
	if l.writable() {
		n := len(l.buf)
		l.buf = AppendDelLock(l.buf, key, startTs)
		l.appended += int64(len(l.buf) - n)
		if c := l.cmp; c != nil && c.copied(key) {
			c.buf = AppendDelLock(c.buf, key, startTs)
		}
		l.writeBehindLocked()
	}
	l.mu.Unlock()
}

// GC implements mvcc.Journal.
func (l *Log) GC(sp uint64) { l.appendTs(TypeGC, sp) }

func (l *Log) appendTs(t Type, ts uint64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writable() {
		n := len(l.buf)
		l.buf = AppendTs(l.buf, t, ts)
		l.appended += int64(len(l.buf) - n)
		l.trackUnkeyed(l.buf[n:], t, ts, "")
	}
	return l.appended
}

func (l *Log) writable() bool { return l.err == nil && !l.closed }

// AppendRegions appends the region layout (TypeRegions) and returns the
// offset to Sync for it. The caller appends under the lock that orders its
// topology changes, so the last record is the last layout.
func (l *Log) AppendRegions(nextID uint64, regions []topology.Region) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writable() {
		n := len(l.buf)
		l.buf = AppendRegions(l.buf, nextID, regions)
		l.appended += int64(len(l.buf) - n)
		l.trackUnkeyed(l.buf[n:], TypeRegions, 0, "")
	}
	return l.appended
}

// SaveMeta appends a named value (TypeMeta) and makes it durable.
func (l *Log) SaveMeta(name string, value []byte) error {
	l.mu.Lock()
	if l.writable() {
		n := len(l.buf)
		l.buf = AppendMeta(l.buf, name, value)
		l.appended += int64(len(l.buf) - n)
		l.trackUnkeyed(l.buf[n:], TypeMeta, 0, name)
	}
	lsn := l.appended
	l.mu.Unlock()
	return l.Sync(lsn)
}

// SaveTSO appends the TSO high-water mark and makes it durable.
func (l *Log) SaveTSO(limit uint64) error { return l.Sync(l.appendTs(TypeTSO, limit)) }

// Size is the log file's size including records not yet written: what
// the log occupies on disk once they are.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appended - l.base
}

// Appended is the (logical) end offset of every record appended so far;
// Sync(it) makes them durable.
func (l *Log) Appended() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appended
}

// Pending reports whether appended records are not yet durable.
func (l *Log) Pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable < l.appended
}

// Sync returns once every record up to offset lsn is on disk (written and
// fsynced), or the log's sticky write error. One caller at a time writes
// and fsyncs everything buffered so far; the others wait and find their
// records already durable (group commit). After Close it fails with
// ErrClosed.
func (l *Log) Sync(lsn int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		// Appends are dropped after a write error: nothing later is
		// durable, whatever offset the caller holds.
		return l.err
	}
	for l.durable < lsn {
		if l.err != nil {
			return l.err
		}
		if l.closed {
			return ErrClosed
		}
		if l.flushing {
			l.cond.Wait()
			continue
		}
		l.flushLocked()
	}
	return nil
}

// writeBehindBytes: once this much is buffered and not written, an append
// writes it to the file without an fsync, so a large transaction's records
// (its prewrite's locks and its commit's writes, values included) are not
// held in memory until the commit syncs them (DUR-14). What is written
// but not synced is not durable: a crash may keep or lose it, as any
// unacknowledged record (DUR-2, DUR-4).
const writeBehindBytes = 4 << 20

// writeBehindLocked writes the buffer without an fsync when it is past
// writeBehindBytes and no flush is under way (mu released while writing).
func (l *Log) writeBehindLocked() {
	if len(l.buf) < writeBehindBytes || l.flushing || l.err != nil {
		return
	}
	l.writeBufLocked(false)
}

// flushLocked writes and fsyncs the buffer with mu released.
func (l *Log) flushLocked() { l.writeBufLocked(true) }

// writeBufLocked writes the buffer at its file offset with mu released
// (and fsyncs it when sync), swapping in the spare buffer so appends go
// on meanwhile; only a synced write moves the durable point.
func (l *Log) writeBufLocked(sync bool) {
	l.flushing = true
	data, at, target := l.buf, l.written, l.appended
	fileAt := at - l.base
	l.buf = l.spare[:0]
	l.spare = nil
	l.mu.Unlock()
	_, err := l.f.WriteAt(data, fileAt)
	if err == nil && sync {
		err = l.f.Sync()
	}
	l.mu.Lock()
	if cap(data) <= 8<<20 {
		l.spare = data[:0]
	}
	l.flushing = false
	switch {
	case err != nil:
		l.err = fmt.Errorf("kvlog: %s: write at offset %d: %w", l.path, fileAt, err)
	case sync:
		l.durable, l.written = target, target
		l.syncs++
	default:
		l.written = target
		l.writeBehinds++
	}
	l.cond.Broadcast()
}

// Syncs is the number of fsyncs Sync has done so far (each covers every
// record appended before it: a soak reports commits per fsync).
func (l *Log) Syncs() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncs
}

// Close makes everything appended durable, then releases the file and the
// directory lock. Later appends are dropped and Sync fails with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	err := l.Sync(l.Appended())
	l.mu.Lock()
	for l.flushing {
		l.cond.Wait()
	}
	l.closed = true
	cmp := l.cmp
	l.cmp = nil
	l.cond.Broadcast()
	l.mu.Unlock()
	if cmp != nil {
		cmp.discard()
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if cerr := l.lockf.Close(); err == nil {
		err = cerr
	}
	return err
}
