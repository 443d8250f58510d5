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

	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// PrewriteStore is the log puller's logpuller.PrewriteStore in a Dir:
// one file per run of a region's spilled prewrites (specs/logpuller.md
// LP14), removed at startup like every run file.
type PrewriteStore struct{ dir *Dir }

// NewPrewriteStore returns the prewrite store of d.
func NewPrewriteStore(d *Dir) *PrewriteStore { return &PrewriteStore{dir: d} }

var _ logpuller.PrewriteStore = (*PrewriteStore)(nil)

// Prewrite run format: the magic, then records of [payload length u32 LE]
// [CRC-32C of the payload u32 LE][payload]; the payload is uvarint
// start_ts, a flags byte (value present, old value present), uvarint key
// length, key, uvarint value length, value, old value (the rest).
const (
	prewriteMagic = "SFSPILLP"
	flagValue     = 1
	flagOldValue  = 2
)

// Create starts a run file of region's prewrites.
func (s *PrewriteStore) Create(region uint64) (logpuller.PrewriteWriter, error) {
	s.dir.prewriteRuns.Add(1)
	return s.create(fmt.Sprintf("prewrites-r%d", region))
}

// CreateDelivered starts a run file of a span's delivered rows (LP17):
// the same format, the commit ts as the value.
func (s *PrewriteStore) CreateDelivered() (logpuller.PrewriteWriter, error) {
	s.dir.deliveredRuns.Add(1)
	return s.create("delivered")
}

func (s *PrewriteStore) create(kind string) (logpuller.PrewriteWriter, error) {
	d := s.dir
	n := d.seq.Add(1)
	name := filepath.Join(d.path, fmt.Sprintf("%06d-%s%s", n, kind, fileSuffix))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, d.ioError("creating", name, err)
	}
	d.files.Add(1)
	d.prewriteFiles.Add(1)
	w := &prewriteWriter{d: d, name: name, f: f, bw: bufio.NewWriterSize(d.newWriter(f), writeBuf)}
	if _, err := w.bw.WriteString(prewriteMagic); err != nil {
		_ = w.Abort()
		return nil, d.ioError("writing", name, err)
	}
	w.off = int64(len(prewriteMagic))
	return w, nil
}

type prewriteWriter struct {
	d    *Dir
	name string
	f    *os.File
	bw   *bufio.Writer
	off  int64
	buf  []byte
	done bool
}

func (w *prewriteWriter) Append(rec *logpuller.PrewriteRecord) (int64, error) {
	b := append(w.buf[:0], make([]byte, recHeader)...)
	b = binary.AppendUvarint(b, rec.StartTs)
	var flags byte
	if rec.Value != nil {
		flags |= flagValue
	}
	if rec.OldValue != nil {
		flags |= flagOldValue
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(rec.Key)))
	b = append(b, rec.Key...)
	b = binary.AppendUvarint(b, uint64(len(rec.Value)))
	b = append(b, rec.Value...)
	b = append(b, rec.OldValue...)
	payload := len(b) - recHeader
	if payload >= maxRecord {
		return 0, fmt.Errorf("spill: a prewrite of %d bytes is too large for %s", payload, w.name)
	}
	binary.LittleEndian.PutUint32(b[0:4], uint32(payload))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[recHeader:], castagnoli))
	w.buf = b
	if _, err := w.bw.Write(b); err != nil {
		return 0, w.d.ioError("writing", w.name, err)
	}
	off := w.off
	w.off += int64(len(b))
	return off, nil
}

func (w *prewriteWriter) Finish() (logpuller.PrewriteRun, error) {
	w.done = true
	if err := w.bw.Flush(); err != nil {
		_ = w.f.Close()
		return nil, w.d.ioError("writing", w.name, err)
	}
	// No fsync: a run never outlives the process that wrote it (RS4).
	if err := w.f.Close(); err != nil {
		return nil, w.d.ioError("closing", w.name, err)
	}
	f, err := os.Open(w.name)
	if err != nil {
		return nil, fmt.Errorf("spill: opening %s: %w", w.name, err)
	}
	return &prewriteRun{d: w.d, name: w.name, f: f, size: w.off}, nil
}

