package mysqlfront

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value"
)

// vkind is the kind of an evaluated SQL value.
type vkind uint8

const (
	vNull vkind = iota
	vInt
	vUint
	vFloat
	vDec
	vStr
	vBytes
)

// val is one evaluated value. Decimals are exact (big.Rat with the scale
// they print with). tp, when set, is the MySQL type a computed column of
// this value announces (e.g. DATETIME for TIDB_PARSE_TSO).
type val struct {
	k     vkind
	i     int64
	u     uint64
	f     float64
	r     *big.Rat
	scale int
	s     string
	// ci: a string from a case-insensitive collation column (MY-R4).
	ci bool
	tp byte
}

var null = val{}

func intVal(i int64) val   { return val{k: vInt, i: i} }
func uintVal(u uint64) val { return val{k: vUint, u: u} }
func strVal(s string) val  { return val{k: vStr, s: s} }

func boolVal(b bool) val {
	if b {
		return intVal(1)
	}
	return intVal(0)
}

func decVal(r *big.Rat, scale int) val { return val{k: vDec, r: r, scale: scale} }

func parseDec(s string) (val, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return null, fmt.Errorf("invalid decimal %q", s)
	}
	scale := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		scale = len(s) - i - 1
	}
	return decVal(r, scale), nil
}

func (v val) isNumeric() bool { return v.k >= vInt && v.k <= vDec }

// fromDatum converts a stored column value. Temporal, JSON, vector and
// other kinds become their canonical text.
func fromDatum(d value.Datum, ft *types.FieldType) (val, error) {
	switch d.Kind() {
	case value.KindNull:
		return null, nil
	case value.KindInt64:
		return intVal(d.GetInt64()), nil
	case value.KindYear:
		return intVal(d.GetInt64()), nil
	case value.KindUint64, value.KindBit:
		return uintVal(d.GetUint64()), nil
	case value.KindFloat32, value.KindFloat64:
		return val{k: vFloat, f: d.GetFloat64()}, nil
	case value.KindDecimal:
		return parseDec(d.String())
	case value.KindBytes:
		return val{k: vBytes, s: string(d.GetBytes())}, nil
	case value.KindString, value.KindEnum, value.KindSet:
		ci := ft != nil && strings.HasSuffix(ft.GetCollate(), "_ci")
		return val{k: vStr, s: string(d.GetBytes()), ci: ci}, nil
	}
	b, err := d.AppendText(nil)
	if err != nil {
		return null, err
	}
	return strVal(string(b)), nil
}

// text renders a computed value as the text protocol does; nil is NULL.
func (v val) text() []byte {
	switch v.k {
	case vNull:
		return nil
	case vInt:
		return strconv.AppendInt([]byte{}, v.i, 10)
	case vUint:
		return strconv.AppendUint([]byte{}, v.u, 10)
	case vFloat:
		return value.AppendFloatText([]byte{}, v.f, 64)
	case vDec:
		return []byte(v.r.FloatString(v.scale))
	}
	return append([]byte{}, v.s...)
}

func (v val) String() string {
	if v.k == vNull {
		return "NULL"
	}
	return string(v.text())
}

// toFloat converts like MySQL's numeric context: strings by their longest
// numeric prefix (0 when there is none).
func (v val) toFloat() float64 {
	switch v.k {
	case vInt:
		return float64(v.i)
	case vUint:
		return float64(v.u)
	case vFloat:
		return v.f
	case vDec:
		f, _ := v.r.Float64()
		return f
	case vStr, vBytes:
		return prefixFloat(v.s)
	}
	return 0
}

func prefixFloat(s string) float64 {
	s = strings.TrimSpace(s)
	for end := len(s); end > 0; end-- {
		if f, err := strconv.ParseFloat(s[:end], 64); err == nil {
			return f
		}
	}
	return 0
}

