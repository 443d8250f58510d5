package tablecodec

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"math/rand"
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/internal/seedtest"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// newRand returns the property tests' seeded source (seedtest: -seed,
// $TIDBCODEC_SEED, or the clock; logged on failure).
func newRand(t *testing.T) *rand.Rand { return seedtest.Rand(t) }

// Record keys round-trip for int and common handles; raw and comparable
// keys order by (table id, handle); every key lies in its table's span
// (rules K13, K14, K17, K18).
func TestPropertyRecordKeys(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 10000; i++ {
		tid := r.Int63n(1 << 48)
		var h Handle
		if r.Intn(2) == 0 {
			h = NewIntHandle(int64(r.Uint64()))
		} else {
			s := make([]byte, r.Intn(20))
			r.Read(s)
			var err error
			h, err = CommonHandleFromDatums(value.NewBytesDatum(s), value.NewIntDatum(int64(r.Uint64())))
			if err != nil {
				t.Fatal(err)
			}
		}
		key := EncodeRecordKey(nil, tid, h)
		gt, gh, err := DecodeRecordKey(key)
		if err != nil || gt != tid || !gh.Equal(h) {
			t.Fatalf("%x: %d %v %v", key, gt, gh, err)
		}
		nextGen := r.Intn(2) == 0
		ks := uint32(r.Intn(MaxKeyspaceID + 1))
		span := TableRecordSpan(ks, nextGen, tid)
		full := key
		if nextGen {
			full = append(AppendKeyspacePrefix(nil, ks), key...)
		}
		ck := ComparableKey(full)
		if bytes.Compare(ck, span.StartKey) < 0 || bytes.Compare(ck, span.EndKey) >= 0 {
			t.Fatalf("key %x outside span %x..%x", ck, span.StartKey, span.EndKey)
		}
		raw, err := DecodeComparableKey(ck, make([]byte, 0, 64))
		if err != nil || !bytes.Equal(raw, full) {
			t.Fatalf("comparable round trip %x %v", raw, err)
		}
		// Neighbour tables' keys fall outside the span.
		other := EncodeIntRecordKey(nil, tid+1, int64(r.Uint64()))
		if nextGen {
			other = append(AppendKeyspacePrefix(nil, ks), other...)
		}
		if bytes.Compare(ComparableKey(other), span.EndKey) < 0 {
			t.Fatalf("next table's key inside span")
		}
		a, b := int64(r.Uint64()), int64(r.Uint64())
		ka, kb := EncodeIntRecordKey(nil, tid, a), EncodeIntRecordKey(nil, tid, b)
		if bytes.Compare(ka, kb) != cmp.Compare(a, b) || bytes.Compare(ComparableKey(ka), ComparableKey(kb)) != cmp.Compare(a, b) {
			t.Fatalf("order of handles %d %d", a, b)
		}
	}
}

// Meta keys decode back to their parts (rules K19-K22).
func TestPropertyMetaKeys(t *testing.T) {
	r := newRand(t)
	for i := 0; i < 5000; i++ {
		name := make([]byte, r.Intn(20))
		r.Read(name)
		field := make([]byte, r.Intn(20))
		r.Read(field)
		mk, err := DecodeMetaKey(EncodeHashDataKey(nil, string(name), field))
		if err != nil || !bytes.Equal(mk.Name, name) || !bytes.Equal(mk.Field, field) || mk.Type != HashData {
			t.Fatalf("hash %x/%x: %+v %v", name, field, mk, err)
		}
		mk, err = DecodeMetaKey(EncodeStringDataKey(nil, string(name)))
		if err != nil || !bytes.Equal(mk.Name, name) || mk.Type != StringData {
			t.Fatalf("string %x: %+v %v", name, mk, err)
		}
		idx := int64(r.Uint64())
		mk, err = DecodeMetaKey(EncodeListDataKey(nil, string(name), idx))
		if err != nil || mk.Index != idx || mk.Type != ListData {
			t.Fatalf("list %x: %+v %v", name, mk, err)
		}
		db, tb := r.Int63(), r.Int63()
		mk, _ = DecodeMetaKey(EncodeTableKey(nil, db, tb))
		gdb, err1 := ParseDBName(mk.Name)
		gtb, err2 := ParseTableField(mk.Field)
		if err1 != nil || err2 != nil || gdb != db || gtb != tb {
			t.Fatalf("table key %d/%d → %d/%d", db, tb, gdb, gtb)
		}
		if !bytes.HasPrefix(EncodeTableKey(nil, db, tb), EncodeDBTablesPrefix(nil, db)) ||
			!bytes.HasPrefix(EncodeDBKey(nil, db), EncodeDBsPrefix(nil)) {
			t.Fatal("scan prefixes")
		}
	}
}

// Index keys: unique without NULL carry no handle; otherwise the handle
// follows the values (rule K15).
func TestIndexKeys(t *testing.T) {
	vals := []value.Datum{value.NewIntDatum(7)}
	u, _ := EncodeIndexKey(nil, 1, 2, true, vals, NewIntHandle(9))
	nu, _ := EncodeIndexKey(nil, 1, 2, false, vals, NewIntHandle(9))
	un, _ := EncodeIndexKey(nil, 1, 2, true, []value.Datum{value.NewNullDatum()}, NewIntHandle(9))
	if len(u) != 19+9 || len(nu) != 19+18 || len(un) != 19+1+9 {
		t.Fatalf("lengths %d %d %d", len(u), len(nu), len(un))
	}
	ch, _ := CommonHandleFromDatums(value.NewBytesDatum([]byte("k")))
	ck, _ := EncodeIndexKey(nil, 1, 2, false, vals, ch)
	if !bytes.HasSuffix(ck, ch.Encoded()) {
		t.Fatal("common handle suffix")
	}
	tid, iid, rest, err := DecodeIndexKey(nu)
	if err != nil || tid != 1 || iid != 2 || len(rest) != 18 {
		t.Fatalf("%d %d %x %v", tid, iid, rest, err)
	}
	if _, _, _, err := DecodeIndexKey(nu[:15]); err == nil {
		t.Fatal("truncated index key accepted")
	}
}

