package mysqlfront

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxPayload is the largest payload of one wire packet; a longer message is
// split into 0xffffff-byte packets followed by a shorter one (MY-P2).
const maxPayload = 1<<24 - 1

// packetIO reads and writes MySQL packets on one connection and keeps the
// sequence id.
type packetIO struct {
	r   *bufio.Reader
	w   *bufio.Writer
	seq uint8
	// maxMessage bounds one incoming message (all its packets together).
	maxMessage int
}

// errPacketTooLarge is returned for a message over maxMessage (MY-P3).
var errPacketTooLarge = errors.New("got a packet bigger than 'max_allowed_packet' bytes")

// errOutOfOrder is returned for a packet whose sequence id is not the
// expected one (MY-P2).
type errOutOfOrder struct{ got, want uint8 }

func (e errOutOfOrder) Error() string {
	return fmt.Sprintf("got packets out of order: sequence id %d, expected %d", e.got, e.want)
}

// readMessage reads one logical message (joining 0xffffff-long packets).
func (p *packetIO) readMessage() ([]byte, error) {
	var out []byte
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
			return nil, err
		}
		n := int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16)
		if hdr[3] != p.seq {
			return nil, errOutOfOrder{got: hdr[3], want: p.seq}
		}
		p.seq++
		if len(out)+n > p.maxMessage {
			return nil, errPacketTooLarge
		}
		start := len(out)
		out = append(out, make([]byte, n)...)
		if _, err := io.ReadFull(p.r, out[start:]); err != nil {
			return nil, fmt.Errorf("packet body (%d bytes): %w", n, err)
		}
		if n < maxPayload {
			return out, nil
		}
	}
}

// writeMessage writes one logical message, splitting it as the protocol
// requires; the caller flushes.
func (p *packetIO) writeMessage(b []byte) error {
	for {
		n := min(len(b), maxPayload)
		hdr := [4]byte{byte(n), byte(n >> 8), byte(n >> 16), p.seq}
		p.seq++
		if _, err := p.w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := p.w.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
		if n < maxPayload {
			return nil
		}
	}
}

func (p *packetIO) flush() error { return p.w.Flush() }

// ---- encoding helpers ----

func appendLenEncInt(b []byte, v uint64) []byte {
	switch {
	case v < 251:
		return append(b, byte(v))
	case v < 1<<16:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v < 1<<24:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	}
	b = append(b, 0xfe)
	return binary.LittleEndian.AppendUint64(b, v)
}

func appendLenEncString(b []byte, s []byte) []byte {
	b = appendLenEncInt(b, uint64(len(s)))
	return append(b, s...)
}

func appendUint16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendUint32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// ---- decoding helpers: every read is bounds-checked (MY-P4) ----

// reader walks a payload; the first failed read sets err and later reads
// return zero values.
type reader struct {
	b   []byte
	pos int
	err error
	// what names the message for error texts.
	what string
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("malformed %s at byte %d: %s", r.what, r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail("need %d bytes, %d left", n, r.left())
		return nil
	}
	out := r.b[r.pos : r.pos+n]
	r.pos += n
	return out
}

func (r *reader) byte1() byte {
	b := r.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *reader) uint32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// nulString reads up to a NUL byte (consumed).
func (r *reader) nulString() []byte {
	if r.err != nil {
		return nil
	}
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			out := r.b[r.pos:i]
			r.pos = i + 1
			return out
		}
	}
	r.fail("string without NUL terminator")
	return nil
}

func (r *reader) lenEncInt() uint64 {
	first := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case first < 0xfb:
		return uint64(first)
	case first == 0xfc:
		b := r.bytes(2)
		if b == nil {
			return 0
		}
		return uint64(binary.LittleEndian.Uint16(b))
	case first == 0xfd:
		b := r.bytes(3)
		if b == nil {
			return 0
		}
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16
	case first == 0xfe:
		b := r.bytes(8)
		if b == nil {
			return 0
		}
		return binary.LittleEndian.Uint64(b)
	}
	r.fail("invalid length-encoded integer prefix 0x%02x", first)
	return 0
}

func (r *reader) lenEncString() []byte {
	n := r.lenEncInt()
	if r.err != nil {
		return nil
	}
	if n > uint64(r.left()) {
		r.fail("length-encoded string of %d bytes, %d left", n, r.left())
		return nil
	}
	return r.bytes(int(n))
}
