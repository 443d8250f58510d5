package sqlfront

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream"
)

var stmtCacheSeed = flag.Int64("stmtcache.seed", 0, "seed of TestS23 (0: a fresh one, printed)")

// randomLiteral is a literal of a random kind, escapes and edge values
// included (the cache must refuse what it cannot rebuild).
func randomLiteral(rng *rand.Rand) string {
	switch rng.Intn(12) {
	case 0:
		return fmt.Sprint(rng.Int63())
	case 1:
		return fmt.Sprint(-rng.Int63n(1000))
	case 2:
		return fmt.Sprintf("%d.%02d", rng.Intn(1000), rng.Intn(100))
	case 3:
		return "18446744073709551615" // above MaxInt64
	case 4:
		return "99999999999999999999999" // above MaxUint64: a decimal
	case 5:
		return "NULL"
	case 6:
		return "'it''s'"
	case 7:
		return `'a\nb'`
	case 8:
		return "TRUE"
	case 9:
		return "1e3"
	default:
		return fmt.Sprintf("'s%d'", rng.Intn(1000))
	}
}

// TestS23StatementCacheIsTheParse (S23): a statement served from the
// cache is the parse it replaces. Seeded random DML of a few shapes with
// random literals (escaped strings, NULL, large numbers, decimals,
// keywords): every value node of the served AST equals the fresh parse's
// (datum and type) and the AST restores to the same SQL; repeated shapes
// are served from the cache, texts the scanner cannot vouch for never are.
func TestS23StatementCacheIsTheParse(t *testing.T) {
	seed := *stmtCacheSeed
	if seed == 0 {
		seed = rand.Int63()
	}
	t.Logf("seed %d (rerun with -stmtcache.seed=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	require.NoError(t, err)
	s, err := New(context.Background(), c)
	require.NoError(t, err)
	ss := s.NewSession("")
	fresh := parser.New()
	shapes := []string{
		"UPDATE t SET v = %s, w = %s WHERE id = %s",
		"DELETE FROM t WHERE id = %s",
		"DELETE FROM t WHERE id IN (%s, %s, %s)",
		"INSERT INTO t (id, v, w) VALUES (%s, %s, %s), (%s, %s, %s)",
		"UPDATE `t` SET v = v + %s WHERE id BETWEEN %s AND %s LIMIT %s",
	}
	hits := 0
	for i := 0; i < 2000; i++ {
		shape := shapes[rng.Intn(len(shapes))]
		var args []any
		for j := 0; j < countVerbs(shape); j++ {
			args = append(args, randomLiteral(rng))
		}
		sql := fmt.Sprintf(shape, args...)
		_, _, cacheable := ss.cache.shape(sql)
		if cacheable {
			if key, lits, _ := ss.cache.shape(sql); ss.cache.m[key] != nil && len(lits) == len(ss.cache.m[key].values) {
				hits++
			}
		}
		got, err := ss.parse(sql)
		want, _, werr := fresh.Parse(sql, "", "")
		if werr != nil {
			require.Error(t, err, "seed %d: %s", seed, sql)
			continue
		}
		require.NoError(t, err, "seed %d: %s", seed, sql)
		require.Len(t, got, 1)
		require.Equal(t, restoreSQL(want[0]), restoreSQL(got[0]), "seed %d: %s", seed, sql)
		require.Equal(t, sql, got[0].Text(), "seed %d", seed)
		var gv, wv valueCollector
		got[0].Accept(&gv)
		want[0].Accept(&wv)
		require.Len(t, gv.values, len(wv.values), "seed %d: %s", seed, sql)
		for k := range gv.values {
			if !reflect.DeepEqual(gv.values[k].Datum, wv.values[k].Datum) || !reflect.DeepEqual(gv.values[k].Type, wv.values[k].Type) {
				t.Fatalf("seed %d: %s: value %d is %v (%v), the parser makes %v (%v)", seed, sql, k,
					gv.values[k].Datum.GetValue(), gv.values[k].Type.String(), wv.values[k].Datum.GetValue(), wv.values[k].Type.String())
			}
		}
	}
	require.Greater(t, hits, 100, "seed %d: the cache served too few statements", seed)

	// Texts the scanner refuses are never cached.
	for _, sql := range []string{
		"UPDATE t SET v = 'a\\'b' WHERE id = 1",
		"UPDATE t SET v = 'a''b' WHERE id = 1",
		"UPDATE t SET v = 1 /* c */ WHERE id = 1",
		"UPDATE t SET v = 1 WHERE id = 1 -- c",
		"UPDATE t SET v = TRUE WHERE id = 1",
		"UPDATE t SET v = x'0a' WHERE id = 1",
		"UPDATE t SET v = _utf8mb4'a' WHERE id = 1",
		"UPDATE t SET v = \"a\" WHERE id = 1",
		"UPDATE t SET v = 1e5 WHERE id = 1",
		"UPDATE t SET v = @x WHERE id = 1",
	} {
		_, _, ok := ss.cache.shape(sql)
		require.False(t, ok, sql)
	}
	// Statements whose literals are not all value nodes are parsed every
	// time (the CAST's length is grammar, not a value).
	key, lits, ok := ss.cache.shape("UPDATE t SET v = CAST(1 AS CHAR(5)) WHERE id = 2")
	require.True(t, ok)
	_, err = ss.parse("UPDATE t SET v = CAST(1 AS CHAR(5)) WHERE id = 2")
	require.NoError(t, err)
	require.Nil(t, ss.cache.m[key], "a shape whose literals are not its value nodes was cached")
	require.True(t, ss.cache.bad[key])
	require.Len(t, lits, 3)
	// DDL and INSERT ... SELECT are not cached.
	for _, sql := range []string{"CREATE TABLE x (id INT PRIMARY KEY, v VARCHAR(10) DEFAULT 'a')", "INSERT INTO t SELECT * FROM u WHERE id = 1"} {
		key, _, ok := ss.cache.shape(sql)
		require.True(t, ok, sql)
		_, err := ss.parse(sql)
		require.NoError(t, err)
		require.Nil(t, ss.cache.m[key], sql)
	}
}

// countVerbs counts the %s in a shape.
func countVerbs(s string) int {
	n := 0
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 's' {
			n++
		}
	}
	return n
}

