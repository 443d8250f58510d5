package sqlfront

// A session's statement cache (S23): the TiDB parser costs more than the
// rest of a point UPDATE or DELETE (about half of the statement's CPU), and
// a workload repeats a few statement shapes with different literals. The
// cache keeps the parsed AST of a DML statement under its shape (the text
// with every simple literal replaced by its kind) and, when the shape comes
// again, writes the new literals into the AST's value nodes instead of
// parsing. A shape is cached only when the parse proved that its value
// nodes, in AST walk order, are exactly its literals in text order, each
// rebuilt identically from its text; anything else (comments, escapes,
// introducers, keywords that make values) is parsed every time.

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/internal/invariants"
)

const (
	// stmtCacheEntries bounds the shapes a session keeps (the map is
	// dropped when full: a workload has a handful of shapes).
	stmtCacheEntries = 256
	// stmtCacheValues bounds the value nodes of all cached ASTs (a bulk
	// INSERT of thousands of rows is worth caching, many of them are not).
	stmtCacheValues = 200_000
)

// Literal kinds in a shape key.
const (
	litKindInt     = 'i' // digits that fit an int64
	litKindUint    = 'u' // digits above MaxInt64 that fit a uint64
	litKindDecimal = 'd' // digits '.' digits
	litKindString  = 's' // '...' without quotes or backslashes inside
	litKindNull    = 'n' // NULL
)

// shapeLit is one literal found in a statement's text.
type shapeLit struct {
	kind byte
	text string
}

// cachedStmt is a parsed statement and its value nodes in walk order
// (values[i] holds literal i).
type cachedStmt struct {
	stmt   ast.StmtNode
	values []*test_driver.ValueExpr
	// charset and collate are those the parser gave the string literals.
	charset, collate string
}

type stmtCache struct {
	m      map[string]*cachedStmt
	values int
	// bad remembers shapes whose parse did not prove the mapping, so they
	// are not re-checked every time.
	bad map[string]bool
	// lits and key are reused between statements.
	lits []shapeLit
	key  []byte
}

// shape scans sql for literals and returns its shape key and literals;
// ok is false when the text has anything the scanner does not vouch for.
func (c *stmtCache) shape(sql string) (key string, lits []shapeLit, ok bool) {
	b := c.key[:0]
	lits = c.lits[:0]
	defer func() { c.key, c.lits = b[:0], lits[:0] }()
	i := 0
	for i < len(sql) {
		ch := sql[i]
		switch {
		case ch == '\'':
			j := i + 1
			for j < len(sql) && sql[j] != '\'' && sql[j] != '\\' {
				j++
			}
			if j >= len(sql) || sql[j] == '\\' || (j+1 < len(sql) && sql[j+1] == '\'') {
				return "", nil, false // escapes or a doubled quote: parse it
			}
			lits = append(lits, shapeLit{litKindString, sql[i+1 : j]})
			b = append(b, 0, litKindString)
			i = j + 1
		case ch == '`':
			j := strings.IndexByte(sql[i+1:], '`')
			if j < 0 {
				return "", nil, false
			}
			b = append(b, sql[i:i+j+2]...)
			i += j + 2
		case ch == '"' || ch == '#' || ch == '\\' || ch == '@' || ch == '?':
			return "", nil, false
		case ch == '/' && i+1 < len(sql) && sql[i+1] == '*', ch == '-' && i+1 < len(sql) && sql[i+1] == '-':
			return "", nil, false // comments
		case isDigit(ch):
			if i > 0 && (isIdentChar(sql[i-1]) || sql[i-1] == '.') {
				return "", nil, false
			}
			j := i
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			kind := byte(litKindInt)
			if j+1 < len(sql) && sql[j] == '.' && isDigit(sql[j+1]) {
				kind = litKindDecimal
				j++
				for j < len(sql) && isDigit(sql[j]) {
					j++
				}
			}
			if j < len(sql) && (isIdentChar(sql[j]) || sql[j] == '.') {
				return "", nil, false // 1e5, 0x1f, 1abc (an identifier), 1.
			}
			if kind == litKindInt {
				n, err := strconv.ParseUint(sql[i:j], 10, 64)
				if err != nil {
					return "", nil, false
				}
				if n > math.MaxInt64 {
					kind = litKindUint
				}
			}
			lits = append(lits, shapeLit{kind, sql[i:j]})
			b = append(b, 0, kind)
			i = j
		case isIdentChar(ch):
			j := i
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
			if j < len(sql) && sql[j] == '\'' {
				return "", nil, false // X'..', N'..', _utf8mb4'..'
			}
			w := sql[i:j]
			switch {
			case strings.EqualFold(w, "null"):
				lits = append(lits, shapeLit{litKindNull, ""})
				b = append(b, 0, litKindNull)
			case strings.EqualFold(w, "true"), strings.EqualFold(w, "false"):
				return "", nil, false
			default:
				b = append(b, w...)
			}
			i = j
		default:
			b = append(b, ch)
			i++
		}
	}
	return string(b), lits, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentChar(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c >= 0x80
}

// litValue is the value the parser's lexer makes of a literal.
func litValue(l shapeLit) (any, bool) {
	switch l.kind {
	case litKindInt:
		n, err := strconv.ParseInt(l.text, 10, 64)
		return n, err == nil
	case litKindUint:
		n, err := strconv.ParseUint(l.text, 10, 64)
		return n, err == nil
	case litKindDecimal:
		d, err := ast.NewDecimal(l.text)
		return d, err == nil
	case litKindString:
		return l.text, true
	case litKindNull:
		return nil, true
	}
	return nil, false
}

// setValue makes ve exactly what the parser builds for value.
func setValue(ve *test_driver.ValueExpr, value any, charset, collate string) {
	ve.Datum = test_driver.Datum{}
	ve.Type = types.FieldType{}
	ve.SetValue(value)
	test_driver.DefaultTypeForValue(value, &ve.Type, charset, collate)
}

// lookup returns the cached statement of key with lits written into it, or
// nil.
func (c *stmtCache) lookup(key string, lits []shapeLit, sql string) ast.StmtNode {
	cs := c.m[key]
	if cs == nil {
		return nil
	}
	for i, ve := range cs.values {
		v, ok := litValue(lits[i])
		if !ok {
			return nil
		}
		setValue(ve, v, cs.charset, cs.collate)
	}
	cs.stmt.SetText(nil, sql)
	return cs.stmt
}

// valueCollector lists an AST's value nodes in walk order.
type valueCollector struct {
	values []*test_driver.ValueExpr
	other  bool
}

func (v *valueCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *test_driver.ValueExpr:
		v.values = append(v.values, x)
	case *test_driver.ParamMarkerExpr:
		v.other = true
	}
	return n, false
}

