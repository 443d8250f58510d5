// Package spill is the file-backed run store of the reorder buffer
// (specs/minicdc.md RS4-RS7): sorted runs of rows a partition could not
// hold in memory, one file each under <data-dir>/spill/, written once,
// read back once by the drain's merge, and removed once their rows were
// acknowledged. It is the edge around the pure reorder core: all of the
// core's I/O happens here.
package spill

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/searchfabric/sfemu/reorder"
)

// Codec turns one row value into bytes and back. Decode's src is only
// valid during the call: the value must own what it keeps.
type Codec[T any] interface {
	Append(dst []byte, v T) ([]byte, error)
	Decode(src []byte) (T, error)
}

// Dir is the spill directory shared by every partition's store.
type Dir struct {
	path string
	seq  atomic.Uint64
	// files counts run files on disk (metrics: spill files).
	files atomic.Int64
	// prewriteFiles counts the log puller's run files among them
	// (prewrites and delivered rows), prewriteRuns every prewrite run ever
	// created, deliveredRuns every delivered-row run (LP17).
	prewriteFiles atomic.Int64
	prewriteRuns  atomic.Uint64
	deliveredRuns atomic.Uint64
	// newWriter wraps a run file's writer (tests inject failures).
	newWriter func(f *os.File) io.Writer
}

// Option configures a Dir.
type Option func(*Dir)

// WithWriter wraps every run file's writer, e.g. to inject a disk-full
// error in tests.
func WithWriter(wrap func(f *os.File) io.Writer) Option {
	return func(d *Dir) { d.newWriter = wrap }
}

// fileSuffix marks run files; only these are removed at startup.
const fileSuffix = ".run"

// OpenDir creates path if needed and removes every run file in it (RS4):
// spilled rows were never acknowledged, so a restart, which resumes from
// the emulator's stored progress, redelivers them from upstream.
func OpenDir(path string, opts ...Option) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("spill: creating %s: %w", path, err)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("spill: reading %s: %w", path, err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), fileSuffix) {
			if err := os.Remove(filepath.Join(path, e.Name())); err != nil {
				return nil, fmt.Errorf("spill: removing stale %s: %w", filepath.Join(path, e.Name()), err)
			}
		}
	}
	d := &Dir{path: path, newWriter: func(f *os.File) io.Writer { return f }}
	for _, o := range opts {
		o(d)
	}
	return d, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Files is the number of run files on disk now.
func (d *Dir) Files() int64 { return d.files.Load() }

// PrewriteFiles is the number of the log puller's prewrite run files on
// disk now (included in Files).
func (d *Dir) PrewriteFiles() int64 { return d.prewriteFiles.Load() }

// PrewriteRuns is the number of prewrite runs created so far.
func (d *Dir) PrewriteRuns() uint64 { return d.prewriteRuns.Load() }

// DeliveredRuns is the number of the log puller's delivered-row runs
// created so far (LP17).
func (d *Dir) DeliveredRuns() uint64 { return d.deliveredRuns.Load() }

// Store is a reorder.RunStore[T] of run files in a Dir.
type Store[T any] struct {
	dir   *Dir
	codec Codec[T]
}

// NewStore returns the store of one value type (one per partition or
// shared: it keeps no per-run state).
func NewStore[T any](d *Dir, c Codec[T]) *Store[T] { return &Store[T]{dir: d, codec: c} }

var _ reorder.RunStore[int] = (*Store[int])(nil)

// Format: an 8-byte magic, then records of [payload length u32 LE]
// [CRC-32C of the payload u32 LE][payload]; the payload is uvarints
// commit_ts, ordinal, size, then the codec's bytes.
const (
	magic     = "SFSPILL1"
	recHeader = 8
	// maxRecord bounds a record's length so a damaged length cannot ask
	// for an absurd allocation.
	maxRecord = 1 << 31
	writeBuf  = 256 << 10
	readBuf   = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Create starts a run file for partition.
func (s *Store[T]) Create(partition string) (reorder.RunWriter[T], error) {
	n := s.dir.seq.Add(1)
	name := filepath.Join(s.dir.path, fmt.Sprintf("%06d-%s%s", n, safeName(partition), fileSuffix))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, s.dir.ioError("creating", name, err)
	}
	s.dir.files.Add(1)
	w := &writer[T]{s: s, name: name, f: f}
	w.bw = bufio.NewWriterSize(s.dir.newWriter(f), writeBuf)
	if _, err := w.bw.WriteString(magic); err != nil {
		_ = w.Abort()
		return nil, s.dir.ioError("writing", name, err)
	}
	return w, nil
}

// safeName keeps a partition name readable in a file name.
func safeName(p string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, p)
}

// ioError names the file; a full disk gets the message operators look
// for (RS6).
func (d *Dir) ioError(op, name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("spill: no space left on %s (%s %s): %w", d.path, op, name, err)
	}
	return fmt.Errorf("spill: %s %s: %w", op, name, err)
}

type writer[T any] struct {
	s      *Store[T]
	name   string
	f      *os.File
	bw     *bufio.Writer
	staged []byte // header + payload of the staged row; nil when none
	buf    []byte
	done   bool
}

