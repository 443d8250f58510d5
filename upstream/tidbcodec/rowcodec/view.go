package rowcodec

import (
	"encoding/binary"
	"math"
)

// Row format v2 header constants.
const (
	// CodecVerV2 is the first byte of every row v2 value.
	CodecVerV2 byte = 0x80

	flagLarge    byte = 0x01 // 4-byte column ids and offsets
	flagChecksum byte = 0x02 // checksum tail after the data area
	knownFlags        = flagLarge | flagChecksum

	headerSize = 6 // version, flags, uint16 not-null count, uint16 null count

	// checksum tail header: bits 0-2 version, bit 3 "extra checksum".
	checksumVersionMask byte = 0x07
	checksumExtraFlag   byte = 0x08
	maxChecksumVersion  byte = 2
)

// IsV2 reports whether a row value is in format v2 (first byte 0x80).
func IsV2(row []byte) bool { return len(row) > 0 && row[0] == CodecVerV2 }

// CellState says what a row holds for a column id.
type CellState uint8

const (
	// CellAbsent: the row does not mention the column (handle column,
	// NULL with a NULL default, virtual, or added after the row was
	// written); the caller decides the value (handle or origin default).
	CellAbsent CellState = iota
	// CellNull: the row stores NULL for the column.
	CellNull
	// CellValue: the row stores a value.
	CellValue
)

// v1Entry locates one (column id, value datum) pair of a v1 row.
type v1Entry struct {
	id         int64
	start, end int32 // the value datum, flag byte included
}

// RowView is a lazy, borrowing view over one row value. Reset parses only the
// header (v2) or builds a small id index (v1); columns decode on access. The
// zero RowView is empty (no row). A RowView is reusable: Reset on the same
// value keeps its v1 index buffer, so a long-lived view does not allocate.
// It must not be used by two goroutines at once.
type RowView struct {
	row      []byte
	format   Format
	large    bool
	checksum bool
	nNotNull int
	nNull    int
	offsOff  int // start of the offsets array
	dataOff  int // start of the data area
	dataEnd  int // end of the data area (start of the checksum tail)

	v1 []v1Entry // v1: entries sorted by id
}

// Reset points the view at row and parses its header. row is borrowed until
// the next Reset. On error the view is left empty.
func (v *RowView) Reset(row []byte) error {
	v.row = row
	v.v1 = v.v1[:0]
	var err error
	if len(row) == 0 {
		err = headerErr(FormatUnknown, 0, "empty row value")
	} else if row[0] == CodecVerV2 {
		v.format = FormatV2
		err = v.resetV2()
	} else {
		v.format = FormatV1
		err = v.resetV1()
	}
	if err != nil {
		*v = RowView{v1: v.v1[:0]}
	}
	return err
}

func (v *RowView) resetV2() error {
	row := v.row
	if len(row) < headerSize {
		return headerErr(FormatV2, len(row), "truncated header: %d bytes, need %d", len(row), headerSize)
	}
	flags := row[1]
	if flags&^knownFlags != 0 {
		return headerErr(FormatV2, 1, "unknown flag bits 0x%02x in flags byte 0x%02x", flags&^knownFlags, flags)
	}
	v.large = flags&flagLarge != 0
	v.checksum = flags&flagChecksum != 0
	v.nNotNull = int(binary.LittleEndian.Uint16(row[2:]))
	v.nNull = int(binary.LittleEndian.Uint16(row[4:]))
	idSize, offSize := 1, 2
	if v.large {
		idSize, offSize = 4, 4
	}
	v.offsOff = headerSize + (v.nNotNull+v.nNull)*idSize
	v.dataOff = v.offsOff + v.nNotNull*offSize
	if v.dataOff > len(row) {
		return headerErr(FormatV2, len(row), "truncated: %d not-null and %d null column ids and %d offsets need %d bytes, row has %d",
			v.nNotNull, v.nNull, v.nNotNull, v.dataOff, len(row))
	}
	dataLen := 0
	if v.nNotNull > 0 {
		dataLen = v.offset(v.nNotNull - 1)
	}
	v.dataEnd = v.dataOff + dataLen
	if dataLen > len(row)-v.dataOff {
		return headerErr(FormatV2, v.dataOff, "data area of %d bytes (last offset) exceeds the %d bytes left", dataLen, len(row)-v.dataOff)
	}
	tail := row[v.dataEnd:]
	if !v.checksum {
		if len(tail) != 0 {
			return headerErr(FormatV2, v.dataEnd, "%d trailing bytes after the data area and no checksum flag", len(tail))
		}
		return nil
	}
	if len(tail) == 0 {
		return headerErr(FormatV2, v.dataEnd, "checksum flag set but the checksum tail is missing")
	}
	h := tail[0]
	if h&^(checksumVersionMask|checksumExtraFlag) != 0 || h&checksumVersionMask > maxChecksumVersion {
		return headerErr(FormatV2, v.dataEnd, "unknown checksum header 0x%02x", h)
	}
	want := 5
	if h&checksumExtraFlag != 0 {
		want = 9
	}
	if len(tail) != want {
		return headerErr(FormatV2, v.dataEnd, "checksum tail is %d bytes, header 0x%02x says %d", len(tail), h, want)
	}
	return nil
}

