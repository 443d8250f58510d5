package tablefilter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

type probe struct {
	schema, table string
	want          bool
}

// TestTF1_TF3_Match pins the rule syntax (TF1), case-insensitive names
// (TF2) and "the last matching rule decides" (TF3).
func TestTF1_TF3_Match(t *testing.T) {
	cases := []struct {
		rules  string
		probes []probe
	}{
		{"shop.items", []probe{ // rule: TF1 plain names
			{"shop", "items", true}, {"shop", "items2", false}, {"shop2", "items", false}}},
		{"shop.*", []probe{
			{"shop", "items", true}, {"shop", "", true}, {"shopx", "items", false}}},
		{"shop.order_*", []probe{
			{"shop", "order_2024", true}, {"shop", "order_", true}, {"shop", "orders", false}, {"shop", "xorder_1", false}}},
		{"shop.t?", []probe{{"shop", "t1", true}, {"shop", "t", false}, {"shop", "t12", false}}},
		{"shop.t[0-9]", []probe{{"shop", "t7", true}, {"shop", "ta", false}}},
		{"shop.t[!0-9]", []probe{{"shop", "t7", false}, {"shop", "ta", true}}},
		{"shop.t[a-c_]", []probe{{"shop", "tb", true}, {"shop", "t_", true}, {"shop", "td", false}}},
		{`shop."odd.name"`, []probe{{"shop", "odd.name", true}, {"shop", "oddxname", false}}},
		{"`my db`.`a``b`", []probe{{"my db", "a`b", true}}},
		{`shop.a\*b`, []probe{{"shop", "a*b", true}, {"shop", "axb", false}}},
		{`/^shop_\d+$/.items`, []probe{{"shop_12", "items", true}, {"shop_", "items", false}, {"SHOP_3", "items", true}}},
		{`shop./a,b/`, []probe{{"shop", "xa,bx", true}, {"shop", "ab", false}}},   // regexp: unanchored, comma belongs to it
		{"ShOp.ITEMS", []probe{{"shop", "items", true}, {"SHOP", "Items", true}}}, // rule: TF2
		{"shop.Item[A-B]", []probe{{"shop", "itemb", true}, {"SHOP", "ITEMA", true}}},
		{"Ünï.*", []probe{{"ünï", "t", true}, {"ÜNÏ", "t", true}}},
		// rule: TF3 the last matching rule decides
		{"shop.*,!shop.audit", []probe{{"shop", "audit", false}, {"shop", "items", true}}},
		{"!shop.audit,shop.*", []probe{{"shop", "audit", true}}},
		{"*.*,!shop.*,shop.keep", []probe{{"shop", "keep", true}, {"shop", "x", false}, {"other", "x", true}}},
		{"  shop.a , shop.b ", []probe{{"shop", "a", true}, {"shop", "b", true}}},
		{"! shop.a, shop.*", []probe{{"shop", "a", true}}},
		// rule: TF4 a table no rule matches is not selected
		{"!shop.audit", []probe{{"shop", "audit", false}, {"shop", "items", false}}},
		// rule: TF5 system schemas never, whatever the rules say
		{"*.*", []probe{{"shop", "t", true}, {"mysql", "user", false}, {"INFORMATION_SCHEMA", "TABLES", false},
			{"performance_schema", "x", false}, {"METRICS_SCHEMA", "x", false}, {"sys", "x", false}, {"tidb_cdc", "x", false},
			{"lightning_task_info", "x", false}}},
		{"mysql.user", []probe{{"mysql", "user", false}}},
	}
	for _, c := range cases {
		f, err := Parse(c.rules)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.rules, err)
		}
		for _, p := range c.probes {
			if got := f.Match(p.schema, p.table); got != p.want {
				t.Errorf("Parse(%q).Match(%q, %q) = %v, want %v", c.rules, p.schema, p.table, got, p.want)
			}
		}
	}
}

// TestTF6_BadRulesRejectedWithPosition: every bad rule is a
// *SyntaxError naming the rule number and the byte offset of the fault.
func TestTF6_BadRulesRejectedWithPosition(t *testing.T) {
	cases := []struct {
		in     string
		rule   int
		offset int
		msg    string
	}{
		{"", 1, 0, "empty rule"},
		{"   ", 1, 3, "empty rule"},
		{"shop.a,", 2, 7, "empty rule"},
		{"shop.a,,shop.b", 2, 7, "empty rule"},
		{"shop", 1, 4, "missing '.'"},
		{"shop.a,shop", 2, 11, "missing '.'"},
		{".items", 1, 0, "empty schema pattern"},
		{"shop.", 1, 5, "empty table pattern"},
		{"shop.a.b", 1, 6, "one '.'"},
		{"shop.a-b", 1, 6, "unexpected '-'"},
		{"sh%p.a", 1, 2, "unexpected '%'"},
		{"shop.a b", 1, 7, "unexpected 'b'"},
		{`shop."abc`, 1, 5, "unterminated quoted name"},
		{"shop.``", 1, 5, "empty quoted name"},
		{"shop.a[bc", 1, 6, "unterminated character class"},
		{"shop.a[z-a]", 1, 8, "reversed"},
		{"shop./abc", 1, 5, "unterminated /regexp/"},
		{"shop./a(/", 1, 5, "bad /regexp/"},
		{"shop.//", 1, 5, "empty /regexp/"},
		{"shop.a/b/", 1, 6, "whole table pattern"},
		{`shop.a\`, 1, 6, "escapes nothing"},
		{"@rules.txt", 1, 0, "not supported"},
		{"x.y, !!shop.a", 2, 6, "unexpected '!'"},
		{"shop.a\xff", 1, 6, "invalid UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", c.in, err)
			continue
		}
		if se.Rule != c.rule || se.Offset != c.offset || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("Parse(%q): rule %d offset %d %q, want rule %d offset %d containing %q", c.in, se.Rule, se.Offset, se.Msg, c.rule, c.offset, c.msg)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", c.in)) {
			t.Errorf("Parse(%q): error %q does not quote the input", c.in, err)
		}
	}
}

// TestTF7_Literal: a filter of plain inclusions is a fixed list; any
// wildcard or exclusion makes it a pattern.
func TestTF7_Literal(t *testing.T) {
	names, ok := MustParse("shop.Items, `a b`.c").Literal()
	if !ok || len(names) != 2 || names[0] != [2]string{"shop", "items"} || names[1] != [2]string{"a b", "c"} {
		t.Fatalf("Literal = %v %v", names, ok)
	}
	for _, in := range []string{"shop.*", "shop.a,!shop.b", "/x/.y", "shop.t?"} {
		if _, ok := MustParse(in).Literal(); ok {
			t.Errorf("Parse(%q).Literal() ok, want a pattern", in)
		}
	}
	if got := MustParse(" shop.* , !shop.audit").String(); got != "shop.*,!shop.audit" {
		t.Errorf("String = %q", got)
	}
}

func TestMatchSchema(t *testing.T) {
	f := MustParse("shop.*,!other.*,/^x/.t")
	for s, want := range map[string]bool{"shop": true, "other": false, "xyz": true, "mysql": false, "none": false} {
		if got := f.MatchSchema(s); got != want {
			t.Errorf("MatchSchema(%q) = %v, want %v", s, got, want)
		}
	}
}