func (w *writer[T]) Stage(it reorder.Item[T]) (int64, error) {
	b := append(w.buf[:0], make([]byte, recHeader)...)
	b = binary.AppendUvarint(b, it.CommitTs)
	b = binary.AppendUvarint(b, it.Ordinal)
	b = binary.AppendUvarint(b, uint64(max(it.Size, 0)))
	b, err := w.s.codec.Append(b, it.Value)
	if err != nil {
		return 0, fmt.Errorf("spill: encoding a row for %s: %w", w.name, err)
	}
	payload := len(b) - recHeader
	if payload >= maxRecord {
		return 0, fmt.Errorf("spill: a row of %d bytes is too large for %s", payload, w.name)
	}
	binary.LittleEndian.PutUint32(b[0:4], uint32(payload))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[recHeader:], castagnoli))
	w.buf, w.staged = b, b
	return int64(len(b)), nil
}

func (w *writer[T]) Commit() error {
	if w.staged == nil {
		return fmt.Errorf("spill: commit without a staged row (%s)", w.name)
	}
	_, err := w.bw.Write(w.staged)
	w.staged = nil
	if err != nil {
		return w.s.dir.ioError("writing", w.name, err)
	}
	return nil
}

func (w *writer[T]) Finish() (reorder.Run[T], error) {
	w.staged = nil
	w.done = true
	if err := w.bw.Flush(); err != nil {
		_ = w.f.Close()
		return nil, w.s.dir.ioError("writing", w.name, err)
	}
	// No fsync: a run never outlives the process that wrote it (RS4).
	if err := w.f.Close(); err != nil {
		return nil, w.s.dir.ioError("closing", w.name, err)
	}
	return &runFile[T]{s: w.s, name: w.name}, nil
}

func (w *writer[T]) Abort() error {
	w.staged = nil
	if !w.done {
		w.done = true
		_ = w.f.Close()
	}
	if err := os.Remove(w.name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("spill: removing %s: %w", w.name, err)
	}
	w.s.dir.files.Add(-1)
	return nil
}

type runFile[T any] struct {
	s       *Store[T]
	name    string
	removed bool
}

func (r *runFile[T]) Name() string { return r.name }

func (r *runFile[T]) Open() (reorder.RunReader[T], error) {
	f, err := os.Open(r.name)
	if err != nil {
		return nil, fmt.Errorf("spill: opening %s: %w", r.name, err)
	}
	rd := &reader[T]{s: r.s, name: r.name, f: f, br: bufio.NewReaderSize(f, readBuf)}
	var hdr [len(magic)]byte
	if _, err := io.ReadFull(rd.br, hdr[:]); err != nil || string(hdr[:]) != magic {
		_ = f.Close()
		return nil, damaged(r.name, 0, fmt.Sprintf("bad file header %q", hdr[:]))
	}
	rd.off = int64(len(magic))
	return rd, nil
}

func (r *runFile[T]) Remove() error {
	if r.removed {
		return nil
	}
	if err := os.Remove(r.name); err != nil {
		return fmt.Errorf("spill: removing %s: %w", r.name, err)
	}
	r.removed = true
	r.s.dir.files.Add(-1)
	return nil
}

type reader[T any] struct {
	s    *Store[T]
	name string
	f    *os.File
	br   *bufio.Reader
	off  int64 // offset of the next record
	buf  []byte
}

// DamagedError is a run file that does not read back as written: fatal,
// never skipped (RS6).
type DamagedError struct {
	File   string
	Offset int64
	Why    string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("spill: %s: damaged record at offset %d: %s", e.File, e.Offset, e.Why)
}

func damaged(file string, off int64, why string) error {
	return &DamagedError{File: file, Offset: off, Why: why}
}

func (r *reader[T]) Next() (reorder.Item[T], bool, error) {
	var it reorder.Item[T]
	var hdr [recHeader]byte
	n, err := io.ReadFull(r.br, hdr[:])
	if err == io.EOF && n == 0 {
		return it, false, nil
	}
	if err != nil {
		return it, false, damaged(r.name, r.off, fmt.Sprintf("truncated record header (%d of %d bytes)", n, recHeader))
	}
	size := binary.LittleEndian.Uint32(hdr[0:4])
	sum := binary.LittleEndian.Uint32(hdr[4:8])
	if uint64(size) >= maxRecord {
		return it, false, damaged(r.name, r.off, fmt.Sprintf("record length %d out of range", size))
	}
	if cap(r.buf) < int(size) {
		r.buf = make([]byte, size)
	}
	p := r.buf[:size]
	if n, err := io.ReadFull(r.br, p); err != nil {
		return it, false, damaged(r.name, r.off, fmt.Sprintf("truncated record (%d of %d payload bytes)", n, size))
	}
	if crc32.Checksum(p, castagnoli) != sum {
		return it, false, damaged(r.name, r.off, "checksum mismatch")
	}
	var k int
	if it.CommitTs, k = binary.Uvarint(p); k <= 0 {
		return it, false, damaged(r.name, r.off, "bad commit ts")
	}
	p = p[k:]
	if it.Ordinal, k = binary.Uvarint(p); k <= 0 {
		return it, false, damaged(r.name, r.off, "bad ordinal")
	}
	p = p[k:]
	sz, k := binary.Uvarint(p)
	if k <= 0 {
		return it, false, damaged(r.name, r.off, "bad size")
	}
	it.Size = int64(sz)
	if it.Value, err = r.s.codec.Decode(p[k:]); err != nil {
		return it, false, damaged(r.name, r.off, "value: "+err.Error())
	}
	r.off += recHeader + int64(size)
	return it, true, nil
}

func (r *reader[T]) Close() error { return r.f.Close() }
