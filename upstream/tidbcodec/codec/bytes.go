package codec

import "encoding/binary"

const (
	encGroupSize = 8
	encMarker    = byte(0xFF)
	encPad       = byte(0x00)
)

// EncodedBytesLen returns the memcomparable size of n raw bytes.
func EncodedBytesLen(n int) int { return (n/encGroupSize + 1) * (encGroupSize + 1) }

// EncodeBytes appends the memcomparable form of data (rule K5): 8-byte
// groups, each followed by a marker 0xFF - padCount, always ending with a
// padded group.
func EncodeBytes(b []byte, data []byte) []byte {
	need := EncodedBytesLen(len(data))
	if cap(b)-len(b) < need {
		nb := make([]byte, len(b), len(b)+need)
		copy(nb, b)
		b = nb
	}
	for idx := 0; idx <= len(data); idx += encGroupSize {
		remain := len(data) - idx
		if remain >= encGroupSize {
			b = append(b, data[idx:idx+encGroupSize]...)
			b = append(b, encMarker)
			continue
		}
		pad := encGroupSize - remain
		b = append(b, data[idx:]...)
		for i := 0; i < pad; i++ {
			b = append(b, encPad)
		}
		b = append(b, encMarker-byte(pad))
	}
	return b
}

// EncodeBytesDesc appends the bitwise NOT of EncodeBytes(data).
func EncodeBytesDesc(b []byte, data []byte) []byte {
	n := len(b)
	b = EncodeBytes(b, data)
	for i := n; i < len(b); i++ {
		b[i] = ^b[i]
	}
	return b
}

// DecodeBytes decodes a memcomparable byte string from the front of b,
// appending the raw bytes to buf[:0] (no allocation when buf has room).
func DecodeBytes(b []byte, buf []byte) (rest []byte, data []byte, err error) {
	data = buf[:0]
	for off := 0; ; off += encGroupSize + 1 {
		if len(b)-off < encGroupSize+1 {
			return b, nil, errAt(off, "memcomparable bytes: group needs 9 bytes, have %d", len(b)-off)
		}
		g := b[off : off+encGroupSize+1 : off+encGroupSize+1]
		marker := g[8]
		if marker == encMarker {
			data = append(data, g[:8]...)
			continue
		}
		pad := int(encMarker - marker)
		if pad > encGroupSize {
			return b, nil, errAt(off+encGroupSize, "memcomparable bytes: marker 0x%02x means %d pad bytes, max 8", marker, pad)
		}
		// The pad bytes are the low-order bytes of the big-endian word.
		if w := binary.BigEndian.Uint64(g); pad > 0 && w<<(64-8*uint(pad)) != 0 {
			return b, nil, errAt(off+encGroupSize-pad, "memcomparable bytes: pad bytes %x are not all 0x00", g[encGroupSize-pad:encGroupSize])
		}
		return b[off+encGroupSize+1:], append(data, g[:encGroupSize-pad]...), nil
	}
}

// DecodeBytesDesc decodes the descending form.
func DecodeBytesDesc(b []byte, buf []byte) (rest []byte, data []byte, err error) {
	return decodeBytesDesc(b, buf)
}

func decodeBytesDesc(b []byte, buf []byte) ([]byte, []byte, error) {
	const desc = true
	data := buf[:0]
	off := 0
	for {
		if len(b)-off < encGroupSize+1 {
			return b, nil, errAt(off, "memcomparable bytes: group needs 9 bytes, have %d", len(b)-off)
		}
		group := b[off : off+encGroupSize+1]
		marker := group[encGroupSize]
		if desc {
			marker = ^marker
		}
		if marker == encMarker {
			if desc {
				for _, c := range group[:encGroupSize] {
					data = append(data, ^c)
				}
			} else {
				data = append(data, group[:encGroupSize]...)
			}
			off += encGroupSize + 1
			continue
		}
		pad := int(encMarker - marker)
		if pad > encGroupSize {
			return b, nil, errAt(off+encGroupSize, "memcomparable bytes: marker 0x%02x means %d pad bytes, max 8", group[encGroupSize], pad)
		}
		keep := encGroupSize - pad
		// The pad must be zero bytes (0xFF in the desc form).
		var padWord uint64
		if pad > 0 {
			var w [8]byte
			copy(w[:], group[keep:encGroupSize])
			padWord = binary.LittleEndian.Uint64(w[:])
			want := uint64(0)
			if desc {
				want = (uint64(1)<<(8*uint(pad)) - 1)
				if pad == 8 {
					want = ^uint64(0)
				}
			}
			if padWord != want {
				return b, nil, errAt(off+keep, "memcomparable bytes: pad bytes %x are not all 0x%02x", group[keep:encGroupSize], byte(want))
			}
		}
		if desc {
			for _, c := range group[:keep] {
				data = append(data, ^c)
			}
		} else {
			data = append(data, group[:keep]...)
		}
		return b[off+encGroupSize+1:], data, nil
	}
}

// PeekBytesLen returns the length of the memcomparable byte string at the
// front of b (markers only; content is not checked).
func PeekBytesLen(b []byte, desc bool) (int, error) {
	off := 0
	for {
		if len(b)-off < encGroupSize+1 {
			return 0, errAt(off, "memcomparable bytes: group needs 9 bytes, have %d", len(b)-off)
		}
		m := b[off+encGroupSize]
		if desc {
			m = ^m
		}
		off += encGroupSize + 1
		if m != encMarker {
			if encMarker-m > encGroupSize {
				return 0, errAt(off-1, "memcomparable bytes: bad marker 0x%02x", b[off-1])
			}
			return off, nil
		}
	}
}

// EncodeCompactBytes appends varint(len) (signed zig-zag) + data (rule K6).
func EncodeCompactBytes(b []byte, data []byte) []byte {
	b = binary.AppendVarint(b, int64(len(data)))
	return append(b, data...)
}

// DecodeCompactBytes returns the borrowed bytes at the front of b.
func DecodeCompactBytes(b []byte) (rest []byte, data []byte, err error) {
	l, n := binary.Varint(b)
	if n <= 0 {
		return b, nil, errAt(0, "compact bytes: bad length varint")
	}
	if l < 0 || l > int64(len(b)-n) {
		return b, nil, errAt(n, "compact bytes: length %d, have %d bytes", l, len(b)-n)
	}
	return b[n+int(l):], b[n : n+int(l)], nil
}
