package rowcodec

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// Checksum asks EncodeV2 to append a checksum tail (TiDB 8.3+ layout). The
// CRC32-IEEE runs over the row bytes (flags byte with the checksum bit, the
// tail header byte included) and then continues over Data.
type Checksum struct {
	// Version is 1 (Data = the record key) or 2 (Data = the encoded
	// handle: the 8 comparable bytes of an int handle, or the encoded
	// datums of a common handle). Version 0 (a per-column canonical
	// checksum of TiDB 7.1-8.2) is read but not written.
	Version int
	Data    []byte
}

// Encoder writes row values. Its scratch space is reused across calls, so a
// long-lived Encoder does not allocate beyond the output. Not safe for
// concurrent use.
type Encoder struct {
	order []int
	data  []byte
}

// EncodeV2 appends the row v2 encoding of columns ids[i] = datums[i] to dst,
// the way TiDB's encoder lays them out: not-NULL ids ascending, then NULL ids
// ascending, one cell per not-NULL value, the large layout when an id exceeds
// 255 or the data area exceeds 65535 bytes. cs (optional) adds the checksum
// tail.
func (e *Encoder) EncodeV2(dst []byte, ids []int64, datums []value.Datum, cs *Checksum) ([]byte, error) {
	if len(ids) != len(datums) {
		return dst, fmt.Errorf("rowcodec: encode v2: %d ids but %d datums", len(ids), len(datums))
	}
	e.order = e.order[:0]
	for i := range ids {
		if ids[i] < 0 || ids[i] > math.MaxUint32 {
			return dst, fmt.Errorf("rowcodec: encode v2: column id %d outside 0..%d", ids[i], uint32(math.MaxUint32))
		}
		e.order = append(e.order, i)
	}
	slices.SortStableFunc(e.order, func(a, b int) int {
		if na, nb := datums[a].IsNull(), datums[b].IsNull(); na != nb {
			if na {
				return 1
			}
			return -1
		}
		return cmp.Compare(ids[a], ids[b])
	})
	nNotNull, large := 0, false
	for k, i := range e.order {
		if k > 0 && ids[i] == ids[e.order[k-1]] && datums[i].IsNull() == datums[e.order[k-1]].IsNull() {
			return dst, fmt.Errorf("rowcodec: encode v2: column id %d given twice", ids[i])
		}
		if !datums[i].IsNull() {
			nNotNull++
		}
		if ids[i] > math.MaxUint8 {
			large = true
		}
	}
	if err := checkNoDupAcrossNull(ids, e.order, nNotNull); err != nil {
		return dst, err
	}
	nNull := len(ids) - nNotNull
	if nNotNull > math.MaxUint16 || nNull > math.MaxUint16 {
		return dst, fmt.Errorf("rowcodec: encode v2: %d not-null / %d null columns exceed 65535", nNotNull, nNull)
	}
	// Cells first, so the layout size is known.
	e.data = e.data[:0]
	var err error
	endsBuf := e.endsScratch(nNotNull)
	for k := 0; k < nNotNull; k++ {
		i := e.order[k]
		e.data, err = appendCellV2(e.data, &datums[i])
		if err != nil {
			return dst, fmt.Errorf("rowcodec: encode v2: column %d: %w", ids[i], err)
		}
		endsBuf[k] = len(e.data)
	}
	if len(e.data) > math.MaxUint16 {
		large = true
	}
	if len(e.data) > math.MaxUint32 {
		return dst, fmt.Errorf("rowcodec: encode v2: data area of %d bytes too large", len(e.data))
	}
	start := len(dst)
	flags := byte(0)
	if large {
		flags |= flagLarge
	}
	if cs != nil {
		flags |= flagChecksum
	}
	dst = append(dst, CodecVerV2, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(nNotNull))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(nNull))
	for _, i := range e.order {
		if large {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(ids[i]))
		} else {
			dst = append(dst, byte(ids[i]))
		}
	}
	for k := 0; k < nNotNull; k++ {
		if large {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(endsBuf[k]))
		} else {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(endsBuf[k]))
		}
	}
	dst = append(dst, e.data...)
	if cs != nil {
		if cs.Version != 1 && cs.Version != 2 {
			return dst[:start], fmt.Errorf("rowcodec: encode v2: checksum version %d cannot be written (1 or 2)", cs.Version)
		}
		dst = append(dst, byte(cs.Version))
		sum := crc32.Update(crc32.ChecksumIEEE(dst[start:]), crc32.IEEETable, cs.Data)
		dst = binary.LittleEndian.AppendUint32(dst, sum)
	}
	return dst, nil
}

