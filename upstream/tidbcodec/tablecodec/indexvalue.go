package tablecodec

import (
	"encoding/binary"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// Index value markers (facts §3.6).
const (
	indexVersionFlag       byte = 125 // 0x7d: clustered v1 layout
	commonHandleFlag       byte = 127 // 0x7f: common handle segment
	partitionIDFlag        byte = 126 // 0x7e: partition id segment
	restoreDataFlag        byte = 0x80
	untouchedIndexKVFlag   byte = '1'
	nonUniqueOldIndexValue byte = '0'
)

// IndexValue is a parsed index value (rule K24). Slices borrow the input.
type IndexValue struct {
	// IntHandle is valid when HasIntHandle: a unique index on an int-handle
	// table keeps the handle in the value.
	IntHandle    int64
	HasIntHandle bool
	// CommonHandle is the encoded common handle of a unique index on a
	// clustered table (nil otherwise).
	CommonHandle []byte
	// PartitionID is valid when HasPartitionID (global indexes).
	PartitionID    int64
	HasPartitionID bool
	// RestoreData is the row-v2 blob with original column values (nil when
	// absent).
	RestoreData []byte
	// Clustered reports the clustered-v1 layout (TailLen, 0x7d, 0x01, ...).
	Clustered bool
	// Untouched reports the in-memory "no-op" marker (should not reach disk).
	Untouched bool
}

// DecodeIndexValue parses the three index value layouts: old (≤ 9 bytes:
// 8-byte big-endian handle for unique indexes, "0" for non-unique ones),
// version 0 (TailLen, segments, tail) and clustered v1 (TailLen, 0x7d, 0x01,
// segments, tail). When neither an int handle nor a common handle is in the
// value, the handle is the suffix of the index key.
func DecodeIndexValue(v []byte) (IndexValue, error) {
	var iv IndexValue
	if len(v) == 0 {
		return iv, keyErr(v, 0, "empty index value")
	}
	if len(v) <= 9 {
		switch {
		case len(v) == 1 && v[0] == nonUniqueOldIndexValue:
			return iv, nil
		case len(v) == 1 && v[0] == untouchedIndexKVFlag:
			iv.Untouched = true
			return iv, nil
		case len(v) == 8 || (len(v) == 9 && v[8] == untouchedIndexKVFlag):
			iv.IntHandle = int64(binary.BigEndian.Uint64(v))
			iv.HasIntHandle = true
			iv.Untouched = len(v) == 9
			return iv, nil
		case len(v) >= 3 && v[1] == indexVersionFlag:
			// clustered v1 value without segments and tail (e.g. 007d01)
		default:
			return iv, keyErr(v, 0, "old-layout index value of %d bytes is neither '0' nor an 8-byte handle", len(v))
		}
	}
	tailLen := int(v[0])
	if tailLen >= len(v) {
		return iv, keyErr(v, 0, "index value tail length %d, value has %d bytes", tailLen, len(v))
	}
	end := len(v) - tailLen
	tail := v[end:]
	if len(tail) > 0 && tail[len(tail)-1] == untouchedIndexKVFlag && (len(tail) == 1 || len(tail) == 9) {
		iv.Untouched = true
		tail = tail[:len(tail)-1]
	}
	off := 1
	if off+1 < end && v[off] == indexVersionFlag {
		if v[off+1] != 1 {
			return iv, keyErr(v, off+1, "unknown clustered index value version %d", v[off+1])
		}
		iv.Clustered = true
		off += 2
	}
	if off < end && v[off] == commonHandleFlag {
		if off+3 > end {
			return iv, keyErr(v, off, "common handle segment header truncated")
		}
		n := int(binary.BigEndian.Uint16(v[off+1:]))
		if off+3+n > end {
			return iv, keyErr(v, off+3, "common handle of %d bytes exceeds the value", n)
		}
		iv.CommonHandle = v[off+3 : off+3+n]
		off += 3 + n
	}
	if off < end && v[off] == partitionIDFlag {
		if off+9 > end {
			return iv, keyErr(v, off, "partition id segment truncated")
		}
		iv.PartitionID = codec.DecodeCmpUintToInt(binary.BigEndian.Uint64(v[off+1:]))
		iv.HasPartitionID = true
		off += 9
	}
	if off < end {
		if v[off] != restoreDataFlag {
			return iv, keyErr(v, off, "unexpected byte 0x%02x, want restore data (0x80) or the tail", v[off])
		}
		iv.RestoreData = v[off:end]
	}
	if len(tail) == 8 {
		iv.IntHandle = int64(binary.BigEndian.Uint64(tail))
		iv.HasIntHandle = true
	} else {
		for i, c := range tail {
			if c != 0 {
				return iv, keyErr(v, end+i, "index value tail of %d bytes is neither padding nor an int handle", len(tail))
			}
		}
	}
	return iv, nil
}

// AppendIndexValue appends the value TiDB writes for an index entry (rule
// K24), choosing the layout from what iv carries: Clustered → clustered v1
// (TailLen 0, 7d 01, segments); no segment at all → old layout (8-byte
// handle for a unique index on an int-handle table, else "0"); otherwise
// version 0 (TailLen, segments, then the int handle or zero padding up to
// 10 bytes). Untouched is not written (it never reaches storage).
func AppendIndexValue(b []byte, iv IndexValue) []byte {
	segments := func(b []byte) []byte {
		if iv.CommonHandle != nil {
			b = append(b, commonHandleFlag)
			b = binary.BigEndian.AppendUint16(b, uint16(len(iv.CommonHandle)))
			b = append(b, iv.CommonHandle...)
		}
		if iv.HasPartitionID {
			b = codec.EncodeInt(append(b, partitionIDFlag), iv.PartitionID)
		}
		return append(b, iv.RestoreData...)
	}
	if iv.Clustered {
		return segments(append(b, 0, indexVersionFlag, 1))
	}
	if iv.CommonHandle == nil && !iv.HasPartitionID && iv.RestoreData == nil {
		if iv.HasIntHandle {
			return binary.BigEndian.AppendUint64(b, uint64(iv.IntHandle))
		}
		return append(b, nonUniqueOldIndexValue)
	}
	start := len(b)
	b = segments(append(b, 0))
	tail := 0
	if iv.HasIntHandle {
		b = binary.BigEndian.AppendUint64(b, uint64(iv.IntHandle))
		tail = 8
	}
	for len(b)-start < 10 {
		b = append(b, 0)
		tail++
	}
	b[start] = byte(tail)
	return b
}
