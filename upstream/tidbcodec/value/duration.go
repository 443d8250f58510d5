package value

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxDurationNanos is 838:59:59, the largest |TIME| MySQL allows.
const MaxDurationNanos = int64((838*3600 + 59*60 + 59) * time.Second)

// Duration is a TIME value: signed nanoseconds plus the column's fsp.
type Duration struct {
	Nanos int64
	Fsp   int
}

// Validate checks the MySQL range ±838:59:59 and fsp.
func (d Duration) Validate() error {
	if d.Nanos > MaxDurationNanos || d.Nanos < -MaxDurationNanos {
		return fmt.Errorf("duration: %d ns outside ±838:59:59", d.Nanos)
	}
	if d.Fsp < 0 || d.Fsp > MaxFsp {
		return fmt.Errorf("duration: fsp %d out of range 0..%d", d.Fsp, MaxFsp)
	}
	return nil
}

// String is the canonical text form (spec rule V8).
func (d Duration) String() string { return string(d.AppendText(nil)) }

// AppendText appends "[-]HH:MM:SS" (hours at least two digits, may exceed
// 24) plus '.' and Fsp fraction digits when Fsp > 0. Sub-microsecond
// nanoseconds are truncated.
func (d Duration) AppendText(dst []byte) []byte {
	ns := d.Nanos
	var u uint64
	if ns < 0 {
		dst = append(dst, '-')
		u = uint64(-ns)
	} else {
		u = uint64(ns)
	}
	secs := u / uint64(time.Second)
	micro := (u % uint64(time.Second)) / 1000
	dst = appendPad(dst, secs/3600, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, secs/60%60, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, secs%60, 2)
	return appendFrac(dst, micro, d.Fsp)
}

// ParseDuration parses "[-][D ]H:MM:SS[.frac]", "[-]H:MM" or "[-]S" and
// rounds the fraction half up to fsp digits.
func ParseDuration(s string, fsp int) (Duration, error) {
	if fsp < 0 || fsp > MaxFsp {
		return Duration{}, fmt.Errorf("duration: fsp %d out of range 0..%d", fsp, MaxFsp)
	}
	orig := s
	neg := false
	if strings.HasPrefix(s, "-") {
		neg = true
		s = s[1:]
	}
	var days int64
	if sp := strings.IndexByte(s, ' '); sp >= 0 {
		v, err := strconv.ParseInt(s[:sp], 10, 64)
		if err != nil || v < 0 || v > 34 {
			return Duration{}, fmt.Errorf("duration: bad day part %q in %q", s[:sp], orig)
		}
		days = v
		s = s[sp+1:]
	}
	frac := ""
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		frac = s[dot+1:]
		s = s[:dot]
		if frac == "" {
			return Duration{}, fmt.Errorf("duration: empty fraction in %q", orig)
		}
	}
	parts := strings.Split(s, ":")
	var h, m, sec int64
	nums := make([]int64, len(parts))
	for i, p := range parts {
		if p == "" || len(p) > 7 {
			return Duration{}, fmt.Errorf("duration: bad field %q in %q", p, orig)
		}
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return Duration{}, fmt.Errorf("duration: bad field %q in %q", p, orig)
		}
		nums[i] = v
	}
	switch len(nums) {
	case 1:
		sec = nums[0]
	case 2:
		h, m = nums[0], nums[1]
	case 3:
		h, m, sec = nums[0], nums[1], nums[2]
	default:
		return Duration{}, fmt.Errorf("duration: too many ':' fields in %q", orig)
	}
	if m > 59 || sec > 59 && len(nums) > 1 {
		return Duration{}, fmt.Errorf("duration: minute or second out of range in %q", orig)
	}
	var fracVal int64
	n := 0
	for _, c := range frac {
		if c < '0' || c > '9' {
			return Duration{}, fmt.Errorf("duration: bad fraction %q in %q", frac, orig)
		}
		if n < 7 {
			fracVal = fracVal*10 + int64(c-'0')
			n++
		}
	}
	for ; n < 7; n++ {
		fracVal *= 10
	}
	unit := int64(pow10[7-fsp])
	fracVal = (fracVal + unit/2) / unit * unit // 1e-7 s units
	total := ((days*24+h)*3600+m*60+sec)*int64(time.Second) + fracVal*100
	if neg {
		total = -total
	}
	d := Duration{Nanos: total, Fsp: fsp}
	if err := d.Validate(); err != nil {
		return Duration{}, fmt.Errorf("%w (in %q)", err, orig)
	}
	return d, nil
}

// DurationFromGo rounds d half away from zero to fsp digits and checks the
// TIME range.
func DurationFromGo(d time.Duration, fsp int) (Duration, error) {
	if fsp < 0 || fsp > MaxFsp {
		return Duration{}, fmt.Errorf("duration: fsp %d out of range 0..%d", fsp, MaxFsp)
	}
	unit := time.Duration(pow10[9-fsp])
	r := d.Abs()
	r = (r + unit/2) / unit * unit
	if d < 0 {
		r = -r
	}
	out := Duration{Nanos: int64(r), Fsp: fsp}
	return out, out.Validate()
}
