package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// checkTree walks every page reachable from the meta page m, reading the
// file (never the mapping), and returns the first structural fault (E63).
// bbolt trusts its pages: with NoFreelistSync a read-write open rebuilds
// the freelist by walking the tree in a goroutine of its own that panics
// on the first inconsistency it finds (a page referenced twice, keys out
// of order), and a wild page id or element offset makes it read outside
// the mapping. Neither can be recovered, so the same walk is done here
// first, with every offset checked. The rules are bbolt's own (its
// tx.Check): page ids in [2, high-water), each page reachable once, only
// branch and leaf pages in a tree, keys strictly increasing within a page
// and within the bounds its parent's branch keys give it.
//
// Page layout (bbolt format 2): a 16-byte header (id u64, flags u16, count
// u16, overflow u32), then count 16-byte elements. A branch element is
// (pos u32, ksize u32, child pgid u64), a leaf element (flags u32, pos u32,
// ksize u32, vsize u32); pos counts from the element itself, the key is
// followed by the value. A leaf element with flag 1 is a nested bucket
// whose value starts with (root pgid u64, sequence u64); root 0 means an
// inline bucket whose one page follows in the value.
func checkTree(r io.ReaderAt, m *boltMeta) error {
	c := &treeCheck{r: r, ps: int64(m.pageSize), hwm: m.pgid, seen: map[uint64]bool{}}
	if m.freelist != boltNoFreelist {
		p, err := c.read(m.freelist)
		if err != nil {
			return err
		}
		if p.flags != boltFreelistFlag { // bbolt asserts one type flag, exactly
			return fmt.Errorf("freelist page %d has flags %#x", m.freelist, p.flags)
		}
	}
	_, err := c.page(m.root, nil, nil, 0)
	return err
}

const (
	boltBranchFlag    = 0x01
	boltLeafFlag      = 0x02
	boltFreelistFlag  = 0x10
	boltBucketElem    = 0x01
	boltElemSize      = 16
	boltBucketHdrSize = 16
	// maxTreeDepth bounds the recursion: a B+tree of 2^62 pages with the
	// smallest fan-out (2) is 62 levels deep, plus nested buckets.
	maxTreeDepth = 1024
)

type treeCheck struct {
	r    io.ReaderAt
	ps   int64
	hwm  uint64
	seen map[uint64]bool
}

// rawPage is one page (with its overflow pages) or an inline bucket page.
type rawPage struct {
	id    uint64 // 0 for an inline page
	flags uint16
	count int
	b     []byte
}

// read reads page id and its overflow, marking them seen.
func (c *treeCheck) read(id uint64) (*rawPage, error) {
	if id < boltFirstDataPage || id >= c.hwm {
		return nil, fmt.Errorf("page id %d is outside [%d, %d)", id, boltFirstDataPage, c.hwm)
	}
	var hdr [boltPageHeader]byte
	if _, err := c.r.ReadAt(hdr[:], int64(id)*c.ps); err != nil {
		return nil, fmt.Errorf("read page %d: %v", id, err)
	}
	ne := binary.NativeEndian
	if got := ne.Uint64(hdr[0:8]); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	overflow := uint64(ne.Uint32(hdr[12:16]))
	if overflow >= c.hwm-id {
		return nil, fmt.Errorf("page %d has %d overflow pages, past the high-water page %d", id, overflow, c.hwm)
	}
	for i := id; i <= id+overflow; i++ {
		if c.seen[i] {
			return nil, fmt.Errorf("page %d is referenced twice", i)
		}
		c.seen[i] = true
	}
	b := make([]byte, int64(1+overflow)*c.ps)
	if _, err := c.r.ReadAt(b, int64(id)*c.ps); err != nil {
		return nil, fmt.Errorf("read page %d: %v", id, err)
	}
	return &rawPage{id: id, flags: ne.Uint16(hdr[8:10]), count: int(ne.Uint16(hdr[10:12])), b: b}, nil
}

