package storage

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/emulator/docstore"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &apiv1.CollectionStatus{Definition: &apiv1.CollectionDefinition{Name: "c"}, Lineage: &apiv1.Lineage{SchemaVersion: 2}}
	ps := &apiv1.PartitionState{SourcePartition: "table:1", Collection: "c", SourceEpoch: 3, LastSeq: 9, ResolvedTs: 77}
	live := &docstore.Entry{Version: 5, Partition: "table:1", Fields: map[string]*apiv1.Value{"a": {Kind: &apiv1.Value_StringValue{StringValue: "x"}}}}
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutCollection(rec); err != nil {
			return err
		}
		if err := tx.PutPartition(ps); err != nil {
			return err
		}
		if err := tx.PutEntry("c", "k1", live); err != nil {
			return err
		}
		if err := tx.PutEntry("c", "k2", &docstore.Entry{Version: 6, Deleted: true}); err != nil {
			return err
		}
		return tx.PutIdempotency(IdempotencyKey("cl", "key"), [32]byte{1}, []byte("resp"))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs := map[string]*docstore.Entry{}
	snap, err := db.Load(func(coll, pk string, e *docstore.Entry) error {
		docs[coll+"/"+pk] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Collections) != 1 || !proto.Equal(snap.Collections[0], rec) || len(snap.Partitions) != 1 || !proto.Equal(snap.Partitions[0], ps) {
		t.Fatalf("snapshot %+v", snap)
	}
	if r := snap.Idempotency[string(IdempotencyKey("cl", "key"))]; r.Digest[0] != 1 || !bytes.Equal(r.Response, []byte("resp")) {
		t.Fatalf("idem %+v", r)
	}
	if d := docs["c/k1"]; d == nil || d.Version != 5 || d.Partition != "table:1" || d.Field("a").GetStringValue() != "x" {
		t.Fatalf("live doc %+v", d)
	}
	if d := docs["c/k2"]; d == nil || !d.Deleted || d.Version != 6 {
		t.Fatalf("tombstone %+v", d)
	}
	// ClearDocs and DeletePartition.
	if err := db.Update(func(tx *Tx) error {
		if err := tx.ClearDocs("c"); err != nil {
			return err
		}
		if err := tx.ClearDocs("never"); err != nil {
			return err
		}
		return tx.DeletePartition("table:1")
	}); err != nil {
		t.Fatal(err)
	}
	n := 0
	snap, err = db.Load(func(string, string, *docstore.Entry) error { n++; return nil })
	if err != nil || n != 0 || len(snap.Partitions) != 0 {
		t.Fatalf("after clear: %d docs, %v, %v", n, snap, err)
	}
}

func TestDecodeEntryErrors(t *testing.T) {
	for _, b := range [][]byte{nil, {'T'}, {'T', 0x80}, {'T', 1, 2}, {'X'}, {'D', 0xff}} {
		if _, err := DecodeEntry(b); err == nil {
			t.Errorf("DecodeEntry(%x) accepted", b)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	t1, _ := EncodeEntry(nil, &docstore.Entry{Version: 3, Deleted: true})
	d1, _ := EncodeEntry(nil, &docstore.Entry{Version: 3, Partition: "table:1", Fields: map[string]*apiv1.Value{"a": {Kind: &apiv1.Value_Int64Value{Int64Value: 1}}}})
	f.Add(t1)
	f.Add(d1)
	r1, _ := EncodeEntry(nil, &docstore.Entry{Version: 9, Partition: "table:2", Fields: map[string]*apiv1.Value{
		"n": {}, "z": {Kind: &apiv1.Value_NullValue{NullValue: true}}, "i": {Kind: &apiv1.Value_Int64Value{Int64Value: -3}},
		"u": {Kind: &apiv1.Value_Uint64Value{Uint64Value: 7}}, "d": {Kind: &apiv1.Value_DoubleValue{DoubleValue: 1.5}},
		"s": {Kind: &apiv1.Value_StringValue{StringValue: "x"}}, "b": {Kind: &apiv1.Value_BytesValue{BytesValue: []byte{0, 1}}},
		"t": {Kind: &apiv1.Value_BoolValue{BoolValue: true}}, "j": {Kind: &apiv1.Value_JsonValue{JsonValue: "{}"}},
		"v": {Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: []float32{1, -2}}}}}})
	f.Add(r1)
	dseed, _ := proto.Marshal(&apiv1.Document{CommitTs: 4, SourcePartition: "table:1", Fields: map[string]*apiv1.Value{"a": {Kind: &apiv1.Value_StringValue{StringValue: "q"}}}})
	f.Add(append([]byte{'D'}, dseed...))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err != nil {
			return
		}
		enc, err := EncodeEntry(nil, e)
		if err != nil {
			t.Fatalf("re-encode of decoded %x: %v", b, err)
		}
		again, err := DecodeEntry(enc)
		if err != nil || again.Version != e.Version || again.Deleted != e.Deleted || again.Partition != e.Partition || len(again.FieldMap()) != len(e.FieldMap()) {
			t.Fatalf("re-encode of %x: %+v vs %+v (%v)", b, again, e, err)
		}
		for name, v := range e.FieldMap() {
			// The row form keeps values, not unknown protobuf fields of
			// legacy 'D' records.
			v.ProtoReflect().SetUnknown(nil)
			if vv := v.GetVectorValue(); vv != nil {
				vv.ProtoReflect().SetUnknown(nil)
			}
			if !proto.Equal(v, again.Field(name)) {
				t.Fatalf("field %q: %v vs %v", name, v, again.Field(name))
			}
		}
	})
}

