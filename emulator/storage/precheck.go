package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
)

// precheck validates a bbolt file's meta pages and size before bolt.Open
// maps it (E63). bbolt maps far more than the file holds (InitialMmapSize),
// so a page it reads past the end of a truncated file is not an error but a
// SIGBUS that kills the process; the size check here turns that into an
// error naming the file.
//
// The layout read here is bbolt's on-disk format 2 (go.etcd.io/bbolt,
// internal/common): each page starts with a 16-byte header (id u64,
// flags u16, count u16, overflow u32); pages 0 and 1 are meta pages whose
// body is magic u32, version u32, pageSize u32, flags u32, root bucket
// (root pgid u64, sequence u64), freelist pgid u64, high-water pgid u64,
// txid u64 and an FNV-64a checksum of the preceding 56 bytes. Integers are
// in the machine's byte order (bbolt writes the struct as it is in memory).

const (
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	boltPageHeader    = 16
	boltMetaFlag      = 0x04
	boltMetaLen       = 64 // meta body up to and including the checksum
	boltSummedLen     = 56 // bytes covered by the checksum
	boltNoFreelist    = ^uint64(0)
	boltMinPageSize   = 1024
	boltMaxPageSize   = 1024 << 14 // the largest page size bbolt probes for
	boltFirstDataPage = 2          // pages 0 and 1 are the meta pages
)

// boltMeta is one decoded meta page.
type boltMeta struct {
	page     int // 0 or 1
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// errDamaged marks precheck's refusals so callers (and tests) can tell a
// damaged file from an I/O failure.
var errDamaged = errors.New("the file was truncated or damaged")

// precheck returns nil when path does not exist or is empty (bbolt creates
// a fresh store), or when at least one meta page is valid and the file
// holds every page up to the high-water mark of the meta bbolt will use.
// Otherwise the error names the file and what is wrong.
func precheck(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: check %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: check %s: %w", path, err)
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	name := filepath.Base(path)
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("storage: open %s: %s %s: %w", path, name, fmt.Sprintf(format, args...), errDamaged)
	}

	m0, err0 := readMeta(f, size, 0, 0)
	var pageSize int64
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	// Page 1 sits one page in; when page 0 is unreadable its page size is
	// unknown, so probe the sizes bbolt itself probes.
	var m1 *boltMeta
	var err1 error
	if pageSize != 0 {
		m1, err1 = readMeta(f, size, pageSize, 1)
	} else {
		err1 = fmt.Errorf("no valid meta page at any offset from %d to %d", boltMinPageSize, boltMaxPageSize)
		for ps := int64(boltMinPageSize); ps <= boltMaxPageSize && ps < size; ps <<= 1 {
			if m, err := readMeta(f, size, ps, 1); err == nil && int64(m.pageSize) == ps {
				m1, err1 = m, nil
				break
			}
		}
	}
	if err0 != nil && err1 != nil {
		return damaged("is %d bytes and neither meta page is valid (page 0: %v; page 1: %v)", size, err0, err1)
	}
	// bbolt uses the valid meta with the higher txid (the other one is the
	// previous commit, kept so a torn meta write loses one commit, not the
	// file), so that is the one whose pages must all be present.
	use := m0
	if m0 == nil || (m1 != nil && m1.txid > m0.txid) {
		use = m1
	}
	if m0 != nil && m1 != nil && m0.pageSize != m1.pageSize {
		return damaged("has meta pages with different page sizes (%d and %d)", m0.pageSize, m1.pageSize)
	}
	need := int64(use.pgid) * int64(use.pageSize)
	if size < need {
		return damaged("is %d bytes but its meta page %d says its pages reach %d bytes (%d pages of %d)",
			size, use.page, need, use.pgid, use.pageSize)
	}
	if err := checkTree(f, use); err != nil {
		return damaged("has a damaged page structure (from meta page %d): %v", use.page, err)
	}
	return nil
}

// readMeta reads and validates meta page id (0 or 1) at offset off.
func readMeta(r io.ReaderAt, size, off int64, id int) (*boltMeta, error) {
	buf := make([]byte, boltPageHeader+boltMetaLen)
	if off+int64(len(buf)) > size {
		return nil, fmt.Errorf("file ends at %d, before the meta page at offset %d", size, off)
	}
	if _, err := r.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read at offset %d: %v", off, err)
	}
	ne := binary.NativeEndian
	if flags := ne.Uint16(buf[8:10]); flags&boltMetaFlag == 0 {
		return nil, fmt.Errorf("page at offset %d is not a meta page (flags %#x)", off, flags)
	}
	body := buf[boltPageHeader:]
	if magic := ne.Uint32(body[0:4]); magic != boltMagic {
		return nil, fmt.Errorf("bad magic %#x at offset %d (not a bbolt file)", magic, off)
	}
	if v := ne.Uint32(body[4:8]); v != boltVersion {
		return nil, fmt.Errorf("format version %d at offset %d, this build reads %d", v, off, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(body[:boltSummedLen])
	if want, got := ne.Uint64(body[56:64]), h.Sum64(); want != got {
		return nil, fmt.Errorf("checksum mismatch at offset %d (stored %#x, computed %#x)", off, want, got)
	}
	m := &boltMeta{
		page:     id,
		pageSize: ne.Uint32(body[8:12]),
		root:     ne.Uint64(body[16:24]),
		freelist: ne.Uint64(body[32:40]),
		pgid:     ne.Uint64(body[40:48]),
		txid:     ne.Uint64(body[48:56]),
	}
	// A checksummed meta with impossible values was written by something
	// other than bbolt; bbolt would index the mapping with them.
	ps := m.pageSize
	if ps < boltMinPageSize || ps > boltMaxPageSize || ps&(ps-1) != 0 {
		return nil, fmt.Errorf("meta at offset %d has page size %d, not a power of two in [%d, %d]", off, ps, boltMinPageSize, boltMaxPageSize)
	}
	if m.pgid <= boltFirstDataPage || m.pgid > uint64(1<<62)/uint64(ps) {
		return nil, fmt.Errorf("meta at offset %d has high-water page %d", off, m.pgid)
	}
	if m.root < boltFirstDataPage || m.root >= m.pgid {
		return nil, fmt.Errorf("meta at offset %d has root page %d outside [%d, %d)", off, m.root, boltFirstDataPage, m.pgid)
	}
	if m.freelist != boltNoFreelist && (m.freelist < boltFirstDataPage || m.freelist >= m.pgid) {
		return nil, fmt.Errorf("meta at offset %d has freelist page %d outside [%d, %d)", off, m.freelist, boltFirstDataPage, m.pgid)
	}
	return m, nil
}
