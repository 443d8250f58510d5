package vector

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Quota is a memory budget shared by every index charged to it (rule
// VEC-Q1): the emulator gives all vector indexes of all collections and
// generations one quota, so a rebuild's new generation and the serving one
// count together. An index charges what Bytes accounts; the write (or
// graph round) that takes the total past the limit spills that index.
type Quota struct {
	limit int64
	used  atomic.Int64
}

// NewQuota returns a quota of limit bytes (limit <= 0: nothing fits, every
// index spills at its first charge).
func NewQuota(limit int64) *Quota { return &Quota{limit: limit} }

// Used returns the bytes currently charged.
func (q *Quota) Used() int64 { return q.used.Load() }

// Limit returns the quota's limit in bytes.
func (q *Quota) Limit() int64 { return q.limit }

// Spilled reports whether the index's vectors live in its spill file.
func (x *Index) Spilled() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.disk != nil
}

// chargeLocked brings the index's charge to its current Bytes and spills
// it when the quota is exceeded. Caller holds mu.
func (x *Index) chargeLocked() {
	q := x.opts.Quota
	if q == nil || x.closed.Load() {
		return
	}
	b := x.bytesLocked()
	d := b - x.charged
	if d == 0 {
		return
	}
	x.charged = b
	if used := q.used.Add(d); d > 0 && used > q.limit && x.disk == nil && !x.noSpill {
		x.spillLocked(used)
	}
}

// releaseCharge returns the index's charge to the quota (Close).
func (x *Index) releaseCharge() {
	if q := x.opts.Quota; q != nil {
		q.used.Add(-x.charged)
		x.charged = 0
	}
}

// spillLocked moves the slab's vectors to a spill file and drops the
// graph (VEC-Q1): searches become exact scans over the file, the builder
// stops, and memory keeps only keys and slot bookkeeping. The index stays
// spilled for its life (the emulator builds a new one at the collection's
// next rebuild or Open). A failure to spill keeps everything in memory
// (correct, over the quota) and is reported through Options.OnSpill.
// Caller holds mu.
func (x *Index) spillLocked(used int64) {
	d, err := newDiskSlab(x.opts.SpillDir, x.dim)
	if err == nil {
		for pi, p := range x.pages {
			first := pi << pageShift
			if cnt := min(pageSlots, x.n-first); cnt > 0 {
				if err = d.writeRun(first, p.vecs[:cnt*x.dim]); err != nil {
					break
				}
			}
		}
		if err != nil {
			d.close()
		}
	}
	if err != nil {
		x.noSpill = true
		if x.opts.OnSpill != nil {
			x.opts.OnSpill(fmt.Errorf("vector: spilling an index of %d vectors past the memory quota (%d of %d bytes): %w", x.n, used, x.opts.Quota.limit, err))
		}
		return
	}
	x.disk = d
	x.scratch = make([]float32, x.dim)
	for _, p := range x.pages {
		p.vecs = nil
	}
	if x.g != nil {
		x.dropGraph()
	}
	runtime.AddCleanup(x, func(d *diskSlab) { d.close() }, d)
	x.chargeLocked()
	if x.opts.OnSpill != nil {
		x.opts.OnSpill(nil)
	}
}

// failIO records the first spill I/O error; the index refuses every later
// write and search with it (its slab no longer reflects the writes).
func (x *Index) failIO(err error) error {
	if x.ioErr == nil {
		x.ioErr = fmt.Errorf("vector: spill file: %w", err)
	}
	return x.ioErr
}

// diskSlab is the spilled slab: slot i's stored vector at byte offset
// i*dim*4 of a file, in the machine's byte order (the file is private to
// this process and removed at once: nothing else reads it). Reads and
// writes are positional (pread/pwrite), so concurrent searches share it.
type diskSlab struct {
	f    *os.File
	dim  int
	name string
}

func newDiskSlab(dir string, dim int) (*diskSlab, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	f, err := os.CreateTemp(dir, "sfemu-vector-*.slab")
	if err != nil {
		return nil, err
	}
	d := &diskSlab{f: f, dim: dim, name: f.Name()}
	if os.Remove(f.Name()) == nil { // unlinked: a crash leaves nothing
		d.name = ""
	}
	return d, nil
}

func (d *diskSlab) close() {
	_ = d.f.Close()
	if d.name != "" {
		_ = os.Remove(d.name)
	}
}

func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func (d *diskSlab) off(i int) int64 { return int64(i) * int64(d.dim) * 4 }

// writeRun writes the vectors of consecutive slots from first.
func (d *diskSlab) writeRun(first int, v []float32) error {
	_, err := d.f.WriteAt(f32bytes(v), d.off(first))
	return err
}

// readRun reads len(v)/dim consecutive slots from first into v.
func (d *diskSlab) readRun(first int, v []float32) error {
	_, err := d.f.ReadAt(f32bytes(v), d.off(first))
	return err
}

func (d *diskSlab) write(i int, v []float32) error { return d.writeRun(i, v) }
func (d *diskSlab) read(i int, v []float32) error  { return d.readRun(i, v) }

// move copies slot src's vector to slot dst through buf (dim floats).
func (d *diskSlab) move(src, dst int, buf []float32) error {
	if err := d.read(src, buf); err != nil {
		return err
	}
	return d.write(dst, buf)
}