// A common handle shorter than 9 bytes is zero-padded and still decodes
// as a common handle with one column (rule K14).
func TestPaddedCommonHandle(t *testing.T) {
	d, err := value.NewDecimalDatum(value.MustParseDecimal("0"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := CommonHandleFromDatums(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Encoded(); len(got) != 9 || !bytes.Equal(got, []byte{6, 1, 0, 0x80, 0, 0, 0, 0, 0}) {
		t.Fatalf("padded handle %x", got)
	}
	key := EncodeRecordKey(nil, 3, h)
	_, dh, err := DecodeRecordKey(key)
	if err != nil || dh.IsInt() {
		t.Fatalf("%v %v", dh, err)
	}
	ds, err := dh.Datums()
	if err != nil || len(ds) != 1 || ds[0].String() != "0" {
		t.Fatalf("datums %v %v", ds, err)
	}
	if dh.String() != "{0}" {
		t.Fatalf("String %q", dh.String())
	}
}

// Index values from the real server and the reference vectors (rule K24).
func TestDecodeIndexValue(t *testing.T) {
	cases := []struct {
		hex     string
		handle  int64
		hasInt  bool
		restore bool
		clust   bool
	}{
		{"0880000100000008050068656c6c6f0000000000000001", 1, true, true, false}, // server uk_varchar
		{"30", 0, false, false, false},                                           // server idx_int (non-unique)
		{"0000000000000007", 7, true, false, false},
		{"000000000000000131", 1, true, false, false},
		{"007d01", 0, false, false, true},
	}
	for _, c := range cases {
		b, _ := hex.DecodeString(c.hex)
		iv, err := DecodeIndexValue(b)
		if err != nil || iv.HasIntHandle != c.hasInt || iv.IntHandle != c.handle || (iv.RestoreData != nil) != c.restore || iv.Clustered != c.clust {
			t.Errorf("%s: %+v %v", c.hex, iv, err)
		}
	}
	// Clustered v1 with a common handle and a partition id.
	ch, _ := CommonHandleFromDatums(value.NewBytesDatum([]byte("pk")))
	v := []byte{0, 0x7d, 1, 0x7f, 0, byte(len(ch.Encoded()))}
	v = append(v, ch.Encoded()...)
	v = append(v, 0x7e)
	v = codec.EncodeInt(v, 77)
	iv, err := DecodeIndexValue(v)
	if err != nil || !bytes.Equal(iv.CommonHandle, ch.Encoded()) || iv.PartitionID != 77 || !iv.HasPartitionID {
		t.Fatalf("%+v %v", iv, err)
	}
	for _, bad := range []string{"", "3132", "0a7f0009", "05ff0000000000"} {
		b, _ := hex.DecodeString(bad)
		if _, err := DecodeIndexValue(b); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Index values round-trip through AppendIndexValue / DecodeIndexValue and
// the encoder writes the server's bytes (rule K24).
func TestIndexValueRoundTrip(t *testing.T) {
	server, _ := hex.DecodeString("0880000100000008050068656c6c6f0000000000000001")
	restore := server[1:15]
	if got := AppendIndexValue(nil, IndexValue{IntHandle: 1, HasIntHandle: true, RestoreData: restore}); !bytes.Equal(got, server) {
		t.Fatalf("server unique value: %x", got)
	}
	if got := AppendIndexValue(nil, IndexValue{}); string(got) != "0" {
		t.Fatalf("non-unique old value %x", got)
	}
	ch, _ := CommonHandleFromDatums(value.NewBytesDatum([]byte("pk")), value.NewIntDatum(3))
	r := newRand(t)
	for i := 0; i < 2000; i++ {
		var iv IndexValue
		if r.Intn(2) == 0 {
			iv.IntHandle, iv.HasIntHandle = int64(r.Uint64()), true
		} else if r.Intn(2) == 0 {
			iv.CommonHandle = ch.Encoded()
			iv.Clustered = r.Intn(2) == 0
		}
		if r.Intn(3) == 0 {
			iv.PartitionID, iv.HasPartitionID = r.Int63(), true
		}
		if r.Intn(3) == 0 {
			iv.RestoreData = []byte{0x80, 0, 0, 0, 0, 0}
		}
		enc := AppendIndexValue(nil, iv)
		got, err := DecodeIndexValue(enc)
		if err != nil {
			t.Fatalf("%+v → %x: %v", iv, enc, err)
		}
		if got.HasIntHandle != iv.HasIntHandle || got.IntHandle != iv.IntHandle || !bytes.Equal(got.CommonHandle, iv.CommonHandle) ||
			got.HasPartitionID != iv.HasPartitionID || got.PartitionID != iv.PartitionID || !bytes.Equal(got.RestoreData, iv.RestoreData) ||
			got.Clustered != iv.Clustered {
			t.Fatalf("%+v → %x → %+v", iv, enc, got)
		}
	}
}