func (w *prewriteWriter) Abort() error {
	if !w.done {
		w.done = true
		_ = w.f.Close()
	}
	if err := os.Remove(w.name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("spill: removing %s: %w", w.name, err)
	}
	w.d.files.Add(-1)
	w.d.prewriteFiles.Add(-1)
	return nil
}

// prewriteRun keeps its file open for the lookups of COMMITs.
type prewriteRun struct {
	d       *Dir
	name    string
	f       *os.File
	size    int64
	br      *bufio.Reader
	removed bool
}

func (r *prewriteRun) Name() string { return r.name }

// ReadBlock reads n records from off; each record's bytes are one
// allocation the caller owns.
func (r *prewriteRun) ReadBlock(off int64, n int) ([]logpuller.PrewriteRecord, error) {
	if r.removed {
		return nil, fmt.Errorf("spill: %s read after removal", r.name)
	}
	if off < int64(len(prewriteMagic)) || off >= r.size {
		return nil, damaged(r.name, off, "block offset out of range")
	}
	sec := io.NewSectionReader(r.f, off, r.size-off)
	if r.br == nil {
		r.br = bufio.NewReaderSize(sec, readBuf)
	} else {
		r.br.Reset(sec)
	}
	// Every payload of the block goes into one buffer (one allocation the
	// records share), decoded once the buffer stopped growing.
	out := make([]logpuller.PrewriteRecord, n)
	ends := make([]int, n)
	offs := make([]int64, n)
	var buf []byte
	var hdr [recHeader]byte
	for i := range out {
		offs[i] = off
		if k, err := io.ReadFull(r.br, hdr[:]); err != nil {
			return nil, damaged(r.name, off, fmt.Sprintf("truncated record header (%d of %d bytes)", k, recHeader))
		}
		size := binary.LittleEndian.Uint32(hdr[0:4])
		sum := binary.LittleEndian.Uint32(hdr[4:8])
		if uint64(size) >= maxRecord || int64(size) > r.size-off {
			return nil, damaged(r.name, off, fmt.Sprintf("record length %d out of range", size))
		}
		start := len(buf)
		buf = append(buf, make([]byte, size)...)
		p := buf[start:]
		if k, err := io.ReadFull(r.br, p); err != nil {
			return nil, damaged(r.name, off, fmt.Sprintf("truncated record (%d of %d payload bytes)", k, size))
		}
		if crc32.Checksum(p, castagnoli) != sum {
			return nil, damaged(r.name, off, "checksum mismatch")
		}
		ends[i] = len(buf)
		off += recHeader + int64(size)
	}
	start := 0
	for i := range out {
		if err := decodePrewrite(buf[start:ends[i]:ends[i]], &out[i]); err != nil {
			return nil, damaged(r.name, offs[i], err.Error())
		}
		start = ends[i]
	}
	return out, nil
}

// decodePrewrite fills rec with slices of p (which rec then owns).
func decodePrewrite(p []byte, rec *logpuller.PrewriteRecord) error {
	var k int
	if rec.StartTs, k = binary.Uvarint(p); k <= 0 {
		return errors.New("bad start ts")
	}
	p = p[k:]
	if len(p) == 0 {
		return errors.New("missing flags")
	}
	flags := p[0]
	p = p[1:]
	kl, k := binary.Uvarint(p)
	if k <= 0 || kl > uint64(len(p)-k) {
		return errors.New("bad key length")
	}
	p = p[k:]
	rec.Key = p[:kl:kl]
	p = p[kl:]
	vl, k := binary.Uvarint(p)
	if k <= 0 || vl > uint64(len(p)-k) {
		return errors.New("bad value length")
	}
	p = p[k:]
	rec.Value, rec.OldValue = nil, nil
	if flags&flagValue != 0 {
		rec.Value = p[:vl:vl]
	} else if vl != 0 {
		return errors.New("value bytes without a value")
	}
	p = p[vl:]
	if flags&flagOldValue != 0 {
		rec.OldValue = p
	} else if len(p) != 0 {
		return errors.New("old value bytes without an old value")
	}
	return nil
}

func (r *prewriteRun) Remove() error {
	if r.removed {
		return nil
	}
	r.removed = true
	_ = r.f.Close()
	if err := os.Remove(r.name); err != nil {
		return fmt.Errorf("spill: removing %s: %w", r.name, err)
	}
	r.d.files.Add(-1)
	r.d.prewriteFiles.Add(-1)
	return nil
}
