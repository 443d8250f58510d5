package normalize

import (
	"encoding/binary"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// FuzzRowIDFromKey: any key either decodes or errors, never panics, and a
// decoded handle round-trips through the record key encoding.
func FuzzRowIDFromKey(f *testing.F) {
	f.Add(recordKey(50, 77))
	f.Add(append([]byte{'x', 0, 0, 1}, recordKey(50, -5)...))
	f.Add([]byte("t"))
	f.Fuzz(func(t *testing.T, key []byte) {
		h, err := rowIDFromKey(key)
		if err != nil {
			return
		}
		tail := recordKey(0, h)[11:]
		if string(key[len(key)-8:]) != string(tail) {
			t.Fatalf("handle %d does not round-trip from key %x", h, key)
		}
	})
}

// fuzzDatum builds a datum of an arbitrary kind over arbitrary bytes, the
// way a corrupt or unexpected row could present it to the bridge.
func fuzzDatum(kind byte, num uint64, b []byte) value.Datum {
	switch kind % 16 {
	case 0:
		return value.NewNullDatum()
	case 1:
		return value.NewIntDatum(int64(num))
	case 2:
		return value.NewUintDatum(num)
	case 3:
		return value.NewFloat32Datum(float32(num))
	case 4:
		return value.NewFloat64Datum(float64(num))
	case 5:
		return value.NewStringDatumBytes(b)
	case 6:
		return value.NewBytesDatum(b)
	case 7:
		return value.NewDecimalDatumBin(b, int(num%80), int(num>>8%40))
	case 8:
		return value.NewTimeDatum(num, mysql.TypeDatetime, int(num%7))
	case 9:
		return value.NewDurationDatum(int64(num), int(num%7))
	case 10:
		return value.NewJSONDatum(b)
	case 11:
		return value.NewEnumDatum(num, string(b))
	case 12:
		return value.NewSetDatum(num, string(b))
	case 13:
		return value.NewBitDatum(num, int(num%9))
	case 14:
		return value.NewYearDatum(int64(num % 3000))
	default:
		return value.NewVectorFloat32Datum(b)
	}
}

// FuzzLower: lowering any datum into any field type returns a value or an
// error, never panics, and keeps variable bytes inside the scratch buffer.
func FuzzLower(f *testing.F) {
	le := binary.LittleEndian.AppendUint32(nil, 2)
	le = binary.LittleEndian.AppendUint32(le, 0x3f800000)
	le = binary.LittleEndian.AppendUint32(le, 0x40000000)
	f.Add(byte(15), byte(10), uint64(0), le)
	f.Add(byte(7), byte(5), uint64(0x0a02), []byte{0x80, 0, 1})
	f.Add(byte(10), byte(9), uint64(0), []byte{0x01})
	f.Add(byte(8), byte(7), uint64(1<<40), []byte(nil))
	f.Fuzz(func(t *testing.T, kind, ftype byte, num uint64, b []byte) {
		ft := apiv1.FieldType(ftype%15 + 1)
		spec := &fieldSpec{Name: "f", Type: ft, Dim: 2}
		d := fuzzDatum(kind, num, b)
		var c rowCopier
		v, err := c.lower(spec, (*minicdc.Value)(&d))
		if err != nil {
			return
		}
		if v.kind >= vString && int(v.off)+int(v.n) > len(c.scratch) {
			t.Fatalf("value range %d+%d outside scratch of %d", v.off, v.n, len(c.scratch))
		}
	})
}
