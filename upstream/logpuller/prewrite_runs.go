package logpuller

import (
	"hash/maphash"
	"math/bits"
	"sort"
	"strings"
	"unsafe"
)

// A spilled run keeps only a small index in memory: a bloom filter over
// its (start_ts, key)s, the first key of every block of records, and one
// bit per record saying whether a COMMIT or ROLLBACK already took it. That
// is about two bytes per spilled prewrite, so a transaction of millions
// of rows costs megabytes, not its size (LP14).
const (
	// A block ends after blockRecords records or once it holds blockBytes:
	// one block is read to answer a lookup.
	blockRecords = 64
	blockBytes   = 8 << 10
	// bloomBitsPerKey gives a false-positive rate near 1% with 7 probes.
	bloomBitsPerKey = 10
	bloomProbes     = 7
	// tailRecords bounds a tail run (its bloom filter is sized before the
	// run's length is known).
	tailRecords = 1 << 16
)

var bloomSeed = maphash.MakeSeed()

func keyHash(k matchKey) uint64 {
	h := maphash.String(bloomSeed, k.key)
	return h ^ bits.RotateLeft64(k.startTs*0x9E3779B97F4A7C15, 31)
}

type bloom struct{ bits []uint64 }

func newBloom(n int) bloom {
	words := (max(n, 1)*bloomBitsPerKey + 63) / 64
	return bloom{bits: make([]uint64, words)}
}

func (b bloom) probes(h uint64, f func(bit uint64) bool) bool {
	n := uint64(len(b.bits)) * 64
	h1, h2 := h, (h>>33)|1
	for i := uint64(0); i < bloomProbes; i++ {
		if !f((h1 + i*h2) % n) {
			return false
		}
	}
	return true
}

func (b bloom) add(h uint64) {
	b.probes(h, func(bit uint64) bool { b.bits[bit/64] |= 1 << (bit % 64); return true })
}

func (b bloom) mayContain(h uint64) bool {
	return b.probes(h, func(bit uint64) bool { return b.bits[bit/64]&(1<<(bit%64)) != 0 })
}

func compareKey(a, b matchKey) int {
	switch {
	case a.startTs < b.startTs:
		return -1
	case a.startTs > b.startTs:
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// compareRecord compares a record's (start_ts, key) with k, without
// copying the record's key.
func compareRecord(c *PrewriteRecord, k matchKey) int {
	switch {
	case c.StartTs < k.startTs:
		return -1
	case c.StartTs > k.startTs:
		return 1
	}
	return strings.Compare(bytesView(c.Key), k.key)
}

// bytesView is b as a string without a copy, for comparisons only.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

type blockStart struct {
	first  matchKey // owns its key
	offset int64
	index  int // the block's first record number
}

// spilledRun is one run of a region's prewrites and its in-memory index.
type spilledRun struct {
	r       PrewriteRun
	indexed int64 // index bytes charged to the memory quota (LP18)
	filter  bloom
	blocks  []blockStart
	count   int
	last    matchKey
	taken   []uint64 // bit per record: consumed by a COMMIT or ROLLBACK
	live    int      // records not yet taken
	cost    int64    // charged against the disk quota
	cache   []PrewriteRecord
	cacheAt int // block number cached, -1 none
}

// runBuilder indexes a run while it is written.
type runBuilder struct {
	w          PrewriteWriter
	run        spilledRun
	blockStart int64
	cap        int // records the bloom filter is sized for
}

func newRunBuilder(w PrewriteWriter, capacity int) *runBuilder {
	return &runBuilder{w: w, cap: capacity, run: spilledRun{filter: newBloom(capacity), cacheAt: -1}}
}

// append writes rec, which must sort after every record before it.
func (b *runBuilder) append(rec *PrewriteRecord, k matchKey) error {
	off, err := b.w.Append(rec)
	if err != nil {
		return err
	}
	r := &b.run
	if len(r.blocks) == 0 || r.count-r.blocks[len(r.blocks)-1].index >= blockRecords || off-b.blockStart >= blockBytes {
		r.blocks = append(r.blocks, blockStart{first: matchKey{startTs: k.startTs, key: string([]byte(k.key))}, offset: off, index: r.count})
		b.blockStart = off
	}
	r.filter.add(keyHash(k))
	r.count++
	r.live++
	r.last = k
	r.cost += rec.SpillCost()
	return nil
}

func (b *runBuilder) full() bool { return b.run.count >= b.cap }

// lastKey is the last appended key (valid while count > 0).
func (b *runBuilder) lastKey() matchKey { return b.run.last }

func (b *runBuilder) finish() (*spilledRun, error) {
	pr, err := b.w.Finish()
	if err != nil {
		return nil, err
	}
	r := b.run
	r.r = pr
	r.last = matchKey{startTs: r.last.startTs, key: string([]byte(r.last.key))}
	r.taken = make([]uint64, (r.count+63)/64)
	return &r, nil
}

// find returns the record number and the record of k when the run holds
// it and no COMMIT or ROLLBACK took it yet.
func (r *spilledRun) find(k matchKey, h uint64) (int, *PrewriteRecord, error) {
	if r.live == 0 || r.count == 0 || compareKey(k, r.blocks[0].first) < 0 || compareKey(k, r.last) > 0 || !r.filter.mayContain(h) {
		return -1, nil, nil
	}
	bi := sort.Search(len(r.blocks), func(i int) bool { return compareKey(r.blocks[i].first, k) > 0 }) - 1
	if bi < 0 {
		return -1, nil, nil
	}
	if r.cacheAt != bi {
		end := r.count
		if bi+1 < len(r.blocks) {
			end = r.blocks[bi+1].index
		}
		recs, err := r.r.ReadBlock(r.blocks[bi].offset, end-r.blocks[bi].index)
		if err != nil {
			return -1, nil, err
		}
		r.cache, r.cacheAt = recs, bi
	}
	j := sort.Search(len(r.cache), func(i int) bool {
		return compareRecord(&r.cache[i], k) >= 0
	})
	if j == len(r.cache) || compareRecord(&r.cache[j], k) != 0 {
		return -1, nil, nil
	}
	n := r.blocks[bi].index + j
	if r.taken[n/64]&(1<<(n%64)) != 0 {
		return -1, nil, nil
	}
	return n, &r.cache[j], nil
}

// indexBytes is what the run's in-memory index holds: the bloom filter,
// the taken bits and the block starts with their keys (LP18).
func (r *spilledRun) indexBytes() int64 {
	n := 8*len(r.filter.bits) + 8*len(r.taken) + int(unsafe.Sizeof(blockStart{}))*cap(r.blocks) + len(r.last.key)
	for i := range r.blocks {
		n += len(r.blocks[i].first.key)
	}
	return int64(n)
}

// take marks record n consumed; it reports whether the run is now empty.
func (r *spilledRun) take(n int) bool {
	r.taken[n/64] |= 1 << (n % 64)
	r.live--
	if r.live == 0 {
		r.cache, r.cacheAt = nil, -1
	}
	return r.live == 0
}