func (v val) toRat() *big.Rat {
	switch v.k {
	case vInt:
		return new(big.Rat).SetInt64(v.i)
	case vUint:
		return new(big.Rat).SetUint64(v.u)
	case vDec:
		return v.r
	}
	r := new(big.Rat)
	if f := v.toFloat(); !math.IsInf(f, 0) && !math.IsNaN(f) {
		r.SetFloat64(f)
	}
	return r
}

// toInt converts for LIMIT, TSO arguments and integer contexts.
func (v val) toInt() (int64, error) {
	switch v.k {
	case vInt:
		return v.i, nil
	case vUint:
		if v.u > math.MaxInt64 {
			return 0, fmt.Errorf("value %d out of range", v.u)
		}
		return int64(v.u), nil
	case vNull:
		return 0, fmt.Errorf("NULL is not an integer")
	}
	s := v.String()
	if i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		return i, nil
	}
	f := v.toFloat()
	if f != math.Trunc(f) || math.Abs(f) > math.MaxInt64 {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return int64(f), nil
}

// compareVals orders two non-NULL values (MY-R4): numbers numerically
// (exactly for integers and decimals), a number against a string as
// doubles, strings byte-wise, or case-insensitively when either side comes
// from a _ci column.
func compareVals(a, b val) int {
	switch {
	case a.isNumeric() && b.isNumeric():
		if a.k == vFloat || b.k == vFloat {
			return cmp.Compare(a.toFloat(), b.toFloat())
		}
		if a.k == vDec || b.k == vDec {
			return a.toRat().Cmp(b.toRat())
		}
		return compareInts(a, b)
	case a.isNumeric() || b.isNumeric():
		return cmp.Compare(a.toFloat(), b.toFloat())
	}
	if a.ci || b.ci {
		return strings.Compare(strings.ToLower(a.s), strings.ToLower(b.s))
	}
	return strings.Compare(a.s, b.s)
}

func compareInts(a, b val) int {
	switch {
	case a.k == vInt && b.k == vInt:
		return cmp.Compare(a.i, b.i)
	case a.k == vUint && b.k == vUint:
		return cmp.Compare(a.u, b.u)
	case a.k == vInt: // b uint
		if a.i < 0 {
			return -1
		}
		return cmp.Compare(uint64(a.i), b.u)
	}
	if b.i < 0 { // a uint, b int
		return 1
	}
	return cmp.Compare(a.u, uint64(b.i))
}

// truth is SQL truthiness: (true|false, isNull).
func (v val) truth() (bool, bool) {
	switch v.k {
	case vNull:
		return false, true
	case vInt:
		return v.i != 0, false
	case vUint:
		return v.u != 0, false
	case vDec:
		return v.r.Sign() != 0, false
	}
	return v.toFloat() != 0, false
}

// ---- evaluation ----

// relCol is one column of the relation a SELECT reads.
type relCol struct {
	name, schema, table, orgTable string
	// qual is the name the column is qualified with in the query (the
	// table alias, else the table name), lower-case.
	qual string
	ft   *types.FieldType
}

// env is what an expression sees: the connection (functions, variables),
// the relation's columns and the current row.
type env struct {
	c    *conn
	cols []relCol
	row  []value.Datum
	aggs map[*ast.AggregateFuncExpr]val
}

func (e *env) lookup(cn *ast.ColumnName) (int, error) {
	name, qual := cn.Name.L, cn.Table.L
	found := -1
	for i, c := range e.cols {
		if strings.ToLower(c.name) != name || (qual != "" && c.qual != qual) {
			continue
		}
		if found >= 0 {
			return 0, newError(1052, "23000", "Column '%s' in field list is ambiguous", cn.Name.O)
		}
		found = i
	}
	if found < 0 {
		return 0, newError(ErBadField, "42S22", "Unknown column '%s' in 'field list'", cn.OrigColName())
	}
	return found, nil
}