// endsScratch reuses the order slice's tail capacity for cell end offsets.
func (e *Encoder) endsScratch(n int) []int {
	need := len(e.order) + n
	if cap(e.order) < need {
		grown := make([]int, len(e.order), need)
		copy(grown, e.order)
		e.order = grown
	}
	return e.order[len(e.order):need]
}

// checkNoDupAcrossNull rejects an id given both as a value and as NULL.
func checkNoDupAcrossNull(ids []int64, order []int, nNotNull int) error {
	nn, nulls := order[:nNotNull], order[nNotNull:]
	a, b := 0, 0
	for a < len(nn) && b < len(nulls) {
		x, y := ids[nn[a]], ids[nulls[b]]
		switch {
		case x < y:
			a++
		case x > y:
			b++
		default:
			return fmt.Errorf("rowcodec: encode v2: column id %d given twice", x)
		}
	}
	return nil
}

// appendCompactSigned writes the smallest of 1/2/4/8 little-endian bytes
// that holds x.
func appendCompactSigned(dst []byte, x int64) []byte {
	switch {
	case x == int64(int8(x)):
		return append(dst, byte(x))
	case x == int64(int16(x)):
		return binary.LittleEndian.AppendUint16(dst, uint16(x))
	case x == int64(int32(x)):
		return binary.LittleEndian.AppendUint32(dst, uint32(x))
	}
	return binary.LittleEndian.AppendUint64(dst, uint64(x))
}

func appendCompactUnsigned(dst []byte, x uint64) []byte {
	switch {
	case x <= math.MaxUint8:
		return append(dst, byte(x))
	case x <= math.MaxUint16:
		return binary.LittleEndian.AppendUint16(dst, uint16(x))
	case x <= math.MaxUint32:
		return binary.LittleEndian.AppendUint32(dst, uint32(x))
	}
	return binary.LittleEndian.AppendUint64(dst, x)
}

// comparableFloatBits is the memcomparable form of a float64.
func comparableFloatBits(f float64) uint64 {
	u := math.Float64bits(f)
	if u&(1<<63) == 0 {
		return u | 1<<63
	}
	return ^u
}

func appendCellV2(dst []byte, d *value.Datum) ([]byte, error) {
	switch d.Kind() {
	case value.KindInt64, value.KindYear, value.KindDuration:
		return appendCompactSigned(dst, d.GetInt64()), nil
	case value.KindUint64, value.KindTime, value.KindEnum, value.KindSet, value.KindBit:
		return appendCompactUnsigned(dst, d.GetUint64()), nil
	case value.KindFloat32, value.KindFloat64:
		return binary.BigEndian.AppendUint64(dst, comparableFloatBits(d.GetFloat64())), nil
	case value.KindString, value.KindBytes, value.KindJSON, value.KindVectorFloat32:
		return append(dst, d.GetBytes()...), nil
	case value.KindDecimal:
		prec, frac := d.DecimalShape()
		if err := checkDecimalBin(d.GetBytes(), prec, frac); err != nil {
			return dst, err
		}
		dst = append(dst, byte(prec), byte(frac))
		return append(dst, d.GetBytes()...), nil
	}
	return dst, fmt.Errorf("datum kind %s cannot be stored in a row", d.Kind())
}

