package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

// marker is a document value that occurs once in a store file, so a test
// can find the bytes to damage.
const marker = "integrity-marker-0123456789abcdef"

func storeWithMarker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutCollection(&apiv1.CollectionStatus{Definition: &apiv1.CollectionDefinition{Name: "books"}}); err != nil {
			return err
		}
		return tx.PutEntry("books", "42", &docstore.Entry{Version: 7, Partition: "table:1", Fields: map[string]*apiv1.Value{
			"title": {Kind: &apiv1.Value_StringValue{StringValue: marker}}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// overwrite replaces n bytes at offset at of every occurrence of find in
// the store file (bbolt may keep an older copy of a page) with 'X'.
func overwrite(t *testing.T, dir string, find []byte, at, n int) {
	t.Helper()
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	for i := bytes.Index(b, find); i >= 0; {
		copy(b[i+at:i+at+n], bytes.Repeat([]byte{'X'}, n))
		hits++
		j := bytes.Index(b[i+1:], find)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if hits == 0 {
		t.Fatalf("%q not found in %s", find, path)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// rule: E64 — 7 bytes overwritten inside a stored document value: Load
// fails naming the collection, the key and the file, and the damaged
// document is never handed to the caller.
func TestE64_DamagedDocumentValueIsRefused(t *testing.T) {
	dir := storeWithMarker(t)
	overwrite(t, dir, []byte(marker), 10, 7)
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Load(func(coll, pk string, e *docstore.Entry) error {
		t.Fatalf("damaged document served: %s/%s = %v", coll, pk, e.Field("title"))
		return nil
	})
	var ce *ChecksumError
	if err == nil || !errors.As(err, &ce) {
		t.Fatalf("want a checksum error, got %v", err)
	}
	for _, want := range []string{`collection "books"`, `key "42"`, filepath.Join(dir, FileName)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// fullStore writes one record of every kind: a collection, a partition's
// stream state, an idempotency record, a live document and a tombstone.
func fullStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		for _, name := range []string{"books", "films"} {
			if err := tx.PutCollection(&apiv1.CollectionStatus{Definition: &apiv1.CollectionDefinition{Name: name}, Lineage: &apiv1.Lineage{SchemaVersion: 3}}); err != nil {
				return err
			}
		}
		if err := tx.PutPartition(&apiv1.PartitionState{SourcePartition: "table:1", Collection: "books", SourceEpoch: 2, LastSeq: 9, ResolvedTs: 500}); err != nil {
			return err
		}
		if err := tx.PutIdempotency(IdempotencyKey("adapter", "req-1"), [32]byte{7}, []byte("response")); err != nil {
			return err
		}
		if err := tx.PutEntry("books", "42", &docstore.Entry{Version: 7, Partition: "table:1", Fields: map[string]*apiv1.Value{
			"title": {Kind: &apiv1.Value_StringValue{StringValue: "dune"}}}}); err != nil {
			return err
		}
		return tx.PutEntry("books", "43", &docstore.Entry{Version: 8, Deleted: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tamper changes the store file underneath the store's sealing, as damage
// on disk would: fn gets the root transaction of the raw bbolt file.
func tamper(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipLastByte(bucket *bolt.Bucket, key []byte) error {
	v := append([]byte(nil), bucket.Get(key)...)
	if len(v) == 0 {
		return fmt.Errorf("no value at %q", key)
	}
	v[len(v)-1] ^= 0x40
	return bucket.Put(key, v)
}

// rule: E64 — one damaged record of each kind: Load fails naming the file
// and the record (collection or partition, and key), and Verify lists it.
func TestE64_EachDamageKindIsNamed(t *testing.T) {
	docs := func(tx *bolt.Tx, coll string) *bolt.Bucket { return tx.Bucket(bucketDocs).Bucket([]byte(coll)) }
	for _, tc := range []struct {
		name   string
		damage func(tx *bolt.Tx) error
		want   []string
	}{
		{"document value", func(tx *bolt.Tx) error { return flipLastByte(docs(tx, "books"), docKey("42")) },
			[]string{`collection "books" key "42"`, "checksum mismatch"}},
		{"tombstone", func(tx *bolt.Tx) error { return flipLastByte(docs(tx, "books"), docKey("43")) },
			[]string{`collection "books" key "43"`, "checksum mismatch"}},
		{"catalog record (definition and lineage)", func(tx *bolt.Tx) error { return flipLastByte(tx.Bucket(bucketCollections), []byte("films")) },
			[]string{`catalog record of collection "films"`, "checksum mismatch"}},
		{"partition stream state (progress)", func(tx *bolt.Tx) error { return flipLastByte(tx.Bucket(bucketPartitions), []byte("table:1")) },
			[]string{`stream state of partition "table:1"`, "checksum mismatch"}},
		{"idempotency record", func(tx *bolt.Tx) error {
			return flipLastByte(tx.Bucket(bucketIdempotency), IdempotencyKey("adapter", "req-1"))
		}, []string{`idempotency record of client "adapter" key "req-1"`, "checksum mismatch"}},
		{"document under another key", func(tx *bolt.Tx) error {
			b := docs(tx, "books")
			v := append([]byte(nil), b.Get(docKey("42"))...)
			return b.Put(docKey("44"), v)
		}, []string{`collection "books" key "44"`, "checksum mismatch"}},
		{"document in another collection", func(tx *bolt.Tx) error {
			v := append([]byte(nil), docs(tx, "books").Get(docKey("42"))...)
			b, err := tx.Bucket(bucketDocs).CreateBucketIfNotExists([]byte("films"))
			if err != nil {
				return err
			}
			return b.Put(docKey("42"), v)
		}, []string{`collection "films" key "42"`, "checksum mismatch"}},
		{"value shorter than its checksum", func(tx *bolt.Tx) error { return docs(tx, "books").Put(docKey("42"), []byte{1, 2}) },
			[]string{`collection "books" key "42"`, "shorter than its 4-byte checksum"}},
		{"damaged document key", func(tx *bolt.Tx) error {
			return docs(tx, "books").Put([]byte{9, 'x'}, seal(docScope("books"), []byte{9, 'x'}, []byte{'T', 1}))
		}, []string{`collection "books"`, "length prefix does not match"}},
		{"sound checksum over an undecodable document", func(tx *bolt.Tx) error {
			k := docKey("45")
			return docs(tx, "books").Put(k, seal(docScope("books"), k, []byte{'Z'}))
		}, []string{`collection "books" key "45"`, "unknown document record type"}},
		{"missing bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketPartitions) },
			[]string{`bucket "partitions" is missing`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fullStore(t)
			tamper(t, dir, tc.damage)
			path := filepath.Join(dir, FileName)
			// A lost bucket is refused by Open, a damaged record by Load.
			db, err := Open(dir)
			if err == nil {
				_, err = db.Load(func(string, string, *docstore.Entry) error { return nil })
				db.Close()
			}
			if err == nil || !errors.Is(err, errDamaged) {
				t.Fatalf("Open+Load: want a damage error, got %v", err)
			}
			for _, want := range append([]string{path}, tc.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Load error %q does not say %q", err, want)
				}
			}
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Damaged) != 1 {
				t.Fatalf("Verify: want one damaged record, got %q", rep.Damaged)
			}
			for _, want := range append([]string{path}, tc.want...) {
				if !strings.Contains(rep.Damaged[0], want) {
					t.Errorf("Verify line %q does not say %q", rep.Damaged[0], want)
				}
			}
		})
	}
}

// rule: E65 — Verify reads a sound store without changing it, counts its
// records by kind, and goes on past damaged records to list all of them.
func TestE65_VerifyListsEveryDamagedRecord(t *testing.T) {
	dir := fullStore(t)
	rep, err := Verify(dir)
	if err != nil || !rep.OK() {
		t.Fatalf("sound store: %+v %v", rep, err)
	}
	if rep.Collections != 2 || rep.Partitions != 1 || rep.Idempotency != 1 || rep.Documents != 2 || rep.Format != formatVersion {
		t.Fatalf("counts: %+v", rep)
	}
	tamper(t, dir, func(tx *bolt.Tx) error {
		docs := tx.Bucket(bucketDocs).Bucket([]byte("books"))
		if err := flipLastByte(docs, docKey("42")); err != nil {
			return err
		}
		if err := flipLastByte(docs, docKey("43")); err != nil {
			return err
		}
		return flipLastByte(tx.Bucket(bucketPartitions), []byte("table:1"))
	})
	rep, err = Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Damaged) != 3 || rep.Documents != 0 || rep.Partitions != 0 || rep.Collections != 2 {
		t.Fatalf("want three damaged records listed, got %+v", rep)
	}
	// A running emulator's store is not read.
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := lockTimeout
	lockTimeout = 50 * time.Millisecond
	defer func() { lockTimeout = old }()
	if _, err := Verify(filepath.Dir(db.path)); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("locked store: %v", err)
	}
	if _, err := Verify(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing store: %v", err)
	}
}

// rule: E63 — Verify reports a truncated file as damage (the meta page
// precheck), without mapping it.
func TestE65_VerifyTruncatedFile(t *testing.T) {
	dir := fullStore(t)
	path := filepath.Join(dir, FileName)
	if err := os.Truncate(path, 3*4096); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil || len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0], "says its pages reach") {
		t.Fatalf("truncated: %+v %v", rep, err)
	}
}

// legacyStore writes a file of an older format by hand: values without
// checksums, document keys raw (format 1) or length-prefixed (format 2).
func legacyStore(t *testing.T, format string, bad bool) string {
	t.Helper()
	dir := t.TempDir()
	b, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketCollections, bucketPartitions, bucketIdempotency, bucketDocs} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keyFormat, []byte(format)); err != nil {
			return err
		}
		rec, _ := proto.Marshal(&apiv1.CollectionStatus{Definition: &apiv1.CollectionDefinition{Name: "books"}})
		if err := tx.Bucket(bucketCollections).Put([]byte("books"), rec); err != nil {
			return err
		}
		ps, _ := proto.Marshal(&apiv1.PartitionState{SourcePartition: "table:1", Collection: "books", ResolvedTs: 90})
		if err := tx.Bucket(bucketPartitions).Put([]byte("table:1"), ps); err != nil {
			return err
		}
		if err := tx.Bucket(bucketIdempotency).Put(IdempotencyKey("a", "r"), append(make([]byte, 32), "resp"...)); err != nil {
			return err
		}
		docs, err := tx.Bucket(bucketDocs).CreateBucket([]byte("books"))
		if err != nil {
			return err
		}
		key := func(pk string) []byte {
			if format == formatRawKeys {
				return []byte(pk)
			}
			return docKey(pk)
		}
		v, _ := EncodeEntry(nil, &docstore.Entry{Version: 4, Partition: "table:1", Fields: map[string]*apiv1.Value{"title": {Kind: &apiv1.Value_StringValue{StringValue: "dune"}}}})
		if err := docs.Put(key("1"), v); err != nil {
			return err
		}
		tomb, _ := EncodeEntry(nil, &docstore.Entry{Version: 5, Deleted: true})
		if err := docs.Put(key("2"), tomb); err != nil {
			return err
		}
		if bad {
			return docs.Put(key("3"), []byte{'R', 0xff})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rule: E64 — files of formats 1 and 2 (no checksums) are migrated to
// format 3 by the first Open, in one transaction: every record reads back
// unchanged and sealed; a record that does not decode is refused naming it
// and leaves the file as it was. Verify reads such a file without
// migrating it.
func TestE64_MigratesOlderFormats(t *testing.T) {
	for _, format := range []string{formatRawKeys, formatNoSums} {
		t.Run("format"+format, func(t *testing.T) {
			dir := legacyStore(t, format, false)
			rep, err := Verify(dir)
			if err != nil || !rep.OK() || rep.Documents != 2 || !strings.Contains(rep.Note, "no checksums") {
				t.Fatalf("verify before migration: %+v %v", rep, err)
			}
			db, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*docstore.Entry{}
			snap, err := db.Load(func(coll, pk string, e *docstore.Entry) error { got[coll+"/"+pk] = e; return nil })
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			if d := got["books/1"]; d == nil || d.Version != 4 || d.Field("title").GetStringValue() != "dune" {
				t.Fatalf("document after migration: %+v", got)
			}
			if d := got["books/2"]; d == nil || !d.Deleted || d.Version != 5 {
				t.Fatalf("tombstone after migration: %+v", got)
			}
			if len(snap.Collections) != 1 || len(snap.Partitions) != 1 || snap.Partitions[0].GetResolvedTs() != 90 || len(snap.Idempotency) != 1 {
				t.Fatalf("records after migration: %+v", snap)
			}
			rep, err = Verify(dir)
			if err != nil || !rep.OK() || rep.Format != formatVersion || rep.Documents != 2 || rep.Partitions != 1 || rep.Idempotency != 1 {
				t.Fatalf("verify after migration: %+v %v", rep, err)
			}

			bad := legacyStore(t, format, true)
			before, _ := os.ReadFile(filepath.Join(bad, FileName))
			if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), `collection "books" key "3"`) || !strings.Contains(err.Error(), "migrating format "+format) {
				t.Fatalf("undecodable legacy record: %v", err)
			}
			after, _ := os.ReadFile(filepath.Join(bad, FileName))
			if !bytes.Equal(before, after) {
				t.Fatal("a refused migration changed the file")
			}
			rep, err = Verify(bad)
			if err != nil || len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0], `key "3"`) {
				t.Fatalf("verify of an undecodable legacy record: %+v %v", rep, err)
			}
		})
	}
}

// FuzzUnsealRecord: any stored value either fails its check or is the
// exact sealed form of its payload; a document payload that passes then
// decodes or fails with an error, never a panic.
func FuzzUnsealRecord(f *testing.F) {
	k := docKey("42")
	d, _ := EncodeEntry(nil, &docstore.Entry{Version: 3, Partition: "table:1", Fields: map[string]*apiv1.Value{"a": {Kind: &apiv1.Value_Int64Value{Int64Value: 1}}}})
	f.Add([]byte("docs/books"), k, seal(docScope("books"), k, d))
	f.Add([]byte("partitions"), []byte("table:1"), []byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, scope, key, v []byte) {
		payload, err := unseal(scope, key, v)
		if err != nil {
			if !errors.Is(err, errDamaged) {
				t.Fatalf("unseal error %v is not a damage error", err)
			}
			return
		}
		if !bytes.Equal(seal(scope, key, payload), v) {
			t.Fatalf("accepted %x is not the sealed form of its payload", v)
		}
		_, _ = DecodeEntry(payload)
	})
}