func (e *env) eval(x ast.ExprNode) (val, error) {
	switch n := x.(type) {
	case *test_driver.ValueExpr:
		return literalVal(n)
	case *ast.ParenthesesExpr:
		return e.eval(n.Expr)
	case *ast.ColumnNameExpr:
		i, err := e.lookup(n.Name)
		if err != nil {
			return null, err
		}
		if e.row == nil {
			return null, nil
		}
		return fromDatum(e.row[i], e.cols[i].ft)
	case *ast.BinaryOperationExpr:
		return e.binary(n)
	case *ast.UnaryOperationExpr:
		v, err := e.eval(n.V)
		if err != nil {
			return null, err
		}
		return unary(n.Op, v)
	case *ast.IsNullExpr:
		v, err := e.eval(n.Expr)
		if err != nil {
			return null, err
		}
		return boolVal((v.k == vNull) != n.Not), nil
	case *ast.IsTruthExpr:
		v, err := e.eval(n.Expr)
		if err != nil {
			return null, err
		}
		t, isNull := v.truth()
		res := !isNull && t == (n.True != 0)
		return boolVal(res != n.Not), nil
	case *ast.PatternInExpr:
		return e.in(n)
	case *ast.BetweenExpr:
		v, err := e.eval(n.Expr)
		if err != nil {
			return null, err
		}
		lo, err := e.eval(n.Left)
		if err != nil {
			return null, err
		}
		hi, err := e.eval(n.Right)
		if err != nil {
			return null, err
		}
		if v.k == vNull || lo.k == vNull || hi.k == vNull {
			return null, nil
		}
		in := compareVals(v, lo) >= 0 && compareVals(v, hi) <= 0
		return boolVal(in != n.Not), nil
	case *ast.PatternLikeOrIlikeExpr:
		v, err := e.eval(n.Expr)
		if err != nil {
			return null, err
		}
		p, err := e.eval(n.Pattern)
		if err != nil {
			return null, err
		}
		if v.k == vNull || p.k == vNull {
			return null, nil
		}
		s, pat := v.String(), p.String()
		if !n.IsLike || v.ci {
			s, pat = strings.ToLower(s), strings.ToLower(pat)
		}
		esc := n.Escape
		if esc == 0 {
			esc = '\\'
		}
		return boolVal(likeMatch(s, pat, esc) != n.Not), nil
	case *ast.VariableExpr:
		return e.c.variable(n)
	case *ast.FuncCallExpr:
		return e.call(n)
	case *ast.AggregateFuncExpr:
		if v, ok := e.aggs[n]; ok {
			return v, nil
		}
		return null, errUnsupported("aggregate %s outside the select list", n.F)
	}
	return null, errUnsupported("expression %T", x)
}

func literalVal(n *test_driver.ValueExpr) (val, error) {
	switch v := n.Datum.GetValue().(type) {
	case nil:
		return null, nil
	case int64:
		return intVal(v), nil
	case uint64:
		return uintVal(v), nil
	case float64:
		return val{k: vFloat, f: v}, nil
	case float32:
		return val{k: vFloat, f: float64(v)}, nil
	case string:
		if n.Type.GetCharset() == "binary" {
			return val{k: vBytes, s: v}, nil
		}
		return strVal(v), nil
	case []byte:
		return val{k: vBytes, s: string(v)}, nil
	case *test_driver.MyDecimal:
		return parseDec(v.String())
	case test_driver.BinaryLiteral:
		return val{k: vBytes, s: string(v)}, nil
	}
	return null, errUnsupported("literal of type %T", n.Datum.GetValue())
}

func unary(op opcode.Op, v val) (val, error) {
	if v.k == vNull {
		return null, nil
	}
	switch op {
	case opcode.Plus:
		return v, nil
	case opcode.Minus:
		switch v.k {
		case vInt:
			if v.i == math.MinInt64 {
				return decVal(new(big.Rat).Neg(v.toRat()), 0), nil
			}
			return intVal(-v.i), nil
		case vUint:
			if v.u <= math.MaxInt64 {
				return intVal(-int64(v.u)), nil
			}
			return decVal(new(big.Rat).Neg(v.toRat()), 0), nil
		case vDec:
			return decVal(new(big.Rat).Neg(v.r), v.scale), nil
		}
		return val{k: vFloat, f: -v.toFloat()}, nil
	case opcode.Not, opcode.Not2:
		t, _ := v.truth()
		return boolVal(!t), nil
	}
	return null, errUnsupported("unary operator %s", op)
}

