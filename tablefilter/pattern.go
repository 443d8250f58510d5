package tablefilter

import "regexp"

type patKind uint8

const (
	patLiteral patKind = iota // a plain or quoted name: equality
	patGlob                   // wildcards (*, ?, [...]), compiled to an anchored regexp
	patRegexp                 // /regexp/: unanchored search, as the TiDB tools do
)

// pattern matches one side of a rule (schema or table) against a
// lower-cased name (TF2).
type pattern struct {
	kind patKind
	lit  string         // patLiteral, lower case
	re   *regexp.Regexp // patGlob, patRegexp
}

func (p *pattern) match(lower string) bool {
	if p.kind == patLiteral {
		return p.lit == lower
	}
	return p.re.MatchString(lower)
}
