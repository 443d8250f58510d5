package value

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// FuzzBinaryJSON: decoding never panics; valid text re-parses.
func FuzzBinaryJSON(f *testing.F) {
	for _, h := range []string{"0400", "090100000000000000", "0b1f85eb51b81e0940", "0c03616263",
		"030000000008000000", "01010000001c0000001300000003000c160000006b65790576616c7565",
		"03050000003300000009210000000c29000000040000000004010000000b", "0d0f026162", "0f0000000000000000",
		"11000000000000000006000000"} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := BinaryJSONFromTyped(b)
		if err != nil {
			return
		}
		txt, err := j.AppendText(nil)
		if err != nil {
			return
		}
		if _, err := ParseJSON(txt); err != nil {
			t.Fatalf("%x rendered %s which does not parse: %v", b, txt, err)
		}
	})
}

// FuzzDecimal: bin decoding never panics and accepted non-zero bins
// re-encode identically; text parsing round-trips.
func FuzzDecimal(f *testing.F) {
	f.Add([]byte{0x81, 0x0d, 0xfb, 0x38, 0xd2, 0x04, 0xd2}, uint8(14), uint8(4), "1234567890.1234")
	f.Add([]byte{0x7e, 0xf2, 0x04, 0xc7, 0x2d, 0xfb, 0x2d}, uint8(14), uint8(4), "-0.5")
	f.Add([]byte{0x80}, uint8(1), uint8(0), "0")
	f.Fuzz(func(t *testing.T, b []byte, prec, frac uint8, s string) {
		d, n, err := DecodeDecimalBin(b, int(prec), int(frac))
		if err == nil {
			re, err := d.AppendBin(nil, int(prec), int(frac))
			if err != nil {
				t.Fatalf("%x (%d,%d) → %s does not re-encode: %v", b, prec, frac, d.String(), err)
			}
			if !d.IsZero() && !bytes.Equal(re, b[:n]) {
				t.Fatalf("%x (%d,%d) → %s → %x", b, prec, frac, d.String(), re)
			}
		}
		if p, err := ParseDecimal(s); err == nil {
			q, err := ParseDecimal(p.String())
			if err != nil || q.String() != p.String() {
				t.Fatalf("%q → %s → %s %v", s, p.String(), q.String(), err)
			}
			_, _ = p.Round(int(frac) % (MaxDecimalFrac + 1))
		}
	})
}

// FuzzTimeDuration: parsers never panic; accepted values print and
// re-parse to themselves; packed garbage never panics when printed.
func FuzzTimeDuration(f *testing.F) {
	f.Add("2024-02-29 13:14:15.123456", uint8(6), uint64(1851747814602826304))
	f.Add("-838:59:59", uint8(0), uint64(0))
	f.Add("1 02:03:04.5", uint8(2), ^uint64(0))
	f.Fuzz(func(t *testing.T, s string, fsp uint8, packed uint64) {
		fs := int(fsp % 7)
		if tm, err := ParseTime(s, mysql.TypeDatetime, fs); err == nil {
			back, err := ParseTime(tm.String(), mysql.TypeDatetime, fs)
			if err != nil || back != tm {
				t.Fatalf("%q → %s → %v %v", s, tm, back, err)
			}
		}
		if d, err := ParseDuration(s, fs); err == nil {
			back, err := ParseDuration(d.String(), fs)
			if err != nil || back != d {
				t.Fatalf("%q → %s → %v %v", s, d, back, err)
			}
		}
		dt := NewTimeDatum(packed, mysql.TypeTimestamp, fs)
		_ = dt.String()
		dd := NewDurationDatum(int64(packed), fs)
		_ = dd.String()
		_, _ = ParseVectorFloat32(s)
		_, _ = VectorFloat32FromBytes([]byte(s))
	})
}
