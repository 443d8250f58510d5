package value

import (
	"fmt"
	"strconv"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// MaxFsp is the largest fractional-second precision.
const MaxFsp = 6

// Time is a DATE, DATETIME or TIMESTAMP broken into fields. Type is
// mysql.TypeDate, TypeDatetime or TypeTimestamp; Fsp (0..6) only affects the
// text form. TIMESTAMP values hold UTC wall time (as stored).
type Time struct {
	Year        uint16
	Month       uint8
	Day         uint8
	Hour        uint8
	Minute      uint8
	Second      uint8
	Microsecond uint32
	Type        byte
	Fsp         uint8
}

// Pack returns the packed uint64 storage layout (spec rule V6):
// ((((year*13+month)<<5|day)<<17 | hour<<12|minute<<6|second) << 24) | micro.
func (t Time) Pack() uint64 {
	ymd := (uint64(t.Year)*13+uint64(t.Month))<<5 | uint64(t.Day)
	hms := uint64(t.Hour)<<12 | uint64(t.Minute)<<6 | uint64(t.Second)
	return (ymd<<17|hms)<<24 | uint64(t.Microsecond)
}

// UnpackTime reverses Pack. The result is not validated; see Validate.
func UnpackTime(p uint64, tp byte, fsp int) Time {
	micro := uint32(p & (1<<24 - 1))
	rest := p >> 24
	hms := rest & (1<<17 - 1)
	ymd := rest >> 17
	ym := ymd >> 5
	t := Time{
		Year:        uint16(ym / 13),
		Month:       uint8(ym % 13),
		Day:         uint8(ymd & 31),
		Hour:        uint8(hms >> 12),
		Minute:      uint8(hms >> 6 & 63),
		Second:      uint8(hms & 63),
		Microsecond: micro,
		Type:        tp,
		Fsp:         uint8(fsp),
	}
	if ym/13 > 0xffff {
		t.Year = 0xffff // out of range; Validate reports it
	}
	return t
}

// Validate checks every field is within MySQL's ranges. Zero parts (zero
// month/day, the all-zero time) are accepted: TiDB stores them under
// permissive SQL modes.
func (t Time) Validate() error {
	switch {
	case t.Year > 9999:
		return fmt.Errorf("time: year %d out of range 0..9999", t.Year)
	case t.Month > 12:
		return fmt.Errorf("time: month %d out of range 0..12", t.Month)
	case t.Day > 31:
		return fmt.Errorf("time: day %d out of range 0..31", t.Day)
	case t.Hour > 23:
		return fmt.Errorf("time: hour %d out of range 0..23", t.Hour)
	case t.Minute > 59:
		return fmt.Errorf("time: minute %d out of range 0..59", t.Minute)
	case t.Second > 59:
		return fmt.Errorf("time: second %d out of range 0..59", t.Second)
	case t.Microsecond > 999999:
		return fmt.Errorf("time: microsecond %d out of range 0..999999", t.Microsecond)
	case t.Fsp > MaxFsp:
		return fmt.Errorf("time: fsp %d out of range 0..%d", t.Fsp, MaxFsp)
	}
	switch t.Type {
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
	default:
		return fmt.Errorf("time: mysql type %d is not DATE, DATETIME or TIMESTAMP", t.Type)
	}
	return nil
}

// IsZero reports the all-zero time "0000-00-00 00:00:00".
func (t Time) IsZero() bool { return t.Pack() == 0 }

// String is the canonical text form (spec rule V7).
func (t Time) String() string { return string(t.AppendText(nil)) }

// AppendText appends "YYYY-MM-DD" for DATE, else "YYYY-MM-DD HH:MM:SS" plus
// '.' and the first Fsp microsecond digits when Fsp > 0.
func (t Time) AppendText(dst []byte) []byte {
	dst = appendPad(dst, uint64(t.Year), 4)
	dst = append(dst, '-')
	dst = appendPad(dst, uint64(t.Month), 2)
	dst = append(dst, '-')
	dst = appendPad(dst, uint64(t.Day), 2)
	if t.Type == mysql.TypeDate {
		return dst
	}
	dst = append(dst, ' ')
	dst = appendPad(dst, uint64(t.Hour), 2)
	dst = append(dst, ':')
	dst = appendPad(dst, uint64(t.Minute), 2)
	dst = append(dst, ':')
	dst = appendPad(dst, uint64(t.Second), 2)
	return appendFrac(dst, uint64(t.Microsecond), int(t.Fsp))
}

func appendFrac(dst []byte, micro uint64, fsp int) []byte {
	if fsp <= 0 {
		return dst
	}
	if fsp > MaxFsp {
		fsp = MaxFsp
	}
	var buf [6]byte
	for i := 5; i >= 0; i-- {
		buf[i] = byte('0' + micro%10)
		micro /= 10
	}
	dst = append(dst, '.')
	return append(dst, buf[:fsp]...)
}

func appendPad(dst []byte, v uint64, width int) []byte {
	var buf [20]byte
	s := strconv.AppendUint(buf[:0], v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// ParseTime parses "YYYY-MM-DD", "YYYY-MM-DD HH:MM:SS" or with a fraction,
// rounding the fraction half up to fsp digits (carrying into the seconds
// like MySQL). For DATE the time part must be absent or zero-truncated.
func ParseTime(s string, tp byte, fsp int) (Time, error) {
	if fsp < 0 || fsp > MaxFsp {
		return Time{}, fmt.Errorf("time: fsp %d out of range 0..%d", fsp, MaxFsp)
	}
	t := Time{Type: tp, Fsp: uint8(fsp)}
	p := parser{s: s}
	y := p.num(4, "year")
	p.lit('-')
	mo := p.num(2, "month")
	p.lit('-')
	d := p.num(2, "day")
	var h, mi, se, micro uint64
	var fracDigits int
	var fracVal uint64
	if p.err == nil && p.i < len(s) {
		if s[p.i] != ' ' && s[p.i] != 'T' {
			p.fail("' ' or 'T'")
		}
		p.i++
		h = p.num(2, "hour")
		p.lit(':')
		mi = p.num(2, "minute")
		p.lit(':')
		se = p.num(2, "second")
		if p.err == nil && p.i < len(s) && s[p.i] == '.' {
			p.i++
			st := p.i
			for p.i < len(s) && s[p.i] >= '0' && s[p.i] <= '9' {
				if fracDigits < 7 {
					fracVal = fracVal*10 + uint64(s[p.i]-'0')
					fracDigits++
				}
				p.i++
			}
			if p.i == st {
				p.fail("fraction digits")
			}
		}
	}
	if p.err == nil && p.i != len(s) {
		p.fail("end of input")
	}
	if p.err != nil {
		return Time{}, p.err
	}
	// Scale the (up to 7) fraction digits to 7 digits, then round to fsp.
	for k := fracDigits; k < 7; k++ {
		fracVal *= 10
	}
	unit := uint64(pow10[7-fsp]) // units of 1e-7 s per fsp step
	rounded := (fracVal + unit/2) / unit * unit
	micro = rounded / 10
	t.Year, t.Month, t.Day = uint16(y), uint8(mo), uint8(d)
	t.Hour, t.Minute, t.Second = uint8(h), uint8(mi), uint8(se)
	if micro >= 1000000 {
		micro -= 1000000
		t.Microsecond = uint32(micro)
		if err := t.Validate(); err != nil {
			return Time{}, err
		}
		if t.Month == 0 || t.Day == 0 {
			return Time{}, fmt.Errorf("time: cannot round %q into a zero date", s)
		}
		g := time.Date(int(t.Year), time.Month(t.Month), int(t.Day), int(t.Hour), int(t.Minute), int(t.Second)+1, 0, time.UTC)
		t = TimeFromGo(g, tp, fsp)
		t.Microsecond = uint32(micro)
	} else {
		t.Microsecond = uint32(micro)
	}
	if tp == mysql.TypeDate {
		t.Hour, t.Minute, t.Second, t.Microsecond, t.Fsp = 0, 0, 0, 0, 0
	}
	if err := t.Validate(); err != nil {
		return Time{}, fmt.Errorf("%w (in %q)", err, s)
	}
	return t, nil
}

// TimeFromGo takes the wall-clock fields of g (callers convert TIMESTAMP
// values to UTC first) truncated to microseconds.
func TimeFromGo(g time.Time, tp byte, fsp int) Time {
	t := Time{
		Year: uint16(g.Year()), Month: uint8(g.Month()), Day: uint8(g.Day()),
		Hour: uint8(g.Hour()), Minute: uint8(g.Minute()), Second: uint8(g.Second()),
		Microsecond: uint32(g.Nanosecond() / 1000), Type: tp, Fsp: uint8(fsp),
	}
	if tp == mysql.TypeDate {
		t.Hour, t.Minute, t.Second, t.Microsecond = 0, 0, 0, 0
	}
	return t
}

// GoTime returns the time in loc (TIMESTAMPs are UTC on disk: pass
// time.UTC and convert with In). Zero dates cannot be represented.
func (t Time) GoTime(loc *time.Location) (time.Time, error) {
	if err := t.Validate(); err != nil {
		return time.Time{}, err
	}
	if t.Month == 0 || t.Day == 0 {
		return time.Time{}, fmt.Errorf("time: %s has a zero month or day", t.String())
	}
	return time.Date(int(t.Year), time.Month(t.Month), int(t.Day), int(t.Hour), int(t.Minute),
		int(t.Second), int(t.Microsecond)*1000, loc), nil
}

// CoreTime returns TiDB's in-memory layout as embedded in binary JSON (low 4
// bits cleared): year<<50 | month<<46 | day<<41 | hour<<36 | minute<<30 |
// second<<24 | microsecond<<4.
func (t Time) CoreTime() uint64 {
	return uint64(t.Year)<<50 | uint64(t.Month)<<46 | uint64(t.Day)<<41 | uint64(t.Hour)<<36 |
		uint64(t.Minute)<<30 | uint64(t.Second)<<24 | uint64(t.Microsecond)<<4
}

// TimeFromCoreTime reverses CoreTime.
func TimeFromCoreTime(c uint64, tp byte, fsp int) Time {
	return Time{
		Year: uint16(c >> 50), Month: uint8(c >> 46 & 15), Day: uint8(c >> 41 & 31),
		Hour: uint8(c >> 36 & 31), Minute: uint8(c >> 30 & 63), Second: uint8(c >> 24 & 63),
		Microsecond: uint32(c >> 4 & (1<<20 - 1)), Type: tp, Fsp: uint8(fsp),
	}
}

type parser struct {
	s   string
	i   int
	err error
}

func (p *parser) fail(want string) {
	if p.err == nil {
		got := "end of input"
		if p.i < len(p.s) {
			got = strconv.QuoteRune(rune(p.s[p.i]))
		}
		p.err = fmt.Errorf("time: parsing %q at offset %d: expected %s, got %s", p.s, p.i, want, got)
	}
}

// num reads 1..maxDigits digits (year exactly 4 is not required).
func (p *parser) num(maxDigits int, what string) uint64 {
	if p.err != nil {
		return 0
	}
	st := p.i
	var v uint64
	for p.i < len(p.s) && p.i-st < maxDigits+2 && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		v = v*10 + uint64(p.s[p.i]-'0')
		p.i++
	}
	if p.i == st || p.i-st > maxDigits {
		p.i = st
		p.fail(what + " digits")
	}
	return v
}

func (p *parser) lit(c byte) {
	if p.err != nil {
		return
	}
	if p.i >= len(p.s) || p.s[p.i] != c {
		p.fail(strconv.QuoteRune(rune(c)))
		return
	}
	p.i++
}

// TimeFromGoRounded converts g to a value of type tp at fsp the way TiDB
// casts: TIMESTAMP values are first converted to UTC (their storage zone),
// other types keep g's wall clock; the fraction is rounded half up to fsp
// (with carry). DATE drops the time of day.
func TimeFromGoRounded(g time.Time, tp byte, fsp int) (Time, error) {
	if fsp < 0 || fsp > MaxFsp {
		return Time{}, fmt.Errorf("time: fsp %d out of range 0..%d", fsp, MaxFsp)
	}
	if tp == mysql.TypeTimestamp {
		g = g.UTC()
	}
	unit := time.Duration(pow10[9-fsp])
	ns := time.Duration(g.Nanosecond())
	g = g.Add((ns+unit/2)/unit*unit - ns)
	t := TimeFromGo(g, tp, fsp)
	if err := t.Validate(); err != nil {
		return Time{}, err
	}
	return t, nil
}

// ConvertTZ reinterprets the wall clock of t from zone "from" into zone
// "to" (TIMESTAMP values are stored in UTC: ConvertTZ(time.UTC, sessionLoc)
// gives what a session in sessionLoc sees). Zero dates and dates with zero
// parts are returned unchanged, as TiDB does.
func (t Time) ConvertTZ(from, to *time.Location) (Time, error) {
	if t.Month == 0 || t.Day == 0 {
		return t, nil
	}
	g, err := t.GoTime(from)
	if err != nil {
		return Time{}, err
	}
	out := TimeFromGo(g.In(to), t.Type, int(t.Fsp))
	if err := out.Validate(); err != nil {
		return Time{}, err
	}
	return out, nil
}
