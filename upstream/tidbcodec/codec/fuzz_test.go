package codec

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func seedHex(f *testing.F, hs ...string) {
	for _, h := range hs {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
}

// FuzzDecodeOne: the datum decoder never panics, PeekLength agrees with
// it, and a decoded datum re-encodes to bytes that decode to the same value.
func FuzzDecodeOne(f *testing.F) {
	seedHex(f, "00", "037fffffffffffffff", "0801", "09ac02", "05bffccccccccccccd", "016162630000000000fa",
		"0206616263", "0603028132", "0780000d18c2e28000", "0a01010000001c0000001300000003000c160000006b65790576616c7565",
		"1402000000cdcc8c3fcdcc0c40", "fa", "01", "0a0e0102")
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			n, perr := PeekLength(b)
			rest, d, err := DecodeOne(b)
			if err != nil {
				return
			}
			if perr != nil || n != len(b)-len(rest) {
				t.Fatalf("%x: peek %d (%v) but decode used %d", b, n, perr, len(b)-len(rest))
			}
			_ = d.String()
			enc, err := EncodeKey(nil, d)
			if err != nil {
				t.Fatalf("%x: re-encode %v: %v", b, d, err)
			}
			_, d2, err := DecodeOne(enc)
			if err != nil || d2.Kind() != d.Kind() {
				t.Fatalf("%x: re-decode %x: %v %v", b, enc, d2, err)
			}
			b = rest
		}
	})
}

// FuzzDecodeBytes: memcomparable decoding never panics and what it accepts
// is exactly what EncodeBytes writes (both directions).
func FuzzDecodeBytes(f *testing.F) {
	seedHex(f, "0000000000000000f7", "0102030000000000fa", "0102030405060708ff0900000000000000f8", "ffffffffffffffff08")
	f.Fuzz(func(t *testing.T, b []byte) {
		rest, raw, err := DecodeBytes(b, nil)
		if err == nil {
			if enc := EncodeBytes(nil, raw); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
				t.Fatalf("%x decoded to %x which encodes to %x", b, raw, enc)
			}
		}
		rest, raw, err = DecodeBytesDesc(b, nil)
		if err == nil {
			if enc := EncodeBytesDesc(nil, raw); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
				t.Fatalf("desc %x decoded to %x which encodes to %x", b, raw, enc)
			}
		}
		_, _, _ = DecodeComparableVarint(b)
		_, _, _ = DecodeComparableUvarint(b)
		_, _, _ = DecodeCompactBytes(b)
	})
}
