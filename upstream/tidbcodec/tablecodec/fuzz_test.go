package tablecodec

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// FuzzDecodeKey: record, index, meta and comparable key decoders never
// panic, and an accepted record key re-encodes to the same bytes.
func FuzzDecodeKey(f *testing.F) {
	for _, h := range []string{
		"74800000000000002a5f7280000000075bcd15",
		"7480000000000000645f72016162630000000000fa03800000000000002a",
		"7480000000000000645f72060100800000000000",
		"7480000000000000745f6980000000000000010168656c6c6f000000fc",
		"6d44423a3200000000fb00000000000000685461626c653a3130ff3000000000000000f8",
		"6d4e657874476c6f62ff616c494400000000fb0000000000000073",
		"780425d474800000000000002a5f7280000000075bcd15",
		"0880000100000008050068656c6c6f0000000000000001",
		"007d017f000a016b000000000000fa7e8000000000000001",
		"7480000000000000ff2a5f728000000007ff5bcd150000000000fa",
	} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		if tid, h, err := DecodeRecordKey(key); err == nil {
			if re := EncodeRecordKey(nil, tid, h); !bytes.Equal(re, key) {
				t.Fatalf("%x decoded to %d/%v, re-encodes to %x", key, tid, h, re)
			}
			_ = h.String()
			_, _ = h.Datums()
		}
		_, _, _, _ = DecodeIndexKey(key)
		if mk, err := DecodeMetaKey(key); err == nil && mk.Type == HashData {
			if re := EncodeHashDataKey(nil, string(mk.Name), mk.Field); !bytes.Equal(re, key) {
				t.Fatalf("meta %x re-encodes to %x", key, re)
			}
		}
		_ = DecodeTableID(key)
		_, _, _ = RemoveKeyspacePrefix(key)
		if raw, err := DecodeComparableKey(key, nil); err == nil && !bytes.Equal(ComparableKey(raw), key) {
			t.Fatalf("comparable %x round trip", key)
		}
		_ = PrefixNext(key)
		_, _ = DecodeIndexValue(key)
	})
}