// rule: E63, E64 — random damage anywhere past the meta pages (seeded; the
// seed is printed on failure): Open, Load and Verify return an error or
// succeed, never panic or fault, and every document Load hands out equals
// the one written. (A record lost whole, e.g. when a leaf page's count is
// damaged, is not caught by record checksums; see E64.)
func TestE64_RandomDamageIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	err = db.Update(func(tx *Tx) error {
		for i := 0; i < 400; i++ {
			pk := fmt.Sprint(i)
			e := &docstore.Entry{Version: uint64(i + 1), Partition: "table:1", Fields: map[string]*apiv1.Value{
				"body": {Kind: &apiv1.Value_StringValue{StringValue: strings.Repeat(pk, 1+i%7)}}}}
			if i%5 == 0 {
				e = &docstore.Entry{Version: uint64(i + 1), Deleted: true}
			}
			want[pk], _ = EncodeEntry(nil, e)
			if err := tx.PutEntry("books", pk, e); err != nil {
				return err
			}
		}
		return tx.PutPartition(&apiv1.PartitionState{SourcePartition: "table:1", Collection: "books", ResolvedTs: 9})
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	pristine, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	// Only the pages in use matter: the file is grown in large chunks,
	// and damage past the high-water page is never read.
	m, err := readMeta(bytes.NewReader(pristine), int64(len(pristine)), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m1, err := readMeta(bytes.NewReader(pristine), int64(len(pristine)), int64(m.pageSize), 1); err == nil && m1.txid > m.txid {
		m = m1
	}
	pageSize, used := int(m.pageSize), int(m.pgid)*int(m.pageSize)
	pristine = pristine[:used]
	outcomes := map[string]int{}
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		b := append([]byte(nil), pristine...)
		off := 2*pageSize + rng.Intn(used-2*pageSize-8)
		rng.Read(b[off : off+8])
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, FileName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(d)
		if err != nil {
			outcomes["refused at open"]++
			continue
		}
		served := 0
		_, err = db.Load(func(coll, pk string, e *docstore.Entry) error {
			got, _ := EncodeEntry(nil, e)
			if w, ok := want[pk]; !ok || !bytes.Equal(decodeCanon(t, got), decodeCanon(t, w)) {
				t.Fatalf("seed %d (8 bytes at offset %d): damaged document %s/%s served", seed, off, coll, pk)
			}
			served++
			return nil
		})
		db.Close()
		switch {
		case err != nil:
			outcomes["refused at load"]++
		case served == len(want):
			outcomes["intact (damage in unused space)"]++
		default:
			outcomes["records lost whole"]++
		}
		if _, err := Verify(d); err != nil {
			t.Fatalf("seed %d: verify: %v", seed, err)
		}
	}
	t.Logf("outcomes over 200 seeds: %v", outcomes)
}

// rule: E63 — a branch page whose two children are the same page: bbolt's
// freelist rebuild would panic in its own goroutine (unrecoverable); Open
// and Verify refuse the file by name instead.
func TestE63_PageReferencedTwiceIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		for i := 0; i < 2000; i++ {
			if err := tx.PutEntry("books", fmt.Sprint(i), &docstore.Entry{Version: 1, Partition: "table:1", Fields: map[string]*apiv1.Value{
				"body": {Kind: &apiv1.Value_StringValue{StringValue: strings.Repeat("x", 40)}}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	ne := binary.NativeEndian
	damaged := false
	for off := 2 * ps; off+ps <= len(b) && !damaged; off += ps {
		p := b[off:]
		if ne.Uint16(p[8:10])&boltBranchFlag != 0 && ne.Uint16(p[10:12]) >= 2 && ne.Uint64(p[0:8]) == uint64(off/ps) {
			// element 1's child := element 0's child
			copy(p[boltPageHeader+boltElemSize+8:boltPageHeader+boltElemSize+16], p[boltPageHeader+8:boltPageHeader+16])
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("no branch page found")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "referenced twice") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open: want a refusal naming the file and the page, got %v", err)
	}
	rep, err := Verify(dir)
	if err != nil || len(rep.Damaged) != 1 || !strings.Contains(rep.Damaged[0], "referenced twice") {
		t.Fatalf("Verify: %+v %v", rep, err)
	}
}
