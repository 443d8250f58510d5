// Package storage is the emulator's durable state in one bbolt file
// (specs/emulator-contract.md E60, E61): the catalog (definition, lineage and
// state per collection name), idempotency records, per-partition stream
// state, and each collection's documents and tombstones.
//
// Every Update is one bbolt transaction, fsynced before it returns. The
// emulator keeps its working state in memory and writes through; Load reads
// everything back on open.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/contract"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// lockTimeout bounds the wait for bbolt's file lock.
var lockTimeout = 2 * time.Second

// FileName is the bbolt file inside the data directory.
const FileName = "emulator.db"

// formatVersion 3: every value is sealed with a checksum (record.go, E64);
// document keys carry a length prefix (docKey). Files of format 2 (no
// checksums) and 1 (no checksums, raw document keys) are migrated to 3 by
// the first read-write Open (migrate.go).
const (
	formatVersion = "3"
	formatNoSums  = "2"
	formatRawKeys = "1"
)

var (
	bucketMeta        = []byte("meta")
	bucketCollections = []byte("collections")
	bucketPartitions  = []byte("partitions")
	bucketIdempotency = []byte("idempotency")
	bucketDocs        = []byte("docs") // holds one nested bucket per collection
	keyFormat         = []byte("format")
	allBuckets        = [][]byte{bucketMeta, bucketCollections, bucketPartitions, bucketIdempotency, bucketDocs}
)

// Document record prefixes.
const (
	recLive      = 'D' // protobuf Document (read only)
	recRow       = 'R' // compact row encoding
	recTombstone = 'T'
)

// DB is an open store.
type DB struct {
	db   *bolt.DB
	path string
}

// Open opens or creates the store in dir.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// Timeout: a second process holding the file lock fails Open instead
	// of blocking it forever.
	// InitialMmapSize: bbolt grows the file to exactly the needed size
	// (a truncate plus an extra fsync per commit) while the mapping is
	// smaller than AllocSize; a large initial mapping (virtual address
	// space only) makes it grow in AllocSize chunks from the start.
	// A file shorter than its pages would fault inside the mapping
	// (SIGBUS) instead of failing Open (E63).
	if err := precheck(path); err != nil {
		return nil, err
	}
	db, err := openFile(path)
	if err != nil {
		return nil, err
	}
	return &DB{db: db, path: path}, nil
}

