package value

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Decimal limits, as TiDB enforces them for stored DECIMAL(M,D).
const (
	MaxDecimalPrecision = 65
	MaxDecimalFrac      = 30
	digitsPerWord       = 9
	wordSize            = 4
)

// dig2bytes[n] is the number of bytes a group of n decimal digits takes in
// the bin format.
var dig2bytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

var pow10 = [10]uint32{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// Decimal is an exact decimal number (TiDB's MyDecimal) held as its digit
// string: nInt integer digits (no leading zeros) followed by nFrac fraction
// digits (trailing zeros kept, they carry the scale). It is a plain value:
// copying it never allocates.
type Decimal struct {
	digits [MaxDecimalPrecision + MaxDecimalFrac]byte
	nInt   uint8
	nFrac  uint8
	neg    bool
}

// DecimalBinSize returns the bin size of DECIMAL(prec, frac), or an error if
// the shape is not storable.
func DecimalBinSize(prec, frac int) (int, error) {
	if err := checkDecimalShape(prec, frac); err != nil {
		return 0, err
	}
	intDigits := prec - frac
	return (intDigits/digitsPerWord)*wordSize + dig2bytes[intDigits%digitsPerWord] +
		(frac/digitsPerWord)*wordSize + dig2bytes[frac%digitsPerWord], nil
}

func checkDecimalShape(prec, frac int) error {
	if prec < 1 || prec > MaxDecimalPrecision {
		return fmt.Errorf("decimal: precision %d out of range 1..%d", prec, MaxDecimalPrecision)
	}
	if frac < 0 || frac > MaxDecimalFrac || frac > prec {
		return fmt.Errorf("decimal: frac %d out of range 0..min(%d, precision %d)", frac, MaxDecimalFrac, prec)
	}
	return nil
}

// ParseDecimal parses "[+-]digits[.digits]" (either side may be empty but not
// both). Leading integer zeros are dropped; fraction digits are kept as
// written.
func ParseDecimal(s string) (Decimal, error) {
	var d Decimal
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		d.neg = s[i] == '-'
		i++
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[intStart:i]
	var fracPart string
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		fracPart = s[fs:i]
	}
	if i != len(s) {
		return Decimal{}, fmt.Errorf("decimal: bad character %q at offset %d in %q", s[i], i, s)
	}
	if len(intPart) == 0 && len(fracPart) == 0 {
		return Decimal{}, fmt.Errorf("decimal: no digits in %q", s)
	}
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	if len(intPart) > MaxDecimalPrecision {
		return Decimal{}, fmt.Errorf("decimal: %d integer digits exceed %d in %q", len(intPart), MaxDecimalPrecision, s)
	}
	if len(fracPart) > MaxDecimalFrac {
		return Decimal{}, fmt.Errorf("decimal: %d fraction digits exceed %d in %q", len(fracPart), MaxDecimalFrac, s)
	}
	n := 0
	for j := 0; j < len(intPart); j++ {
		d.digits[n] = intPart[j] - '0'
		n++
	}
	for j := 0; j < len(fracPart); j++ {
		d.digits[n] = fracPart[j] - '0'
		n++
	}
	d.nInt, d.nFrac = uint8(len(intPart)), uint8(len(fracPart))
	if d.IsZero() {
		d.neg = false
	}
	return d, nil
}

// MustParseDecimal is ParseDecimal for constants in tests and tables.
func MustParseDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// IsZero reports whether every digit is zero.
func (d *Decimal) IsZero() bool {
	for _, c := range d.digits[:int(d.nInt)+int(d.nFrac)] {
		if c != 0 {
			return false
		}
	}
	return true
}

// IsNegative reports the sign (never true for zero).
func (d *Decimal) IsNegative() bool { return d.neg }

// Frac returns the number of fraction digits.
func (d *Decimal) Frac() int { return int(d.nFrac) }

// PrecisionAndFrac returns the value's natural shape: precision = integer
// digits + fraction digits (at least 1), frac = fraction digits.
func (d *Decimal) PrecisionAndFrac() (prec, frac int) {
	prec = int(d.nInt) + int(d.nFrac)
	if prec == 0 {
		prec = 1
	}
	return prec, int(d.nFrac)
}

// String returns the canonical text: optional '-', integer digits ("0" when
// none), then '.' and exactly Frac digits when Frac > 0.
func (d Decimal) String() string { return string(d.AppendText(nil)) }