func (e *env) binary(n *ast.BinaryOperationExpr) (val, error) {
	l, err := e.eval(n.L)
	if err != nil {
		return null, err
	}
	switch n.Op {
	case opcode.LogicAnd:
		lt, lnull := l.truth()
		if !lnull && !lt {
			return intVal(0), nil
		}
		r, err := e.eval(n.R)
		if err != nil {
			return null, err
		}
		rt, rnull := r.truth()
		if !rnull && !rt {
			return intVal(0), nil
		}
		if lnull || rnull {
			return null, nil
		}
		return intVal(1), nil
	case opcode.LogicOr:
		lt, lnull := l.truth()
		if !lnull && lt {
			return intVal(1), nil
		}
		r, err := e.eval(n.R)
		if err != nil {
			return null, err
		}
		rt, rnull := r.truth()
		if !rnull && rt {
			return intVal(1), nil
		}
		if lnull || rnull {
			return null, nil
		}
		return intVal(0), nil
	}
	r, err := e.eval(n.R)
	if err != nil {
		return null, err
	}
	switch n.Op {
	case opcode.LogicXor:
		lt, lnull := l.truth()
		rt, rnull := r.truth()
		if lnull || rnull {
			return null, nil
		}
		return boolVal(lt != rt), nil
	case opcode.NullEQ:
		if l.k == vNull || r.k == vNull {
			return boolVal(l.k == r.k), nil
		}
		return boolVal(compareVals(l, r) == 0), nil
	case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
		if l.k == vNull || r.k == vNull {
			return null, nil
		}
		c := compareVals(l, r)
		switch n.Op {
		case opcode.EQ:
			return boolVal(c == 0), nil
		case opcode.NE:
			return boolVal(c != 0), nil
		case opcode.LT:
			return boolVal(c < 0), nil
		case opcode.LE:
			return boolVal(c <= 0), nil
		case opcode.GT:
			return boolVal(c > 0), nil
		}
		return boolVal(c >= 0), nil
	}
	return arith(n.Op, l, r)
}

