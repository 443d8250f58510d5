package mysqlfront

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/upstream/tidbcodec/value/golden"
)

const captureFile = "golden/tidb-server-capture.jsonl"

// goldenLiteral renders a captured text value as an SQL literal for col.
func goldenLiteral(col string, v *string) string {
	if v == nil {
		return "NULL"
	}
	s := *v
	if col == "c_float" && s == "3.40282e38" {
		// The text protocol prints FLOAT with 6 significant digits; the
		// stored value is FLOAT's maximum.
		s = "3.4028234663852886e38"
	}
	if strings.HasPrefix(s, "0x") && (col == "c_bit" || col == "c_blob") {
		if s == "0x" {
			return "''"
		}
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// MY-T1, MY-T2: the real server's script and rows replayed through this front
// (DDL and INSERT over the wire); SELECT * through go-sql-driver returns,
// column by column, the text the real tidb-server returned (the capture
// prints binary and BIT values as 0x-hex, the wire carries their bytes).
func TestGoldenRowsOverTheWire(t *testing.T) {
	f := startFront(t)
	type job struct {
		ID    int64  `json:"job_id"`
		DB    string `json:"db_name"`
		Query string `json:"query"`
	}
	var jobs []job
	for _, r := range golden.OfKind(t, captureFile, "server_ddl_history") {
		var j job
		r.Decode(t, &j)
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
	conn, err := f.db.Conn(testCtx(t))
	require.NoError(t, err)
	defer conn.Close()
	for _, j := range jobs {
		if j.DB != "" && !strings.HasPrefix(strings.ToUpper(j.Query), "CREATE DATABASE") {
			mustExec(t, conn, "USE "+j.DB)
		}
		mustExec(t, conn, j.Query)
	}
	type serverRow struct {
		Name  string             `json:"name"`
		Table string             `json:"table"`
		SQL   map[string]*string `json:"sql_values_text"`
	}
	rows := golden.OfKind(t, captureFile, "server_row")
	for _, r := range rows {
		var sr serverRow
		r.Decode(t, &sr)
		var cols, lits []string
		for c, v := range sr.SQL {
			cols = append(cols, c)
			lits = append(lits, goldenLiteral(c, v))
		}
		mustExec(t, conn, fmt.Sprintf("INSERT INTO gold.%s (%s) VALUES (%s)", sr.Table, strings.Join(cols, ","), strings.Join(lits, ",")))
	}
	checked := 0
	raw := dialRaw(t, f.srv.Addr())
	for _, r := range rows {
		var sr serverRow
		r.Decode(t, &sr)
		var where string
		switch sr.Table {
		case "t_renamed":
			where = "id = " + *sr.SQL["id"]
		default:
			where = fmt.Sprintf("k = '%s' AND n = %s", *sr.SQL["k"], *sr.SQL["n"])
		}
		q := fmt.Sprintf("SELECT * FROM gold.%s WHERE %s", sr.Table, where)
		names, _ := queryRaw(t, conn, q)
		got := raw.query(q)
		require.Len(t, got, 1, q)
		require.Equal(t, len(sr.SQL), len(names), "%s: columns %v", sr.Name, names)
		for i, n := range names {
			want, ok := sr.SQL[n]
			require.True(t, ok, "%s: column %s not in the capture", sr.Name, n)
			cell := got[0][i]
			if want == nil {
				require.Nil(t, cell, "%s.%s", sr.Name, n)
				continue
			}
			require.NotNil(t, cell, "%s.%s is NULL, want %q", sr.Name, n, *want)
			text := string(cell)
			if n == "c_bit" || n == "c_blob" {
				text = "0x" + hex.EncodeToString(cell)
			}
			require.Equal(t, *want, text, "%s.%s", sr.Name, n)
			checked++
		}
	}
	require.Greater(t, checked, 60)

	// Column types announce what TiDB announces for these columns.
	res, err := conn.QueryContext(testCtx(t), "SELECT id, c_varchar, c_decimal, c_datetime, c_json, c_blob, c_bigint_u FROM gold.t_renamed LIMIT 1")
	require.NoError(t, err)
	cts, err := res.ColumnTypes()
	res.Close()
	require.NoError(t, err)
	var got []string
	for _, ct := range cts {
		got = append(got, ct.DatabaseTypeName())
	}
	require.Equal(t, []string{"BIGINT", "VARCHAR", "DECIMAL", "DATETIME", "JSON", "BLOB", "UNSIGNED BIGINT"}, got)
	if p, s, ok := cts[2].DecimalSize(); ok {
		require.Equal(t, [2]int64{20, 6}, [2]int64{p, s})
	}
}