// AppendText appends the canonical text form.
func (d *Decimal) AppendText(dst []byte) []byte {
	if d.neg {
		dst = append(dst, '-')
	}
	if d.nInt == 0 {
		dst = append(dst, '0')
	}
	for _, c := range d.digits[:d.nInt] {
		dst = append(dst, '0'+c)
	}
	if d.nFrac > 0 {
		dst = append(dst, '.')
		for _, c := range d.digits[d.nInt : d.nInt+d.nFrac] {
			dst = append(dst, '0'+c)
		}
	}
	return dst
}

// Float64 converts to the nearest float64.
func (d *Decimal) Float64() float64 {
	f, _ := strconv.ParseFloat(d.String(), 64)
	return f
}

// Equal compares numerically (1.5 equals 1.50).
func (d *Decimal) Equal(o *Decimal) bool { return d.Compare(o) == 0 }

// Compare returns -1, 0 or 1 comparing numerically.
func (d *Decimal) Compare(o *Decimal) int {
	if d.neg != o.neg {
		if d.neg {
			return -1
		}
		return 1
	}
	c := compareAbs(d, o)
	if d.neg {
		return -c
	}
	return c
}

func compareAbs(a, b *Decimal) int {
	// Integer parts: digits are stored without leading zeros, but an all
	// zero integer part may still carry zeros after arithmetic; trim here.
	ai, bi := a.digits[:a.nInt], b.digits[:b.nInt]
	for len(ai) > 0 && ai[0] == 0 {
		ai = ai[1:]
	}
	for len(bi) > 0 && bi[0] == 0 {
		bi = bi[1:]
	}
	if len(ai) != len(bi) {
		if len(ai) < len(bi) {
			return -1
		}
		return 1
	}
	for i := range ai {
		if ai[i] != bi[i] {
			if ai[i] < bi[i] {
				return -1
			}
			return 1
		}
	}
	af, bf := a.digits[a.nInt:a.nInt+a.nFrac], b.digits[b.nInt:b.nInt+b.nFrac]
	n := max(len(af), len(bf))
	for i := 0; i < n; i++ {
		var x, y byte
		if i < len(af) {
			x = af[i]
		}
		if i < len(bf) {
			y = bf[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Round returns d rounded half away from zero to frac fraction digits (TiDB's
// default rounding when a value is cast to DECIMAL(M,D)). frac larger than
// the current scale pads with zeros.
func (d Decimal) Round(frac int) (Decimal, error) {
	if frac < 0 || frac > MaxDecimalFrac {
		return Decimal{}, fmt.Errorf("decimal: round to frac %d out of range 0..%d", frac, MaxDecimalFrac)
	}
	cur := int(d.nFrac)
	if frac >= cur {
		for i := cur; i < frac; i++ {
			d.digits[int(d.nInt)+i] = 0
		}
		d.nFrac = uint8(frac)
		return d, nil
	}
	total := int(d.nInt) + frac
	roundUp := d.digits[total] >= 5
	d.nFrac = uint8(frac)
	if roundUp {
		i := total - 1
		for ; i >= 0; i-- {
			if d.digits[i] < 9 {
				d.digits[i]++
				break
			}
			d.digits[i] = 0
		}
		if i < 0 { // carry out of the most significant digit
			if int(d.nInt) >= MaxDecimalPrecision {
				return Decimal{}, fmt.Errorf("decimal: rounding %s overflows %d integer digits", d.String(), MaxDecimalPrecision)
			}
			copy(d.digits[1:total+1], d.digits[:total])
			d.digits[0] = 1
			d.nInt++
		}
	}
	if d.IsZero() {
		d.neg = false
	}
	return d, nil
}

// AppendBin appends the MyDecimal bin form at DECIMAL(prec, frac). A value
// with more integer digits than prec-frac, or with non-zero fraction digits
// beyond frac, is refused (spec rule V5): callers round first.
func (d Decimal) AppendBin(dst []byte, prec, frac int) ([]byte, error) {
	size, err := DecimalBinSize(prec, frac)
	if err != nil {
		return dst, err
	}
	intDigits := prec - frac
	if int(d.nInt) > intDigits {
		return dst, fmt.Errorf("decimal: %s has %d integer digits, DECIMAL(%d,%d) allows %d", d.String(), d.nInt, prec, frac, intDigits)
	}
	for i := frac; i < int(d.nFrac); i++ {
		if d.digits[int(d.nInt)+i] != 0 {
			return dst, fmt.Errorf("decimal: %s has %d fraction digits, DECIMAL(%d,%d) allows %d", d.String(), d.nFrac, prec, frac, frac)
		}
	}
	// digit returns the i-th digit of the fixed-width layout
	// (intDigits integer digits, zero padded on the left, then frac digits).
	digit := func(i int) uint32 {
		if i < intDigits {
			j := i - (intDigits - int(d.nInt))
			if j < 0 {
				return 0
			}
			return uint32(d.digits[j])
		}
		j := i - intDigits
		if j >= int(d.nFrac) {
			return 0
		}
		return uint32(d.digits[int(d.nInt)+j])
	}
	start := len(dst)
	pos := 0
	putGroup := func(nDigits int) {
		var v uint32
		for k := 0; k < nDigits; k++ {
			v = v*10 + digit(pos)
			pos++
		}
		nb := dig2bytes[nDigits]
		var tmp [4]byte
		binary.BigEndian.PutUint32(tmp[:], v)
		dst = append(dst, tmp[4-nb:]...)
	}
	if lead := intDigits % digitsPerWord; lead > 0 {
		putGroup(lead)
	}
	for k := 0; k < intDigits/digitsPerWord; k++ {
		putGroup(digitsPerWord)
	}
	for k := 0; k < frac/digitsPerWord; k++ {
		putGroup(digitsPerWord)
	}
	if tail := frac % digitsPerWord; tail > 0 {
		putGroup(tail)
	}
	out := dst[start:]
	if len(out) != size {
		return dst, fmt.Errorf("decimal: internal size mismatch %d != %d", len(out), size)
	}
	if d.neg && !d.IsZero() {
		for i := range out {
			out[i] = ^out[i]
		}
	}
	out[0] ^= 0x80
	return dst, nil
}

// DecodeDecimalBin decodes a MyDecimal bin of DECIMAL(prec, frac) from the
// front of b and returns the value and the number of bytes used. Every
// group is checked to hold fewer digits than its width allows.
func DecodeDecimalBin(b []byte, prec, frac int) (Decimal, int, error) {
	var d Decimal
	size, err := DecimalBinSize(prec, frac)
	if err != nil {
		return d, 0, err
	}
	if len(b) < size {
		return d, 0, fmt.Errorf("decimal: bin of DECIMAL(%d,%d) needs %d bytes, have %d", prec, frac, size, len(b))
	}
	var mask byte
	if b[0]&0x80 == 0 {
		mask = 0xff
		d.neg = true
	}
	intDigits := prec - frac
	n, off := 0, 0
	started := false // a non-zero integer digit has been written
	for g := 0; g < 4; g++ {
		// Group sequence: leading int, full int words, full frac words,
		// trailing frac group.
		var groups, width int
		switch g {
		case 0:
			groups, width = 1, intDigits%digitsPerWord
		case 1:
			groups, width = intDigits/digitsPerWord, digitsPerWord
		case 2:
			groups, width = frac/digitsPerWord, digitsPerWord
		case 3:
			groups, width = 1, frac%digitsPerWord
		}
		if width == 0 {
			continue
		}
		nb := dig2bytes[width]
		for k := 0; k < groups; k++ {
			var v uint32
			for j := 0; j < nb; j++ {
				c := b[off+j] ^ mask
				if off+j == 0 {
					c ^= 0x80
				}
				v = v<<8 | uint32(c)
			}
			if v >= pow10[width] {
				return Decimal{}, 0, fmt.Errorf("decimal: group at offset %d holds %d, more than %d digits", off, v, width)
			}
			off += nb
			isInt := g < 2
			if isInt && !started && v == 0 {
				continue // leading zero word of the integer part
			}
			var tmp [9]byte
			for j := width - 1; j >= 0; j-- {
				tmp[j] = byte(v % 10)
				v /= 10
			}
			digs := tmp[:width]
			if isInt && !started {
				for len(digs) > 0 && digs[0] == 0 {
					digs = digs[1:]
				}
				started = true
			}
			n += copy(d.digits[n:], digs)
			if isInt {
				d.nInt = uint8(n)
			}
		}
	}
	d.nFrac = uint8(frac)
	if d.neg && d.IsZero() {
		d.neg = false
	}
	return d, size, nil
}

// DecimalFromFloat64 converts f with its shortest round-trip digits.
func DecimalFromFloat64(f float64) (Decimal, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Decimal{}, fmt.Errorf("decimal: cannot convert %v", f)
	}
	return ParseDecimal(strconv.FormatFloat(f, 'f', -1, 64))
}

// DecimalFromInt64 converts an integer exactly.
func DecimalFromInt64(v int64) Decimal { return MustParseDecimal(strconv.FormatInt(v, 10)) }

// DecimalFromUint64 converts an unsigned integer exactly.
func DecimalFromUint64(v uint64) Decimal { return MustParseDecimal(strconv.FormatUint(v, 10)) }
