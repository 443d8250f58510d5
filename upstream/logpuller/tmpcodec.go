package logpuller

import "fmt"

// decodeComparable decodes a memcomparable EncodeBytes key.
// TODO(lead): switch to upstream/tidbcodec/codec.DecodeBytes once it lands.
func decodeComparable(b []byte) ([]byte, error) {
	var out []byte
	for {
		if len(b) < 9 {
			return nil, fmt.Errorf("comparable key truncated")
		}
		marker := b[8]
		pad := 0xFF - int(marker)
		if pad > 8 {
			return nil, fmt.Errorf("bad marker %x", marker)
		}
		out = append(out, b[:8-pad]...)
		b = b[9:]
		if pad != 0 {
			return out, nil
		}
	}
}

func encodeComparable(raw []byte) []byte {
	var out []byte
	for i := 0; ; i += 8 {
		rem := len(raw) - i
		if rem >= 8 {
			out = append(out, raw[i:i+8]...)
			out = append(out, 0xFF)
			continue
		}
		grp := make([]byte, 8)
		copy(grp, raw[i:])
		out = append(out, grp...)
		out = append(out, byte(0xFF-(8-rem)))
		return out
	}
}