// openFile opens the bbolt file and prepares its buckets, migrating an
// older format. bbolt walks the pages here (NoFreelistSync rebuilds the
// freelist from them); a damaged page that passed precheck panics or
// faults inside bbolt, which becomes an error naming the file.
func openFile(path string) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, fmt.Errorf("storage: open %s: the file's page structure is damaged (%v): %w", path, r, errDamaged)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType, Timeout: lockTimeout, InitialMmapSize: 1 << 30})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("storage: open %s: file is locked by another emulator (waited %s): %w", path, lockTimeout, err)
		}
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db.AllocSize = 64 << 20
	err = db.Update(func(tx *bolt.Tx) error {
		var format []byte
		if meta := tx.Bucket(bucketMeta); meta != nil {
			format = meta.Get(keyFormat)
		}
		for _, b := range allBuckets {
			if tx.Bucket(b) != nil {
				continue
			}
			// Buckets are created with the format mark, in one
			// transaction: a marked file without one lost it (a whole
			// kind of record), which must not read as "no records".
			if format != nil {
				return fmt.Errorf("storage: open %s: bucket %q is missing: %w", path, b, errDamaged)
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := format; {
		case v == nil:
			return meta.Put(keyFormat, []byte(formatVersion))
		case string(v) == formatRawKeys || string(v) == formatNoSums:
			return migrate(tx, path, string(v))
		case string(v) != formatVersion:
			return fmt.Errorf("storage: %s has format %q, this build reads %q (and migrates %q and %q)", path, v, formatVersion, formatNoSums, formatRawKeys)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the file.
func (d *DB) Close() error { return d.db.Close() }

// Tx is one write transaction.
type Tx struct {
	tx *bolt.Tx
	// buckets caches document buckets: PutEntry runs once per row.
	buckets map[string]docBucket
	// arena holds the keys and values of PutEntry: bbolt keeps references
	// to them until the transaction ends, so they are carved from chunks
	// that live as long as the transaction instead of allocated per row.
	arena []byte
	// key and row are PutEntry's scratch: a record is encoded once into
	// row (one pass over its fields) and copied into the arena at its
	// exact size; bbolt copies keys itself, so key never leaves scratch.
	key, row []byte
}

// arenaChunk is the size of an arena chunk.
const arenaChunk = 64 << 10

// reserve returns an empty slice with room for at least n bytes at the end
// of the arena; take then keeps the bytes appended to it.
func (t *Tx) reserve(n int) []byte {
	if cap(t.arena)-len(t.arena) < n {
		t.arena = make([]byte, 0, max(arenaChunk, n))
	}
	return t.arena[len(t.arena):len(t.arena):cap(t.arena)]
}

// take keeps b, built by appending to the last reserve within its room, in
// the arena, and returns it with its capacity cut to its length. A b that
// outgrew the room (append moved it) is its own allocation.
func (t *Tx) take(b []byte) []byte {
	free := t.arena[len(t.arena):cap(t.arena)]
	if len(b) > 0 && len(b) <= len(free) && &b[0] == &free[0] {
		t.arena = t.arena[:len(t.arena)+len(b)]
	}
	return b[:len(b):len(b)]
}

// Update runs fn in one transaction and commits (fsync) when fn returns nil.
func (d *DB) Update(fn func(*Tx) error) error {
	return d.db.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// PutCollection stores the catalog record of a collection name. Only the
// definition, lineage and state of rec are meaningful.
func (t *Tx) PutCollection(rec *apiv1.CollectionStatus) error {
	b, err := proto.Marshal(rec)
	if err != nil {
		return err
	}
	k := []byte(rec.GetDefinition().GetName())
	return t.tx.Bucket(bucketCollections).Put(k, seal(scopeCollections, k, b))
}

// PutPartition stores a partition's stream state.
func (t *Tx) PutPartition(ps *apiv1.PartitionState) error {
	b, err := proto.Marshal(ps)
	if err != nil {
		return err
	}
	k := []byte(ps.GetSourcePartition())
	return t.tx.Bucket(bucketPartitions).Put(k, seal(scopePartitions, k, b))
}

// DeletePartition forgets a partition's stream state.
func (t *Tx) DeletePartition(name string) error {
	return t.tx.Bucket(bucketPartitions).Delete([]byte(name))
}

// IdempotencyKey is the storage key of (client id, idempotency key).
func IdempotencyKey(clientID, key string) []byte {
	out := make([]byte, 0, len(clientID)+1+len(key))
	out = append(out, clientID...)
	out = append(out, 0)
	return append(out, key...)
}

// PutIdempotency stores the digest of an accepted request and its response.
func (t *Tx) PutIdempotency(key []byte, digest [32]byte, resp []byte) error {
	v := make([]byte, sumLen, sumLen+32+len(resp))
	v = append(v, digest[:]...)
	v = append(v, resp...)
	sealInPlace(scopeIdempotency, key, v)
	return t.tx.Bucket(bucketIdempotency).Put(key, v)
}

// docBucket is a collection's document bucket and its checksum scope.
type docBucket struct {
	b     *bolt.Bucket
	scope []byte
}

func (t *Tx) docs(collection string) (docBucket, error) {
	if b, ok := t.buckets[collection]; ok {
		return b, nil
	}
	b, err := t.tx.Bucket(bucketDocs).CreateBucketIfNotExists([]byte(collection))
	if err != nil {
		return docBucket{}, err
	}
	if t.buckets == nil {
		t.buckets = map[string]docBucket{}
	}
	// Fuller pages mean fewer pages written (and fsynced) per batch; keys
	// from auto-increment ids arrive mostly in order.
	b.FillPercent = docFillPercent
	db := docBucket{b: b, scope: docScope(collection)}
	t.buckets[collection] = db
	return db, nil
}

// docFillPercent is the bbolt split threshold for document buckets.
var docFillPercent = 0.9

// ClearDocs removes every document and tombstone of a collection.
func (t *Tx) ClearDocs(collection string) error {
	delete(t.buckets, collection)
	err := t.tx.Bucket(bucketDocs).DeleteBucket([]byte(collection))
	if errors.Is(err, bolt.ErrBucketNotFound) {
		return nil
	}
	return err
}

// PutEntry stores the entry of one primary key.
func (t *Tx) PutEntry(collection, pk string, e *docstore.Entry) error {
	b, err := t.docs(collection)
	if err != nil {
		return err
	}
	t.key = appendDocKey(t.key[:0], pk)
	row, err := EncodeEntry(append(t.row[:0], 0, 0, 0, 0), e)
	if err != nil {
		return fmt.Errorf("storage: collection %q key %q: %w", collection, pk, err)
	}
	t.row = row
	// bbolt keeps a reference to the value until commit: it gets its own
	// bytes of the transaction's arena.
	v := t.take(append(t.reserve(len(row)), row...))
	sealInPlace(b.scope, t.key, v)
	return b.b.Put(t.key, v)
}

// DeleteEntry forgets one primary key.
func (t *Tx) DeleteEntry(collection, pk string) error {
	b, err := t.docs(collection)
	if err != nil {
		return err
	}
	return b.b.Delete(docKey(pk))
}

// docKey is the bbolt key of a primary key: its length as a uvarint, then
// the key. Canonical keys of non-negative integers (auto-increment ids) then
// sort numerically, so a batch of new rows lands on a few adjacent leaf
// pages instead of being interleaved with older keys by decimal-string
// order ("1230" < "123000" < "1231"); fewer dirty pages make each fsynced
// commit cheaper.
func docKey(pk string) []byte {
	return appendDocKey(make([]byte, 0, binary.MaxVarintLen64+len(pk)), pk)
}

func appendDocKey(dst []byte, pk string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(pk)))
	return append(dst, pk...)
}

func decodeDocKey(k []byte) (string, error) {
	n, w := binary.Uvarint(k)
	if w > 0 && len(binary.AppendUvarint(nil, n)) != w {
		return "", fmt.Errorf("storage: bad document key %x: non-minimal length prefix", k)
	}
	if w <= 0 || uint64(len(k)-w) != n {
		return "", fmt.Errorf("storage: bad document key %x: length prefix does not match the key", k)
	}
	return string(k[w:]), nil
}

// EncodeEntry appends the record form of e to dst: 'T' + version for a
// tombstone, 'R' + a compact row encoding for a live document (written
// without reflection: this runs for every row of every batch). Records of
// the older protobuf form 'D' are still read.
//
// A compact entry's values are already encoded (E45): the record is its
// header, then each carried field's name followed by the slot's bytes as
// they are, the same bytes a map-form entry of those values encodes to.
func EncodeEntry(dst []byte, e *docstore.Entry) ([]byte, error) {
	if e.Deleted {
		dst = append(dst, recTombstone)
		return binary.AppendUvarint(dst, e.Version), nil
	}
	if dst == nil {
		dst = make([]byte, 0, entrySize(e))
	}
	dst = append(dst, recRow)
	dst = binary.AppendUvarint(dst, e.Version)
	if !utf8.ValidString(e.Partition) {
		return nil, errors.New("partition is not valid UTF-8")
	}
	dst = appendString(dst, e.Partition)
	dst = binary.AppendUvarint(dst, uint64(e.NumFields()))
	var err error
	if e.RangeEncoded(func(name string, enc []byte) bool {
		if !utf8.ValidString(name) {
			err = fmt.Errorf("field name %q is not valid UTF-8", name)
			return false
		}
		dst = append(appendString(dst, name), enc...)
		return true
	}) {
		return dst, err
	}
	e.Range(func(name string, v *apiv1.Value) bool {
		if !utf8.ValidString(name) {
			err = fmt.Errorf("field name %q is not valid UTF-8", name)
			return false
		}
		dst = appendString(dst, name)
		if dst, err = docstore.AppendValue(dst, v); err != nil {
			err = fmt.Errorf("field %q: %w", name, err)
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return dst, nil
}

// entrySize bounds the length of EncodeEntry's record of e.
func entrySize(e *docstore.Entry) int {
	if e.Deleted {
		return 1 + binary.MaxVarintLen64
	}
	size := 1 + 3*binary.MaxVarintLen64 + len(e.Partition) + len(e.Row)
	if e.RangeEncoded(func(name string, _ []byte) bool {
		size += binary.MaxVarintLen64 + len(name)
		return true
	}) {
		return size
	}
	e.Range(func(name string, v *apiv1.Value) bool {
		size += binary.MaxVarintLen64 + len(name) + 1 + valueSize(v)
		return true
	})
	return size
}

func valueSize(v *apiv1.Value) int {
	switch k := v.GetKind().(type) {
	case *apiv1.Value_StringValue:
		return binary.MaxVarintLen64 + len(k.StringValue)
	case *apiv1.Value_JsonValue:
		return binary.MaxVarintLen64 + len(k.JsonValue)
	case *apiv1.Value_BytesValue:
		return binary.MaxVarintLen64 + len(k.BytesValue)
	case *apiv1.Value_VectorValue:
		return binary.MaxVarintLen64 + 4*len(k.VectorValue.GetValues())
	}
	return binary.MaxVarintLen64
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// rowReader decodes the row encoding; every read is bounds-checked and the
// first error sticks, naming the offset.
type rowReader struct {
	b   []byte
	off int
	err error
}

func (r *rowReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("storage: bad row record at offset %d: %s", r.off, what)
	}
}

func (r *rowReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.off += n
	return v
}

func (r *rowReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(fmt.Sprintf("length %d exceeds the %d bytes left", n, len(r.b)-r.off))
		return nil
	}
	out := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return out
}

func (r *rowReader) text(what string) string {
	b := r.bytes(r.uvarint())
	if r.err == nil && !utf8.Valid(b) {
		r.fail(what + " is not valid UTF-8")
	}
	return string(b)
}

// value checks the encoded value at the reader's offset and returns its
// bytes.
func (r *rowReader) value() []byte {
	if r.err != nil {
		return nil
	}
	n, err := docstore.ValueLen(r.b[r.off:])
	if err != nil {
		r.fail(err.Error())
		return nil
	}
	return r.bytes(uint64(n))
}

// Decoder turns stored document records into entries. It keeps the
// layout of the last row it decoded: the rows of one table shape share
// one layout (E45) instead of each building its own.
type Decoder struct {
	layout *contract.Layout
	names  []string
	row    docstore.RowBuilder
}

func (d *Decoder) decodeRow(b []byte) (*docstore.Entry, error) {
	r := &rowReader{b: b, off: 1}
	e := &docstore.Entry{Version: r.uvarint(), Partition: r.text("partition")}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(b)) {
		r.fail(fmt.Sprintf("field count %d exceeds the record size", n))
	}
	if r.err != nil {
		return nil, r.err
	}
	d.names = d.names[:0]
	d.row.Reset()
	for i := uint64(0); i < n && r.err == nil; i++ {
		nb := r.bytes(r.uvarint())
		if r.err == nil && !utf8.Valid(nb) {
			r.fail("field name is not valid UTF-8")
		}
		v := r.value()
		if r.err == nil {
			d.names = append(d.names, string(nb))
			d.row.Add(v)
		}
	}
	if r.err == nil && r.off != len(b) {
		r.fail(fmt.Sprintf("%d trailing bytes", len(b)-r.off))
	}
	if r.err != nil {
		return nil, r.err
	}
	if d.layout == nil || !slices.Equal(d.layout.Names, d.names) {
		l := contract.NewLayout(d.names)
		if !distinct(l, d.names) {
			return nil, fmt.Errorf("storage: bad row record: duplicate field name")
		}
		d.layout = l
	}
	e.Layout, e.Row = d.layout, d.row.Row()
	return e, nil
}

// distinct reports whether every name of names has its own slot in l (a
// repeated name maps to one of its positions only).
func distinct(l *contract.Layout, names []string) bool {
	for i, n := range names {
		if l.Index(n) != i {
			return false
		}
	}
	return true
}

// DecodeEntry parses a record written by EncodeEntry (or the older 'D'
// protobuf form).
func DecodeEntry(b []byte) (*docstore.Entry, error) {
	var d Decoder
	return d.Decode(b)
}

// Decode is DecodeEntry, sharing layouts with the rows decoded before.
func (d *Decoder) Decode(b []byte) (*docstore.Entry, error) {
	if len(b) == 0 {
		return nil, errors.New("storage: empty document record")
	}
	switch b[0] {
	case recTombstone:
		v, n := binary.Uvarint(b[1:])
		if n <= 0 || 1+n != len(b) {
			return nil, fmt.Errorf("storage: bad tombstone record (%d bytes)", len(b))
		}
		return &docstore.Entry{Version: v, Deleted: true}, nil
	case recRow:
		return d.decodeRow(b)
	case recLive:
		var doc apiv1.Document
		if err := proto.Unmarshal(b[1:], &doc); err != nil {
			return nil, fmt.Errorf("storage: bad document record: %w", err)
		}
		return &docstore.Entry{Version: doc.GetCommitTs(), Fields: doc.GetFields(), Partition: doc.GetSourcePartition()}, nil
	}
	return nil, fmt.Errorf("storage: unknown document record type %q at offset 0", b[0])
}
