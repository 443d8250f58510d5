package tablefilter

import (
	"fmt"
	"strings"
)

// Filter is an ordered list of rules. A table is mirrored when the last
// rule whose patterns match its schema and name is an inclusion (TF3);
// a table no rule matches, and every table of a system schema, is not
// (TF4, TF5).
type Filter struct {
	rules []rule
}

// rule is one parsed rule: its text as written, whether it excludes, and
// the schema and table patterns.
type rule struct {
	text    string
	exclude bool
	schema  pattern
	table   pattern
}

// systemSchemas are the schemas TiCDC never replicates, whatever the
// rules say (TF5): TiDB's own metadata and the tools' bookkeeping. Lower
// case: names are compared case-insensitively (TF2).
var systemSchemas = map[string]bool{
	"mysql":               true,
	"information_schema":  true,
	"performance_schema":  true,
	"metrics_schema":      true,
	"inspection_schema":   true,
	"sys":                 true,
	"tidb_cdc":            true,
	"lightning_task_info": true,
	"dm_meta":             true,
	"tidb_lightning":      true,
	"workload_schema":     true,
}

// IsSystemSchema reports a schema that is never mirrored (TF5).
func IsSystemSchema(schema string) bool {
	return systemSchemas[strings.ToLower(schema)]
}

// Match reports whether the table schema.table is selected (TF3-TF5).
func (f *Filter) Match(schema, table string) bool {
	if f == nil || IsSystemSchema(schema) {
		return false
	}
	s, t := strings.ToLower(schema), strings.ToLower(table)
	for i := len(f.rules) - 1; i >= 0; i-- {
		r := &f.rules[i]
		if r.schema.match(s) && r.table.match(t) {
			return !r.exclude
		}
	}
	return false
}

// MatchSchema reports whether some table of schema may be selected: a
// rule with an inclusion for it exists. Used to skip listing schemas no
// rule can select.
func (f *Filter) MatchSchema(schema string) bool {
	if f == nil || IsSystemSchema(schema) {
		return false
	}
	s := strings.ToLower(schema)
	for i := range f.rules {
		if !f.rules[i].exclude && f.rules[i].schema.match(s) {
			return true
		}
	}
	return false
}

// Literal returns the tables the filter names literally when every rule
// is an inclusion of one plain schema.table name (no wildcard, no
// exclusion), in rule order; ok is false otherwise. Such a filter is a
// fixed table list: a table it names that does not exist is an error,
// not an empty match (TF7).
func (f *Filter) Literal() (names [][2]string, ok bool) {
	if f == nil || len(f.rules) == 0 {
		return nil, false
	}
	for _, r := range f.rules {
		if r.exclude || r.schema.kind != patLiteral || r.table.kind != patLiteral {
			return nil, false
		}
		names = append(names, [2]string{r.schema.lit, r.table.lit})
	}
	return names, true
}

// Rules returns the rules as written, in order.
func (f *Filter) Rules() []string {
	out := make([]string, len(f.rules))
	for i, r := range f.rules {
		out[i] = r.text
	}
	return out
}

// String joins the rules as --tables takes them.
func (f *Filter) String() string { return strings.Join(f.Rules(), ",") }

// SyntaxError is a rule that does not parse: the whole input, the
// 1-based rule number and the 0-based byte offset of the fault in the
// input (TF6).
type SyntaxError struct {
	Input  string
	Rule   int
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("table filter %q: rule %d, at offset %d: %s", e.Input, e.Rule, e.Offset, e.Msg)
}