// The cache changes nothing a statement does: the same seeded DML on two
// servers, one with every statement parsed afresh, leaves the same rows.
func TestS23CachedStatementsWriteTheSameRows(t *testing.T) {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	run := func(cache bool) []string {
		rng := rand.New(rand.NewSource(seed))
		s, ss := newTestServer(t)
		mustExec(t, ss, "CREATE DATABASE d; USE d")
		mustExec(t, ss, "CREATE TABLE t (id BIGINT PRIMARY KEY, v DECIMAL(10,2), w VARCHAR(20), KEY kw (w))")
		for i := 0; i < 600; i++ {
			var sql string
			id := rng.Intn(50)
			switch rng.Intn(4) {
			case 0:
				sql = fmt.Sprintf("REPLACE INTO t VALUES (%d, %d.%d, 'w%d')", id, rng.Intn(100), rng.Intn(10), rng.Intn(5))
			case 1:
				sql = fmt.Sprintf("UPDATE t SET v = %d.5, w = NULL WHERE id = %d", rng.Intn(100), id)
			case 2:
				sql = fmt.Sprintf("UPDATE t SET v = v + %d WHERE w = 'w%d'", rng.Intn(9), rng.Intn(5))
			default:
				sql = fmt.Sprintf("DELETE FROM t WHERE id = %d", id)
			}
			if cache {
				mustExec(t, ss, sql)
			} else {
				mustExec(t, s.NewSession("d"), sql) // a new session: an empty cache
			}
		}
		return rowsAt(t, s, "d", "t", now(t, s))
	}
	require.Equal(t, run(false), run(true), "seed %d", seed)
}