// arith evaluates + - * / % DIV (MY-R4): integers stay integers (overflow
// goes exact through decimals), decimals stay exact, anything with a float
// or a string is a double; / of exact numbers is a decimal with 4 more
// digits; a zero divisor gives NULL.
func arith(op opcode.Op, l, r val) (val, error) {
	if l.k == vNull || r.k == vNull {
		return null, nil
	}
	exact := l.isNumeric() && r.isNumeric() && l.k != vFloat && r.k != vFloat
	ints := exact && l.k != vDec && r.k != vDec
	switch op {
	case opcode.Plus, opcode.Minus, opcode.Mul:
		if !exact {
			a, b := l.toFloat(), r.toFloat()
			switch op {
			case opcode.Plus:
				return val{k: vFloat, f: a + b}, nil
			case opcode.Minus:
				return val{k: vFloat, f: a - b}, nil
			}
			return val{k: vFloat, f: a * b}, nil
		}
		a, b := l.toRat(), r.toRat()
		res := new(big.Rat)
		scale := max(l.scale, r.scale)
		switch op {
		case opcode.Plus:
			res.Add(a, b)
		case opcode.Minus:
			res.Sub(a, b)
		default:
			res.Mul(a, b)
			scale = l.scale + r.scale
		}
		if ints && res.IsInt() {
			if n := res.Num(); n.IsInt64() {
				if l.k == vUint || r.k == vUint {
					if n.Sign() >= 0 {
						return uintVal(n.Uint64()), nil
					}
				}
				return intVal(n.Int64()), nil
			} else if n.IsUint64() {
				return uintVal(n.Uint64()), nil
			}
		}
		return decVal(res, scale), nil
	case opcode.Div:
		if !exact {
			b := r.toFloat()
			if b == 0 {
				return null, nil
			}
			return val{k: vFloat, f: l.toFloat() / b}, nil
		}
		b := r.toRat()
		if b.Sign() == 0 {
			return null, nil
		}
		return decVal(new(big.Rat).Quo(l.toRat(), b), l.scale+4), nil
	case opcode.Mod:
		if ints {
			if l.k == vInt && r.k == vInt {
				if r.i == 0 {
					return null, nil
				}
				if r.i == -1 {
					return intVal(0), nil
				}
				return intVal(l.i % r.i), nil
			}
		}
		if exact {
			a, b := l.toRat(), r.toRat()
			if b.Sign() == 0 {
				return null, nil
			}
			q := new(big.Rat).Quo(a, b)
			t := new(big.Int).Quo(q.Num(), q.Denom()) // truncated toward zero
			res := new(big.Rat).Sub(a, new(big.Rat).Mul(new(big.Rat).SetInt(t), b))
			if ints {
				return val{k: vInt, i: res.Num().Int64()}, nil
			}
			return decVal(res, max(l.scale, r.scale)), nil
		}
		b := r.toFloat()
		if b == 0 {
			return null, nil
		}
		return val{k: vFloat, f: math.Mod(l.toFloat(), b)}, nil
	case opcode.IntDiv:
		if exact {
			b := r.toRat()
			if b.Sign() == 0 {
				return null, nil
			}
			q := new(big.Rat).Quo(l.toRat(), b)
			t := new(big.Int).Quo(q.Num(), q.Denom())
			if !t.IsInt64() {
				return null, newError(1690, "22003", "BIGINT value is out of range in DIV")
			}
			return intVal(t.Int64()), nil
		}
		b := r.toFloat()
		if b == 0 {
			return null, nil
		}
		return intVal(int64(l.toFloat() / b)), nil
	}
	return null, errUnsupported("operator %s", op)
}

func (e *env) in(n *ast.PatternInExpr) (val, error) {
	if n.Sel != nil {
		return null, errUnsupported("IN (subquery)")
	}
	v, err := e.eval(n.Expr)
	if err != nil {
		return null, err
	}
	if v.k == vNull {
		return null, nil
	}
	sawNull := false
	for _, x := range n.List {
		w, err := e.eval(x)
		if err != nil {
			return null, err
		}
		if w.k == vNull {
			sawNull = true
			continue
		}
		if compareVals(v, w) == 0 {
			return boolVal(!n.Not), nil
		}
	}
	if sawNull {
		return null, nil
	}
	return boolVal(n.Not), nil
}

// likeMatch matches s against a LIKE pattern (% any run, _ one character,
// esc quotes the next pattern character).
func likeMatch(s, p string, esc byte) bool {
	for len(p) > 0 {
		switch {
		case p[0] == esc && len(p) > 1:
			if len(s) == 0 || s[0] != p[1] {
				return false
			}
			s, p = s[1:], p[2:]
		case p[0] == '%':
			p = p[1:]
			if len(p) == 0 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if likeMatch(s[i:], p, esc) {
					return true
				}
			}
			return false
		case p[0] == '_':
			if len(s) == 0 {
				return false
			}
			_, size := utf8.DecodeRuneInString(s)
			s, p = s[size:], p[1:]
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
			s, p = s[1:], p[1:]
		}
	}
	return len(s) == 0
}

