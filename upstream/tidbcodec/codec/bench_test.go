package codec

import (
	"testing"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

func BenchmarkDecodeOneInt(b *testing.B) {
	enc, _ := EncodeKey(nil, value.NewIntDatum(-123456789))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, d, err := DecodeOne(enc); err != nil || d.GetInt64() != -123456789 {
			b.Fatal("bad")
		}
	}
}

func BenchmarkDecodeOneMemcomparableBytesBuf(b *testing.B) {
	enc, _ := EncodeKey(nil, value.NewBytesDatum([]byte("Grüße aus Zürich – 北京 ok")))
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := DecodeOneBuf(enc, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeOneDecimal(b *testing.B) {
	d, _ := value.NewDecimalDatum(value.MustParseDecimal("12345678.123456"), 20, 6)
	enc, _ := EncodeValue(nil, d)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := DecodeOne(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPeekLengthBytes(b *testing.B) {
	enc, _ := EncodeKey(nil, value.NewBytesDatum(make([]byte, 40)), value.NewIntDatum(1))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := PeekLength(enc); err != nil {
			b.Fatal(err)
		}
	}
}
