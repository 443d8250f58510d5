package tablefilter

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Parse parses a comma-separated list of rules, the form --tables takes
// (TF1): `shop.*,!shop.audit`. A comma inside quotes, a character class
// or a /regexp/ belongs to the rule. A rule that does not parse is a
// *SyntaxError naming the rule and the byte offset of the fault in
// input (TF6).
func Parse(input string) (*Filter, error) {
	p := &parser{in: input}
	f := &Filter{}
	for {
		r, err := p.rule(len(f.rules) + 1)
		if err != nil {
			return nil, err
		}
		f.rules = append(f.rules, r)
		if p.pos >= len(p.in) {
			return f, nil
		}
		p.pos++ // the comma
	}
}

// MustParse is Parse for rules written in code; it panics on a bad rule.
func MustParse(input string) *Filter {
	f, err := Parse(input)
	if err != nil {
		panic(err)
	}
	return f
}

type parser struct {
	in  string
	pos int
	n   int // rule number being parsed
}

func (p *parser) fail(at int, msg string) error {
	return &SyntaxError{Input: p.in, Rule: p.n, Offset: at, Msg: msg}
}

func (p *parser) peek() byte {
	if p.pos < len(p.in) {
		return p.in[p.pos]
	}
	return 0
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) && (p.in[p.pos] == ' ' || p.in[p.pos] == '\t') {
		p.pos++
	}
}

// rule parses `[!]schema.table` up to the next top-level comma or the
// end of input.
func (p *parser) rule(n int) (rule, error) {
	p.n = n
	p.skipSpace()
	start := p.pos
	if p.pos >= len(p.in) || p.peek() == ',' {
		return rule{}, p.fail(p.pos, "empty rule")
	}
	var r rule
	if p.peek() == '!' {
		r.exclude = true
		p.pos++
		p.skipSpace()
	}
	if p.peek() == '@' {
		return rule{}, p.fail(p.pos, "rule files (@path) are not supported; list the rules")
	}
	var err error
	if r.schema, err = p.part("schema"); err != nil {
		return rule{}, err
	}
	if p.peek() != '.' {
		if p.pos >= len(p.in) || p.peek() == ',' || p.peek() == ' ' {
			return rule{}, p.fail(p.pos, "missing '.' between the schema and the table pattern")
		}
		return rule{}, p.fail(p.pos, "unexpected "+quoteChar(p.in[p.pos:]))
	}
	p.pos++
	if r.table, err = p.part("table"); err != nil {
		return rule{}, err
	}
	p.skipSpace()
	if p.pos < len(p.in) && p.peek() != ',' {
		if p.peek() == '.' {
			return rule{}, p.fail(p.pos, "a rule has one '.' (quote a name that contains one)")
		}
		return rule{}, p.fail(p.pos, "unexpected "+quoteChar(p.in[p.pos:]))
	}
	r.text = strings.TrimSpace(p.in[start:p.pos])
	return r, nil
}

// part parses one pattern: a /regexp/, or a run of plain characters,
// quoted names, escapes and wildcards.
func (p *parser) part(what string) (pattern, error) {
	start := p.pos
	if p.peek() == '/' {
		return p.regexpPart(what)
	}
	var lit strings.Builder // the name as matched, lower case
	var re strings.Builder  // the same as an anchored regexp
	glob := false
	re.WriteString(`(?s)^`)
	addLit := func(s string) {
		s = strings.ToLower(s)
		lit.WriteString(s)
		re.WriteString(regexp.QuoteMeta(s))
	}
loop:
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '.' || c == ',' || c == ' ' || c == '\t':
			break loop
		case c == '*':
			glob = true
			re.WriteString(`.*`)
			p.pos++
		case c == '?':
			glob = true
			re.WriteString(`.`)
			p.pos++
		case c == '[':
			cls, err := p.class()
			if err != nil {
				return pattern{}, err
			}
			glob = true
			re.WriteString(cls)
		case c == '\\':
			if p.pos+1 >= len(p.in) {
				return pattern{}, p.fail(p.pos, "'\\' at the end of the input escapes nothing")
			}
			_, size := utf8.DecodeRuneInString(p.in[p.pos+1:])
			addLit(p.in[p.pos+1 : p.pos+1+size])
			p.pos += 1 + size
		case c == '"' || c == '`':
			name, err := p.quoted(c)
			if err != nil {
				return pattern{}, err
			}
			addLit(name)
		case c == '/':
			return pattern{}, p.fail(p.pos, "a /regexp/ must be the whole "+what+" pattern")
		case isPlain(c):
			addLit(p.in[p.pos : p.pos+1])
			p.pos++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(p.in[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return pattern{}, p.fail(p.pos, "invalid UTF-8")
			}
			addLit(p.in[p.pos : p.pos+size])
			p.pos += size
		default:
			return pattern{}, p.fail(p.pos, "unexpected "+quoteChar(p.in[p.pos:])+" in the "+what+" pattern (quote or escape it)")
		}
	}
	if p.pos == start {
		return pattern{}, p.fail(p.pos, "empty "+what+" pattern")
	}
	if !glob {
		return pattern{kind: patLiteral, lit: lit.String()}, nil
	}
	re.WriteString(`$`)
	compiled, err := regexp.Compile(re.String())
	if err != nil { // every piece was quoted or checked: a bug, reported as such
		return pattern{}, p.fail(start, "internal: wildcard pattern did not compile: "+err.Error())
	}
	return pattern{kind: patGlob, re: compiled}, nil
}

