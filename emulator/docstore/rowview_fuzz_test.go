package docstore

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzRowView (E96): View reads rows a caller encoded, so any bytes and
// any slot count must give an error or Values, never a panic; and a row
// it accepts is canonical: its Values encode back to exactly its bytes
// (unless a string is not UTF-8, which View leaves to the field checks,
// E42, and the encoder refuses).
func FuzzRowView(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(AppendString(AppendInt64(AppendAbsent(nil), -7), "x"), uint8(3))
	f.Add(AppendVectorLE(AppendDouble(AppendNull(nil), 1.5), []byte{0, 0, 128, 63}), uint8(3))
	f.Add([]byte{KindInt64, 0x80, 0x00}, uint8(1)) // a varint not in its shortest form
	f.Fuzz(func(t *testing.T, row []byte, n uint8) {
		var rv RowView
		vals, err := rv.View(row, int(n%9))
		if err != nil {
			return
		}
		back, err := EncodeRow(nil, vals)
		if err != nil {
			if !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("View accepted %x as %d values that do not encode: %v", row, n%9, err)
			}
			return
		}
		if !bytes.Equal(back, row) {
			t.Fatalf("View accepted %x, which encodes back as %x: not canonical", row, back)
		}
	})
}
