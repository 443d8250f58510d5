package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record sealing (format 3, E64). Every value the store writes is
//
//	crc32c(scope ‖ 0 ‖ key ‖ payload) (4 bytes, big endian) ‖ payload
//
// where scope names the bucket the record lives in ("collections",
// "partitions", "idempotency", or "docs/" + collection name). Covering the
// scope and the key, not only the payload, means a record read under a
// damaged key, or found in another collection's bucket, fails its check
// like a damaged payload does. bbolt checksums only its meta pages, so
// without this a flipped byte inside a document value would be served.

const sumLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Scopes of the top-level buckets.
var (
	scopeCollections = []byte("collections")
	scopePartitions  = []byte("partitions")
	scopeIdempotency = []byte("idempotency")
)

// docScope is the checksum scope of a collection's documents.
func docScope(collection string) []byte { return append([]byte("docs/"), collection...) }

// zeroByte separates scope and key; a literal at the call escapes and
// costs an allocation per record.
var zeroByte = []byte{0}

func recordSum(scope, key, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, scope)
	c = crc32.Update(c, castagnoli, zeroByte)
	c = crc32.Update(c, castagnoli, key)
	return crc32.Update(c, castagnoli, payload)
}

// seal returns the stored form of payload under scope and key.
func seal(scope, key, payload []byte) []byte {
	out := make([]byte, sumLen, sumLen+len(payload))
	binary.BigEndian.PutUint32(out, recordSum(scope, key, payload))
	return append(out, payload...)
}

// sealInPlace fills the checksum of v, whose first sumLen bytes were
// reserved for it and whose rest is the payload.
func sealInPlace(scope, key, v []byte) {
	binary.BigEndian.PutUint32(v, recordSum(scope, key, v[sumLen:]))
}

// ChecksumError is a stored record whose checksum does not match its
// bytes. It is never served as data (E64).
type ChecksumError struct {
	Stored, Computed uint32
	Size             int // bytes of the stored value
}

func (e *ChecksumError) Error() string {
	if e.Size < sumLen {
		return fmt.Sprintf("damaged record: %d bytes, shorter than its %d-byte checksum", e.Size, sumLen)
	}
	return fmt.Sprintf("damaged record: checksum mismatch (stored %08x, computed %08x over %d bytes)", e.Stored, e.Computed, e.Size-sumLen)
}

// unseal checks a stored value and returns its payload (aliasing v).
func unseal(scope, key, v []byte) ([]byte, error) {
	if len(v) < sumLen {
		return nil, &ChecksumError{Size: len(v)}
	}
	stored := binary.BigEndian.Uint32(v)
	if got := recordSum(scope, key, v[sumLen:]); got != stored {
		return nil, &ChecksumError{Stored: stored, Computed: got, Size: len(v)}
	}
	return v[sumLen:], nil
}

// Unwrap makes errors.Is(err, errDamaged) hold for checksum failures.
func (e *ChecksumError) Unwrap() error { return errDamaged }