// isPlain reports the ASCII characters of a plain name: letters, digits,
// '_' and '$' (TF1).
func isPlain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// quoted reads a "name" or `name`; the quote doubled stands for itself.
func (p *parser) quoted(q byte) (string, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == q {
			if p.pos+1 < len(p.in) && p.in[p.pos+1] == q {
				b.WriteByte(q)
				p.pos += 2
				continue
			}
			p.pos++
			if b.Len() == 0 {
				return "", p.fail(open, "empty quoted name")
			}
			return b.String(), nil
		}
		b.WriteByte(c)
		p.pos++
	}
	return "", p.fail(open, "unterminated quoted name (no closing "+string(q)+")")
}

// class reads a character class [a-z], [!0-9] and returns it as a regexp
// class over lower-case names.
func (p *parser) class() (string, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	b.WriteByte('[')
	if p.peek() == '!' {
		b.WriteByte('^')
		p.pos++
	}
	members := 0
	for p.pos < len(p.in) {
		if p.in[p.pos] == ']' && members > 0 {
			p.pos++
			b.WriteByte(']')
			return b.String(), nil
		}
		lo, err := p.classChar(open)
		if err != nil {
			return "", err
		}
		members++
		b.WriteString(regexp.QuoteMeta(string(lo)))
		if p.peek() == '-' && p.pos+1 < len(p.in) && p.in[p.pos+1] != ']' {
			dash := p.pos
			p.pos++
			hi, err := p.classChar(open)
			if err != nil {
				return "", err
			}
			if hi < lo {
				return "", p.fail(dash, "character range "+string(lo)+"-"+string(hi)+" is reversed")
			}
			b.WriteByte('-')
			b.WriteString(regexp.QuoteMeta(string(hi)))
		}
	}
	return "", p.fail(open, "unterminated character class (no closing ']')")
}

// classChar reads one (possibly escaped) member of a class, lower case.
func (p *parser) classChar(open int) (rune, error) {
	if p.peek() == '\\' {
		p.pos++
	}
	if p.pos >= len(p.in) {
		return 0, p.fail(open, "unterminated character class (no closing ']')")
	}
	r, size := utf8.DecodeRuneInString(p.in[p.pos:])
	if r == utf8.RuneError && size == 1 {
		return 0, p.fail(p.pos, "invalid UTF-8")
	}
	p.pos += size
	return []rune(strings.ToLower(string(r)))[0], nil
}

// regexpPart reads /regexp/; a '\/' inside is a literal slash.
func (p *parser) regexpPart(what string) (pattern, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '\\' && p.pos+1 < len(p.in) && p.in[p.pos+1] == '/':
			b.WriteByte('/')
			p.pos += 2
			continue
		case c == '\\' && p.pos+1 < len(p.in):
			b.WriteString(p.in[p.pos : p.pos+2])
			p.pos += 2
			continue
		case c == '/':
			p.pos++
			if b.Len() == 0 {
				return pattern{}, p.fail(open, "empty /regexp/ "+what+" pattern")
			}
			re, err := regexp.Compile(`(?i)` + b.String())
			if err != nil {
				return pattern{}, p.fail(open, "bad /regexp/ "+what+" pattern: "+err.Error())
			}
			return pattern{kind: patRegexp, re: re}, nil
		}
		b.WriteByte(c)
		p.pos++
	}
	return pattern{}, p.fail(open, "unterminated /regexp/ (no closing '/')")
}

func quoteChar(s string) string {
	r, _ := utf8.DecodeRuneInString(s)
	return "'" + string(r) + "'"
}