func TestEncodeEntryInvalidUTF8(t *testing.T) {
	_, err := EncodeEntry(nil, &docstore.Entry{Version: 1, Fields: map[string]*apiv1.Value{"a": {Kind: &apiv1.Value_StringValue{StringValue: "\xff"}}}})
	if err == nil {
		t.Fatal("invalid UTF-8 encoded")
	}
}

// A second open of a locked store fails instead of blocking.
func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := lockTimeout
	lockTimeout = 50 * time.Millisecond
	defer func() { lockTimeout = old }()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second open: %v", err)
	}
}

// Every value kind survives the row encoding.
func TestRowEncodingAllKinds(t *testing.T) {
	e := &docstore.Entry{Version: 9, Partition: "table:2", Fields: map[string]*apiv1.Value{
		"n": {}, "z": {Kind: &apiv1.Value_NullValue{NullValue: true}}, "i": {Kind: &apiv1.Value_Int64Value{Int64Value: -3}},
		"u": {Kind: &apiv1.Value_Uint64Value{Uint64Value: 1 << 63}}, "d": {Kind: &apiv1.Value_DoubleValue{DoubleValue: -1.5e300}},
		"s": {Kind: &apiv1.Value_StringValue{StringValue: "héllo"}}, "b": {Kind: &apiv1.Value_BytesValue{BytesValue: []byte{0, 0xff}}},
		"t": {Kind: &apiv1.Value_BoolValue{BoolValue: true}}, "f": {Kind: &apiv1.Value_BoolValue{}}, "j": {Kind: &apiv1.Value_JsonValue{JsonValue: `{"a":[1]}`}},
		"v": {Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: []float32{1, -2, 0.25}}}}}}
	enc, err := EncodeEntry(nil, e)
	if err != nil || enc[0] != 'R' {
		t.Fatalf("encode: %v", err)
	}
	got, err := DecodeEntry(enc)
	if err != nil || got.Version != 9 || got.Partition != "table:2" || len(got.FieldMap()) != len(e.Fields) || got.Layout == nil {
		t.Fatalf("decode: %+v %v", got, err)
	}
	for name, v := range e.Fields {
		if !proto.Equal(v, got.Field(name)) {
			t.Fatalf("field %q: %v vs %v", name, v, got.Field(name))
		}
	}
	for i := 1; i < len(enc); i++ {
		if _, err := DecodeEntry(enc[:i]); err == nil {
			t.Fatalf("truncated record (%d of %d bytes) accepted", i, len(enc))
		}
	}
}

func TestDocKey(t *testing.T) {
	for _, pk := range []string{"", "1", "999", "1000", string(make([]byte, 300))} {
		got, err := decodeDocKey(docKey(pk))
		if err != nil || got != pk {
			t.Fatalf("round trip %q: %q %v", pk, got, err)
		}
	}
	// Non-negative integer keys sort numerically.
	if bytes.Compare(docKey("999"), docKey("1000")) >= 0 || bytes.Compare(docKey("123999"), docKey("124000")) >= 0 {
		t.Fatal("integer keys must sort numerically")
	}
	for _, bad := range [][]byte{nil, {5, 'a'}, {0x80}, {0x80, 0x00}} {
		if _, err := decodeDocKey(bad); err == nil {
			t.Fatalf("decodeDocKey(%x) accepted", bad)
		}
	}
}

