package docstore

import (
	"slices"
	"sort"
	"sync"
)

// keyOrder serves the store's keys in sorted order without sorting every
// key on every read (E94). It is built on the first ordered read: a
// sorted slice of the keys the map held then (base) plus the keys
// inserted since (added, sorted on the next ordered read: a small slice
// while ingest runs between two pages). Keys removed from the map stay in
// base and are skipped on the way (the map is the truth); base is
// rebuilt once added or removed keys reach a quarter of it. Until the
// first ordered read, and after a rebuild is due, it holds nothing and
// the write path pays nothing for it.
//
// Readers run concurrently under the emulator's read lock, so the order
// has its own mutex; writers (Commit, Put, Remove, CollectTombstones) run
// alone under its write lock and only note inserted and removed keys.
type keyOrder struct {
	mu          sync.Mutex
	built       bool
	base        []string
	added       []string
	addedSorted bool
	removed     int
}

// noteInsert records a key that entered the map.
func (o *keyOrder) noteInsert(pk string) {
	if !o.built {
		return
	}
	o.added = append(o.added, pk)
	o.addedSorted = false
	o.checkStale()
}

// noteRemove records a key that left the map.
func (o *keyOrder) noteRemove() {
	if !o.built {
		return
	}
	o.removed++
	o.checkStale()
}

// checkStale drops the order once keeping it up would cost more than a
// rebuild: the next ordered read sorts the map's keys again.
func (o *keyOrder) checkStale() {
	if limit := len(o.base)/4 + 1024; len(o.added) > limit || o.removed > limit {
		o.base, o.added, o.built, o.removed = nil, nil, false, 0
	}
}

// ascend calls fn with every key of m after `after` ("" = from the
// first) that m still holds, in ascending order, until fn returns false.
func (o *keyOrder) ascend(m map[string]*Entry, after string, fn func(pk string, e *Entry) bool) {
	o.mu.Lock()
	if !o.built {
		o.base = make([]string, 0, len(m))
		for k := range m {
			o.base = append(o.base, k)
		}
		sort.Strings(o.base)
		o.added, o.addedSorted, o.removed, o.built = o.added[:0], true, 0, true
	}
	if !o.addedSorted {
		sort.Strings(o.added)
		o.added = slices.Compact(o.added)
		o.addedSorted = true
	}
	base, added := o.base, o.added
	o.mu.Unlock()
	// Writers do not run while a reader holds the emulator's read lock,
	// so base and added stay as they are for the whole walk.
	i := upper(base, after)
	j := upper(added, after)
	for i < len(base) || j < len(added) {
		var pk string
		switch {
		case j == len(added) || (i < len(base) && base[i] < added[j]):
			pk = base[i]
			i++
		case i == len(base) || added[j] < base[i]:
			pk = added[j]
			j++
		default: // in both: removed after the build and inserted again
			pk = base[i]
			i++
			j++
		}
		if e, ok := m[pk]; ok && !fn(pk, e) {
			return
		}
	}
}

// upper is the index of the first key in sorted keys that is > after
// (every key when after is "").
func upper(keys []string, after string) int {
	if after == "" {
		return 0
	}
	return sort.Search(len(keys), func(i int) bool { return keys[i] > after })
}