// offset returns the i-th end offset of the data area (v2).
func (v *RowView) offset(i int) int {
	if v.large {
		return int(binary.LittleEndian.Uint32(v.row[v.offsOff+4*i:]))
	}
	return int(binary.LittleEndian.Uint16(v.row[v.offsOff+2*i:]))
}

// idAt returns the i-th stored column id (v2; not-null ids first).
func (v *RowView) idAt(i int) int64 {
	if v.large {
		return int64(binary.LittleEndian.Uint32(v.row[headerSize+4*i:]))
	}
	return int64(v.row[headerSize+i])
}

// Format reports the layout of the current row.
func (v *RowView) Format() Format { return v.format }

// Bytes returns the row value the view borrows.
func (v *RowView) Bytes() []byte { return v.row }

// NumStored is the number of columns the row mentions (values and NULLs).
func (v *RowView) NumStored() int {
	if v.format == FormatV1 {
		return len(v.v1)
	}
	return v.nNotNull + v.nNull
}

// searchV2 finds id in the ids [lo, hi) of a v2 row (sorted ascending).
func (v *RowView) searchV2(id int64, lo, hi int) int {
	if v.large {
		if id < 0 || id > math.MaxUint32 {
			return -1
		}
		ids := v.row[headerSize:]
		want := uint32(id)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			got := binary.LittleEndian.Uint32(ids[4*m:])
			if got < want {
				lo = m + 1
			} else if got > want {
				hi = m
			} else {
				return m
			}
		}
		return -1
	}
	if id < 0 || id > math.MaxUint8 {
		return -1
	}
	return searchSmall(v.row[headerSize+lo:headerSize+hi], byte(id), lo)
}

// searchSmall finds want in ascending 1-byte ids and returns its index plus
// base, or -1. Dense ids (no dropped columns: id = first + index) are found
// with one probe; otherwise a branch-free binary search keeps lookups
// cheap whatever the column.
func searchSmall(ids []byte, want byte, base int) int {
	n := len(ids)
	if n == 0 {
		return -1
	}
	if g := int(want) - int(ids[0]); g >= 0 && g < n && ids[g] == want {
		return base + g
	}
	lo := 0
	for n > 1 {
		half := n >> 1
		if ids[lo+half] <= want {
			lo += half
		}
		n -= half
	}
	if ids[lo] == want {
		return base + lo
	}
	return -1
}

// cellV2 returns the bytes of the i-th not-null cell and its row offset.
func (v *RowView) cellV2(i int, id int64) ([]byte, int, error) {
	start := 0
	if i > 0 {
		start = v.offset(i - 1)
	}
	end := v.offset(i)
	dataLen := v.dataEnd - v.dataOff
	if start > end || end > dataLen {
		return nil, v.dataOff + start, colErr(FormatV2, id, v.dataOff+start,
			"cell spans data offsets [%d, %d) outside the %d-byte data area", start, end, dataLen)
	}
	return v.row[v.dataOff+start : v.dataOff+end], v.dataOff + start, nil
}

// Find locates column id. For CellValue it returns the stored bytes (v2: the
// cell; v1: the value datum including its flag byte) and their offset in the
// row value.
func (v *RowView) Find(id int64) (CellState, []byte, int, error) {
	switch v.format {
	case FormatV2:
		if i := v.searchV2(id, 0, v.nNotNull); i >= 0 {
			cell, off, err := v.cellV2(i, id)
			if err != nil {
				return CellAbsent, nil, off, err
			}
			return CellValue, cell, off, nil
		}
		if v.nNull > 0 && v.searchV2(id, v.nNotNull, v.nNotNull+v.nNull) >= 0 {
			return CellNull, nil, 0, nil
		}
		return CellAbsent, nil, 0, nil
	case FormatV1:
		lo, hi := 0, len(v.v1)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			e := v.v1[m].id
			if e < id {
				lo = m + 1
			} else if e > id {
				hi = m
			} else {
				en := &v.v1[m]
				if v.row[en.start] == flagNil {
					return CellNull, nil, int(en.start), nil
				}
				return CellValue, v.row[en.start:en.end], int(en.start), nil
			}
		}
		return CellAbsent, nil, 0, nil
	}
	return CellAbsent, nil, 0, headerErr(FormatUnknown, 0, "no row: Reset was not called or failed")
}

// ChecksumTail is the optional tail of a v2 row.
type ChecksumTail struct {
	// Version: 0 (TiDB 7.1-8.2, per-column canonical checksum), 1 (8.3,
	// over row bytes and record key), 2 (8.4+, over row bytes and encoded
	// handle).
	Version  int
	Sum      uint32
	HasExtra bool
	Extra    uint32
}

// Checksum returns the checksum tail of a v2 row, if it has one.
func (v *RowView) Checksum() (ChecksumTail, bool) {
	if v.format != FormatV2 || !v.checksum {
		return ChecksumTail{}, false
	}
	t := v.row[v.dataEnd:]
	ct := ChecksumTail{Version: int(t[0] & checksumVersionMask), Sum: binary.LittleEndian.Uint32(t[1:])}
	if t[0]&checksumExtraFlag != 0 {
		ct.HasExtra = true
		ct.Extra = binary.LittleEndian.Uint32(t[5:])
	}
	return ct, true
}
