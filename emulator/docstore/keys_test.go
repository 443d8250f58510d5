package docstore

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestE93_StoredKeysOwnTheirBytes (specs/emulator-contract.md E93): the
// keys a batch plans, and so the store's map, its tombstones and every
// modality fed from Changes, are copies: a key that is a substring of a
// large request buffer does not keep that buffer alive once the request
// is gone.
func TestE93_StoredKeysOwnTheirBytes(t *testing.T) {
	const batches, bufBytes = 32, 1 << 20
	s := New()
	heapNow := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heapNow()
	for i := range batches {
		// One request buffer a batch, the keys carved from its tail as
		// the adapter's batches carve them.
		buf := strings.Repeat("v", bufBytes) + "up-" + strconv.Itoa(i) + "del-" + strconv.Itoa(i)
		up := buf[bufBytes : bufBytes+3+len(strconv.Itoa(i))]
		del := buf[bufBytes+len(up):]
		b := s.NewBatch(2)
		b.Upsert(up, uint64(10+i), nil, "p")
		b.Delete(del, uint64(10+i))
		for _, ch := range b.Changes() {
			if pointsInto(ch.PK, buf) {
				t.Fatalf("batch %d: change key %q points into the request buffer (E93)", i, ch.PK)
			}
		}
		s.Commit(b)
	}
	if got, want := s.Live(), batches; got != want {
		t.Fatalf("%d live documents, want %d", got, want)
	}
	grown := int64(heapNow()) - int64(base)
	// Kept substrings would hold every buffer: batches MiB.
	if grown > batches*bufBytes/8 {
		t.Fatalf("heap grew %d bytes over %d batches of %d-byte buffers: the stored keys keep their request buffers alive (E93)", grown, batches, bufBytes)
	}
	runtime.KeepAlive(s)
}

// pointsInto reports whether s's bytes lie inside buf's.
func pointsInto(s, buf string) bool {
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(buf)))
	return p >= lo && p < lo+uintptr(len(buf))
}