func (e *env) args(n *ast.FuncCallExpr) ([]val, error) {
	out := make([]val, len(n.Args))
	for i, a := range n.Args {
		v, err := e.eval(a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// call evaluates the scalar functions the front knows (MY-R4).
func (e *env) call(n *ast.FuncCallExpr) (val, error) {
	name := n.FnName.L
	args, err := e.args(n)
	if err != nil {
		return null, err
	}
	want := func(k int) error {
		if len(args) != k {
			return newError(1582, "42000", "Incorrect parameter count in the call to native function '%s'", n.FnName.O)
		}
		return nil
	}
	switch name {
	case "version":
		return strVal(ServerVersion), want(0)
	case "tidb_version":
		return strVal("Release Version: v8.5.0-sfemu\nEdition: Community\nStore: sfemu embedded upstream"), want(0)
	case "database", "schema":
		if e.c.db == "" {
			return null, want(0)
		}
		return strVal(e.c.db), want(0)
	case "user", "session_user", "system_user":
		return strVal("root@" + e.c.host), want(0)
	case "current_user":
		return strVal("root@%"), want(0)
	case "connection_id":
		return uintVal(uint64(e.c.id)), want(0)
	case "last_insert_id":
		return uintVal(e.c.lastInsertID), want(0)
	case "tidb_current_tso":
		ts, err := e.c.srv.sql.Cluster().CurrentTs(e.c.ctx)
		if err != nil {
			return null, err
		}
		return uintVal(ts), want(0)
	case "tidb_parse_tso":
		if err := want(1); err != nil {
			return null, err
		}
		if args[0].k == vNull {
			return null, nil
		}
		ts, err := args[0].toInt()
		if err != nil || ts <= 0 {
			return null, nil
		}
		return datetimeVal(ts>>18, 6), nil
	case "now", "current_timestamp", "sysdate", "localtime", "localtimestamp":
		return datetimeVal(e.c.srv.sql.Cluster().NowMs(), 0), nil
	case "concat":
		var b strings.Builder
		bin := false
		for _, a := range args {
			if a.k == vNull {
				return null, nil
			}
			bin = bin || a.k == vBytes
			b.Write(a.text())
		}
		if bin {
			return val{k: vBytes, s: b.String()}, nil
		}
		return strVal(b.String()), nil
	case "lower", "lcase", "upper", "ucase":
		if err := want(1); err != nil {
			return null, err
		}
		if args[0].k == vNull {
			return null, nil
		}
		if name == "lower" || name == "lcase" {
			return strVal(strings.ToLower(args[0].String())), nil
		}
		return strVal(strings.ToUpper(args[0].String())), nil
	case "length", "octet_length":
		if err := want(1); err != nil {
			return null, err
		}
		if args[0].k == vNull {
			return null, nil
		}
		return intVal(int64(len(args[0].text()))), nil
	case "char_length", "character_length":
		if err := want(1); err != nil {
			return null, err
		}
		if args[0].k == vNull {
			return null, nil
		}
		return intVal(int64(utf8.RuneCount(args[0].text()))), nil
	case "ifnull":
		if err := want(2); err != nil {
			return null, err
		}
		if args[0].k != vNull {
			return args[0], nil
		}
		return args[1], nil
	case "coalesce":
		for _, a := range args {
			if a.k != vNull {
				return a, nil
			}
		}
		return null, nil
	case "if":
		if err := want(3); err != nil {
			return null, err
		}
		if t, isNull := args[0].truth(); t && !isNull {
			return args[1], nil
		}
		return args[2], nil
	case "abs":
		if err := want(1); err != nil {
			return null, err
		}
		a := args[0]
		if a.k == vNull || compareVals(a, intVal(0)) >= 0 {
			return a, nil
		}
		return unary(opcode.Minus, a)
	}
	return null, newError(1305, "42000", "FUNCTION %s does not exist (sfemu mysqlfront supports a small set of functions)", n.FnName.O)
}

// datetimeVal renders Unix milliseconds as a DATETIME of fsp digits (UTC).
func datetimeVal(ms int64, fsp int) val {
	t := value.TimeFromGo(unixMilliUTC(ms), mysql.TypeDatetime, fsp)
	return val{k: vStr, s: string(t.AppendText(nil)), tp: mysql.TypeDatetime, scale: fsp}
}
