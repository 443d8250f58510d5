package tablefilter

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: any input either parses or is a *SyntaxError whose offset
// lies inside the input; it never panics. A parsed filter matches
// without panicking, never selects a system schema (TF5), and its
// String() parses again to a filter that decides the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"shop.*", "shop.order_*,!shop.audit", "*.*", "`a``b`.\"c\"", `/^x\d+$/.t[!a-c]`, "a.b,", "shop.a\\*", "[", "x./a/"} {
		f.Add(s, "shop", "items")
	}
	f.Fuzz(func(t *testing.T, in, schema, table string) {
		flt, err := Parse(in)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %T %v, want *SyntaxError", in, err, err)
			}
			if se.Offset < 0 || se.Offset > len(in) || se.Rule < 1 {
				t.Fatalf("Parse(%q): offset %d rule %d out of range", in, se.Offset, se.Rule)
			}
			return
		}
		got := flt.Match(schema, table)
		if got && IsSystemSchema(schema) {
			t.Fatalf("Parse(%q) selects system schema %q", in, schema)
		}
		if got != flt.Match(strings.ToUpper(schema), strings.ToUpper(table)) && isASCII(schema+table) {
			t.Fatalf("Parse(%q): case changes the decision for %q.%q", in, schema, table)
		}
		again, err := Parse(flt.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", in, flt.String(), err)
		}
		if again.Match(schema, table) != got {
			t.Fatalf("Parse(%q) and its String %q decide %q.%q differently", in, flt.String(), schema, table)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