// elem returns element i's key and, for a leaf, its flags and value, all
// checked to lie inside the page.
func (p *rawPage) elem(i int) (key, val []byte, flags uint32, child uint64, err error) {
	off := boltPageHeader + i*boltElemSize
	if off+boltElemSize > len(p.b) {
		return nil, nil, 0, 0, fmt.Errorf("element %d lies past the end of the page", i)
	}
	ne := binary.NativeEndian
	e := p.b[off : off+boltElemSize]
	var pos, ksize, vsize uint64
	if p.flags&boltBranchFlag != 0 {
		pos, ksize, child = uint64(ne.Uint32(e[0:4])), uint64(ne.Uint32(e[4:8])), ne.Uint64(e[8:16])
	} else {
		flags, pos, ksize, vsize = ne.Uint32(e[0:4]), uint64(ne.Uint32(e[4:8])), uint64(ne.Uint32(e[8:12])), uint64(ne.Uint32(e[12:16]))
	}
	start := uint64(off) + pos
	if end := start + ksize + vsize; end > uint64(len(p.b)) {
		return nil, nil, 0, 0, fmt.Errorf("element %d's key and value (%d bytes at %d) run past the page's %d bytes", i, ksize+vsize, start, len(p.b))
	}
	return p.b[start : start+ksize], p.b[start+ksize : start+ksize+vsize], flags, child, nil
}

// page checks page id (depth levels below the root bucket) whose keys
// must lie in [lo, hi) (nil: unbounded), and returns its largest key.
func (c *treeCheck) page(id uint64, lo, hi []byte, depth int) ([]byte, error) {
	p, err := c.read(id)
	if err != nil {
		return nil, err
	}
	return c.check(p, lo, hi, depth)
}

func (c *treeCheck) check(p *rawPage, lo, hi []byte, depth int) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("page %d is nested more than %d levels deep", p.id, maxTreeDepth)
	}
	where := fmt.Sprintf("page %d", p.id)
	if p.id == 0 {
		where = "an inline bucket page"
	}
	branch := p.flags == boltBranchFlag
	if !branch && p.flags != boltLeafFlag { // bbolt asserts one type flag, exactly
		return nil, fmt.Errorf("%s has flags %#x, neither a branch nor a leaf page", where, p.flags)
	}
	prev := lo
	for i := 0; i < p.count; i++ {
		key, val, flags, child, err := p.elem(i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if prev != nil && (bytes.Compare(key, prev) < 0 || (i > 0 && bytes.Equal(key, prev))) {
			return nil, fmt.Errorf("%s: key %d (%x) is not above the key before it (%x)", where, i, key, prev)
		}
		if hi != nil && bytes.Compare(key, hi) >= 0 {
			return nil, fmt.Errorf("%s: key %d (%x) is not below its parent's next key (%x)", where, i, key, hi)
		}
		prev = key
		if branch {
			next := hi
			if i+1 < p.count {
				if next, _, _, _, err = p.elem(i + 1); err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
			}
			if prev, err = c.page(child, key, next, depth+1); err != nil {
				return nil, err
			}
			continue
		}
		if flags&boltBucketElem == 0 {
			continue
		}
		if len(val) < boltBucketHdrSize {
			return nil, fmt.Errorf("%s: bucket %q has a %d-byte header", where, key, len(val))
		}
		if root := binary.NativeEndian.Uint64(val[0:8]); root != 0 {
			if _, err := c.page(root, nil, nil, depth+1); err != nil {
				return nil, err
			}
			continue
		}
		inline := val[boltBucketHdrSize:]
		if len(inline) < boltPageHeader {
			return nil, fmt.Errorf("%s: inline bucket %q is %d bytes", where, key, len(inline))
		}
		ne := binary.NativeEndian
		ip := &rawPage{flags: ne.Uint16(inline[8:10]), count: int(ne.Uint16(inline[10:12])), b: inline}
		if _, err := c.check(ip, nil, nil, depth+1); err != nil {
			return nil, err
		}
	}
	if p.count == 0 {
		return lo, nil
	}
	return prev, nil
}