func (v *valueCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// cacheable says whether a statement kind may be cached: DML whose
// literals are all row values or conditions.
func cacheable(st ast.StmtNode) bool {
	switch x := st.(type) {
	case *ast.UpdateStmt, *ast.DeleteStmt:
		return true
	case *ast.InsertStmt:
		return x.Select == nil
	}
	return false
}

// add caches st under key when its value nodes are lits, in order, each
// rebuilt the same from its text.
func (c *stmtCache) add(key string, lits []shapeLit, st ast.StmtNode) {
	if c.bad[key] || !cacheable(st) {
		return
	}
	var vc valueCollector
	st.Accept(&vc)
	if !c.proves(vc, lits) {
		if c.bad == nil || len(c.bad) >= stmtCacheEntries {
			c.bad = map[string]bool{}
		}
		c.bad[key] = true
		return
	}
	if len(vc.values) > stmtCacheValues {
		return
	}
	if c.m == nil || len(c.m) >= stmtCacheEntries || c.values+len(vc.values) > stmtCacheValues {
		c.m, c.values = map[string]*cachedStmt{}, 0
	}
	cs := &cachedStmt{stmt: st, values: vc.values}
	for _, ve := range vc.values {
		if ve.Kind() == test_driver.KindString {
			cs.charset, cs.collate = ve.Type.GetCharset(), ve.Type.GetCollate()
			break
		}
	}
	c.m[key] = cs
	c.values += len(vc.values)
}

// proves checks the parse against the scanned literals: as many value
// nodes as literals, node i equal to what literal i rebuilds to.
func (c *stmtCache) proves(vc valueCollector, lits []shapeLit) bool {
	if vc.other || len(vc.values) != len(lits) {
		return false
	}
	charset, collate := "", ""
	for _, ve := range vc.values {
		if ve.Kind() == test_driver.KindString {
			if charset == "" {
				charset, collate = ve.Type.GetCharset(), ve.Type.GetCollate()
			} else if charset != ve.Type.GetCharset() || collate != ve.Type.GetCollate() {
				return false
			}
		}
	}
	var probe test_driver.ValueExpr
	for i, ve := range vc.values {
		v, ok := litValue(lits[i])
		if !ok {
			return false
		}
		setValue(&probe, v, charset, collate)
		if !reflect.DeepEqual(probe.Datum, ve.Datum) || !reflect.DeepEqual(probe.Type, ve.Type) {
			return false
		}
	}
	return true
}

// checkCachedParse, in builds with the invariants tag (make test's race
// pass), parses sql afresh and panics when the cached AST with its new
// literals does not restore to the same SQL: a cache hit must be the
// parse it replaces.
func checkCachedParse(p *parser.Parser, sql string, st ast.StmtNode) {
	if !invariants.Enabled {
		return
	}
	fresh, _, err := p.Parse(sql, "", "")
	if err != nil || len(fresh) != 1 {
		panic(fmt.Sprintf("sqlfront: statement cache served %q, which does not parse as one statement (%v)", sql, err))
	}
	if a, b := restoreSQL(st), restoreSQL(fresh[0]); a != b {
		panic(fmt.Sprintf("sqlfront: statement cache served %q as %q, a fresh parse gives %q", sql, a, b))
	}
}

func restoreSQL(n ast.Node) string {
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err != nil {
		return "restore: " + err.Error()
	}
	return sb.String()
}
