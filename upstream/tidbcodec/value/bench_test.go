package value

import (
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

func BenchmarkDecimalDecodeBin(b *testing.B) {
	bin, _ := MustParseDecimal("12345678.123456").AppendBin(nil, 20, 6)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := DecodeDecimalBin(bin, 20, 6); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecimalText(b *testing.B) {
	d := NewDecimalDatumBin(mustBin(b), 20, 6)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf, _ = d.AppendText(buf[:0])
	}
}

func mustBin(b *testing.B) []byte {
	bin, err := MustParseDecimal("12345678.123456").AppendBin(nil, 20, 6)
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

func BenchmarkTimeText(b *testing.B) {
	tm, _ := ParseTime("2024-02-29 13:14:15.123456", mysql.TypeDatetime, 6)
	d := NewTimeDatum(tm.Pack(), mysql.TypeDatetime, 6)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf, _ = d.AppendText(buf[:0])
	}
}

func BenchmarkJSONText(b *testing.B) {
	j, _ := ParseJSON([]byte(`{"id": 5, "name": "ok", "tags": ["v", 9], "nested": {"x": 1.5, "y": null}}`))
	typed := j.AppendTyped(nil)
	d := NewJSONDatum(typed)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(typed)))
	for i := 0; i < b.N; i++ {
		buf, _ = d.AppendText(buf[:0])
	}
}