func FuzzDecodeDocKey(f *testing.F) {
	f.Add(docKey("12"))
	f.Add([]byte{0x80, 0x00})
	f.Fuzz(func(t *testing.T, k []byte) {
		pk, err := decodeDocKey(k)
		if err != nil {
			return
		}
		if !bytes.Equal(docKey(pk), k) {
			t.Fatalf("non-canonical key accepted: %x", k)
		}
	})
}

// A format-1 file (raw document keys, no checksums) is migrated at Open
// (E64) and then read and written.
func TestFormat1RawKeys(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Turn it into a format-1 file holding one raw-key document.
	err = db.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(keyFormat, []byte(formatRawKeys)); err != nil {
			return err
		}
		b, err := tx.Bucket(bucketDocs).CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		v, _ := EncodeEntry(nil, &docstore.Entry{Version: 3, Deleted: true})
		return b.Put([]byte("old"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *Tx) error {
		return tx.PutEntry("c", "new", &docstore.Entry{Version: 4, Deleted: true})
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	if _, err := db.Load(func(_, pk string, e *docstore.Entry) error { got[pk] = e.Version; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["old"] != 3 || got["new"] != 4 {
		t.Fatalf("format-1 file: %v", got)
	}
	// An unknown format is refused.
	db.Close()
	b, _ := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	_ = b.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, []byte("9")) })
	b.Close()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("unknown format: %v", err)
	}
	db, _ = Open(t.TempDir()) // keep the deferred Close valid
}

// E60: PutEntry carves keys and values from a per-transaction arena; every
// entry of a transaction spanning many arena chunks (and entries larger than
// a chunk) reads back exactly. (Format-1 raw keys are no longer written:
// Open migrates them, TestFormat1RawKeys.) Seeded; the seed is printed on
// failure.
func TestPutEntryArenaManyEntries(t *testing.T) {
	const seed = 11
	const raw = false
	{
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		db, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]*docstore.Entry{}
		err = db.Update(func(tx *Tx) error {
			for i := 0; i < 3000; i++ {
				pk := strconv.Itoa(rng.Intn(100000)) + strings.Repeat("k", rng.Intn(3))
				var e *docstore.Entry
				switch rng.Intn(5) {
				case 0:
					e = &docstore.Entry{Version: rng.Uint64(), Deleted: true}
				case 1: // larger than an arena chunk
					e = &docstore.Entry{Version: 1, Partition: "table:9", Fields: map[string]*apiv1.Value{"big": {Kind: &apiv1.Value_StringValue{StringValue: strings.Repeat("x", arenaChunk+rng.Intn(1000))}}}}
				default:
					e = &docstore.Entry{Version: rng.Uint64(), Partition: "table:" + strconv.Itoa(rng.Intn(9)), Fields: map[string]*apiv1.Value{
						"id":  {Kind: &apiv1.Value_Int64Value{Int64Value: rng.Int63()}},
						"s":   {Kind: &apiv1.Value_StringValue{StringValue: strings.Repeat("ab", rng.Intn(200))}},
						"vec": {Kind: &apiv1.Value_VectorValue{VectorValue: &apiv1.FloatVector{Values: []float32{rng.Float32(), 2}}}},
					}}
				}
				want[pk] = e
				if err := tx.PutEntry("c", pk, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*docstore.Entry{}
		if _, err := db.Load(func(coll, pk string, e *docstore.Entry) error { got[pk] = e; return nil }); err != nil {
			t.Fatalf("seed %d raw %v: %v", seed, raw, err)
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d raw %v: loaded %d entries, want %d", seed, raw, len(got), len(want))
		}
		for pk, w := range want {
			wb, _ := EncodeEntry(nil, w)
			gb, err := EncodeEntry(nil, got[pk])
			if err != nil || !bytes.Equal(decodeCanon(t, wb), decodeCanon(t, gb)) {
				t.Fatalf("seed %d raw %v: key %q read back differently", seed, raw, pk)
			}
		}
		_ = db.Close()
	}
}

// decodeCanon renders a record with its fields in name order, so records
// of equal entries compare equal (EncodeEntry follows map order).
func decodeCanon(t *testing.T, b []byte) []byte {
	t.Helper()
	e, err := DecodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	out := []byte(fmt.Sprintf("%d/%v/%s", e.Version, e.Deleted, e.Partition))
	names := make([]string, 0, len(e.Fields))
	for n := range e.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, '|')
		out = append(out, n...)
		out = append(out, '=')
		out = append(out, prototext.Format(e.Fields[n])...)
	}
	return out
}