func checkDecimalBin(bin []byte, prec, frac int) error {
	size, err := value.DecimalBinSize(prec, frac)
	if err != nil {
		return err
	}
	if len(bin) != size {
		return fmt.Errorf("DECIMAL(%d,%d) bin is %d bytes, want %d", prec, frac, len(bin), size)
	}
	return nil
}

// EncodeV1 appends the old (v1) row encoding of ids[i] = datums[i] to dst in
// the given order: for each column an int datum of the id (varint form)
// followed by the value datum in value form, times flattened to their packed
// uint, TIME to int nanoseconds, ENUM/SET/BIT to uint. No columns encode as
// the single NilFlag byte.
func EncodeV1(dst []byte, ids []int64, datums []value.Datum) ([]byte, error) {
	if len(ids) != len(datums) {
		return dst, fmt.Errorf("rowcodec: encode v1: %d ids but %d datums", len(ids), len(datums))
	}
	if len(ids) == 0 {
		return append(dst, flagNil), nil
	}
	start := len(dst)
	for i := range ids {
		dst = append(dst, flagVarint)
		dst = binary.AppendVarint(dst, ids[i])
		var err error
		dst, err = appendDatumV1(dst, &datums[i])
		if err != nil {
			return dst[:start], fmt.Errorf("rowcodec: encode v1: column %d: %w", ids[i], err)
		}
	}
	return dst, nil
}

func appendDatumV1(dst []byte, d *value.Datum) ([]byte, error) {
	switch d.Kind() {
	case value.KindNull:
		return append(dst, flagNil), nil
	case value.KindInt64, value.KindYear, value.KindDuration:
		return binary.AppendVarint(append(dst, flagVarint), d.GetInt64()), nil
	case value.KindUint64, value.KindTime, value.KindEnum, value.KindSet, value.KindBit:
		return binary.AppendUvarint(append(dst, flagUvarint), d.GetUint64()), nil
	case value.KindFloat32, value.KindFloat64:
		return binary.BigEndian.AppendUint64(append(dst, flagFloat), comparableFloatBits(d.GetFloat64())), nil
	case value.KindString, value.KindBytes:
		b := d.GetBytes()
		dst = binary.AppendVarint(append(dst, flagCompactBytes), int64(len(b)))
		return append(dst, b...), nil
	case value.KindDecimal:
		prec, frac := d.DecimalShape()
		if err := checkDecimalBin(d.GetBytes(), prec, frac); err != nil {
			return dst, err
		}
		dst = append(dst, flagDecimal, byte(prec), byte(frac))
		return append(dst, d.GetBytes()...), nil
	case value.KindJSON:
		return append(append(dst, flagJSON), d.GetBytes()...), nil
	case value.KindVectorFloat32:
		return append(append(dst, flagVectorF32), d.GetBytes()...), nil
	}
	return dst, fmt.Errorf("datum kind %s cannot be stored in a row", d.Kind())
}

// VerifyChecksum checks a version 1 or 2 checksum tail against data (the
// record key for version 1, the encoded handle for version 2). A row without
// a tail verifies trivially; version 0 tails cannot be verified from the row
// bytes alone and return an error saying so.
func (v *RowView) VerifyChecksum(data []byte) error {
	ct, ok := v.Checksum()
	if !ok {
		return nil
	}
	if ct.Version == 0 {
		return headerErr(FormatV2, v.dataEnd, "checksum version 0 is computed over column values, not verifiable from row bytes")
	}
	sum := crc32.Update(crc32.ChecksumIEEE(v.row[:v.dataEnd+1]), crc32.IEEETable, data)
	if sum != ct.Sum {
		return headerErr(FormatV2, v.dataEnd+1, "checksum mismatch: stored 0x%08x, computed 0x%08x", ct.Sum, sum)
	}
	return nil
}

// EncodeV2 is Encoder.EncodeV2 with a throwaway encoder.
func EncodeV2(dst []byte, ids []int64, datums []value.Datum, cs *Checksum) ([]byte, error) {
	var e Encoder
	return e.EncodeV2(dst, ids, datums, cs)
}
