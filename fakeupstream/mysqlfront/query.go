package mysqlfront

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// resultSet is a text-protocol result: column definitions and rows (a nil
// cell is NULL).
type resultSet struct {
	cols []column
	rows [][][]byte
}

// outcome is what one statement answers: a result set, or an OK packet.
type outcome struct {
	rs       *resultSet
	affected uint64
	lastID   uint64
	info     string
}

// query runs a COM_QUERY: every statement of it in order, each answered
// with its own result (MORE_RESULTS_EXISTS on all but the last); the
// first failing statement ends the batch with an ERR packet. (MY-Q1)
func (c *conn) query(sql string) {
	stmts, _, err := c.parser.Parse(sql, "utf8mb4", "utf8mb4_bin")
	if err != nil {
		c.writeErr(newError(ErParse, "42000", "You have an error in your SQL syntax: %v", err))
		return
	}
	if len(stmts) == 0 {
		c.writeErr(newError(ErEmptyQuery, "42000", "Query was empty"))
		return
	}
	for i, st := range stmts {
		out, err := c.exec(st)
		if err != nil {
			c.writeErr(toMySQLError(err))
			return
		}
		var more uint16
		if i < len(stmts)-1 {
			more = statusMoreResults
		}
		if err := c.writeOutcome(out, more); err != nil {
			return
		}
	}
}

func (c *conn) writeOutcome(out outcome, more uint16) error {
	if out.rs == nil {
		return c.pio.writeMessage(okPacket(out.affected, out.lastID, c.status()|more, out.info))
	}
	if err := c.pio.writeMessage(appendLenEncInt(nil, uint64(len(out.rs.cols)))); err != nil {
		return err
	}
	for i := range out.rs.cols {
		if err := c.pio.writeMessage(out.rs.cols[i].definition()); err != nil {
			return err
		}
	}
	if err := c.pio.writeMessage(eofPacket(c.status())); err != nil {
		return err
	}
	for _, r := range out.rs.rows {
		if err := c.pio.writeMessage(textRow(r)); err != nil {
			return err
		}
	}
	return c.pio.writeMessage(eofPacket(c.status() | more))
}

// sqlExec runs statement text through the session, serialised with the
// other connections' statements.
func (c *conn) sqlExec(sql string) (sqlfront.Result, error) {
	c.srv.execMu.Lock()
	defer c.srv.execMu.Unlock()
	return c.sess.Exec(c.ctx, sql)
}

func (c *conn) exec(st ast.StmtNode) (outcome, error) {
	switch x := st.(type) {
	case *ast.SelectStmt:
		rs, err := c.selectStmt(x)
		return outcome{rs: rs}, err
	case *ast.ShowStmt:
		rs, err := c.show(x)
		return outcome{rs: rs}, err
	case *ast.ExplainStmt:
		if sh, ok := x.Stmt.(*ast.ShowStmt); ok && sh.Tp == ast.ShowColumns {
			rs, err := c.show(sh)
			return outcome{rs: rs}, err
		}
		return outcome{}, errUnsupported("EXPLAIN")
	case *ast.SetStmt:
		return outcome{}, c.set(x)
	case *ast.UseStmt:
		return outcome{}, c.useDB(x.DBName)
	case *ast.BeginStmt:
		if x.AsOf != nil || x.ReadOnly {
			return outcome{}, errUnsupported("START TRANSACTION READ ONLY / AS OF (use SELECT ... AS OF TIMESTAMP)")
		}
		if c.sess.InTxn() {
			// MySQL commits the open transaction implicitly.
			if _, err := c.sqlExec("COMMIT"); err != nil {
				return outcome{}, err
			}
		}
		c.implicitTxn = false
		_, err := c.sqlExec("BEGIN")
		return outcome{}, err
	case *ast.CommitStmt, *ast.RollbackStmt:
		c.implicitTxn = false
		_, err := c.sqlExec(st.Text())
		return outcome{}, err
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt:
		return c.dml(st)
	case *ast.SetOprStmt:
		return outcome{}, errUnsupported("UNION / EXCEPT / INTERSECT")
	case *ast.DoStmt:
		return outcome{}, nil
	}
	if _, ddl := st.(ast.DDLNode); ddl && c.sess.InTxn() && c.implicitTxn {
		// autocommit=0: DDL commits the implicit transaction first, as
		// in MySQL.
		if _, err := c.sqlExec("COMMIT"); err != nil {
			return outcome{}, err
		}
		c.implicitTxn = false
	}
	res, err := c.sqlExec(st.Text())
	if err != nil {
		return outcome{}, err
	}
	return outcome{affected: uint64(res.RowsAffected)}, nil
}

// ---- variables ----

// sysVarDefaults are the session variables the front answers (MY-V1).
var sysVarDefaults = map[string]string{
	"max_allowed_packet":       "67108864",
	"version":                  ServerVersion,
	"version_comment":          VersionComment,
	"version_compile_os":       "Linux",
	"version_compile_machine":  "x86_64",
	"license":                  "Apache License 2.0",
	"tx_isolation":             "REPEATABLE-READ",
	"transaction_isolation":    "REPEATABLE-READ",
	"tx_read_only":             "0",
	"transaction_read_only":    "0",
	"time_zone":                "+00:00",
	"system_time_zone":         "UTC",
	"character_set_client":     "utf8mb4",
	"character_set_connection": "utf8mb4",
	"character_set_results":    "utf8mb4",
	"character_set_server":     "utf8mb4",
	"character_set_database":   "utf8mb4",
	"character_set_system":     "utf8",
	"collation_connection":     "utf8mb4_bin",
	"collation_server":         "utf8mb4_bin",
	"collation_database":       "utf8mb4_bin",
	"sql_mode":                 "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
	"lower_case_table_names":   "2",
	"wait_timeout":             "28800",
	"interactive_timeout":      "28800",
	"net_write_timeout":        "60",
	"net_read_timeout":         "30",
	"net_buffer_length":        "16384",
	"max_execution_time":       "0",
	"sql_select_limit":         "18446744073709551615",
	"auto_increment_increment": "1",
	"auto_increment_offset":    "1",
	"init_connect":             "",
	"performance_schema":       "0",
	"query_cache_size":         "0",
	"query_cache_type":         "OFF",
	"have_ssl":                 "DISABLED",
	"have_openssl":             "DISABLED",
	"sql_auto_is_null":         "0",
	"sql_safe_updates":         "0",
	"tidb_snapshot":            "",
	"tidb_txn_mode":            "optimistic",
	"default_storage_engine":   "InnoDB",
	"port":                     "4000",
	"hostname":                 "sfemu",
}

func (c *conn) sysVar(name string) (val, error) {
	name = strings.ToLower(name)
	switch name {
	case "autocommit":
		return boolVal(c.autocommit), nil
	case "tidb_current_ts":
		ts, err := c.srv.sql.Cluster().CurrentTs(c.ctx)
		return uintVal(ts), err
	case "last_insert_id", "identity":
		return uintVal(c.lastInsertID), nil
	}
	s, ok := c.vars[name]
	if !ok {
		if s, ok = sysVarDefaults[name]; !ok {
			return null, newError(ErUnknownSystemVar, "HY000", "Unknown system variable '%s'", name)
		}
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intVal(i), nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return uintVal(u), nil
	}
	return strVal(s), nil
}

func (c *conn) variable(n *ast.VariableExpr) (val, error) {
	if !n.IsSystem {
		return c.userVars[strings.ToLower(n.Name)], nil
	}
	return c.sysVar(n.Name)
}

// set applies SET: session variables are remembered (and answered by
// SELECT @@name), autocommit switches the session's transaction mode,
// tidb_snapshot sets the ts plain SELECTs read at; SET NAMES and SET
// TRANSACTION are accepted and change nothing. (MY-V2)
func (c *conn) set(st *ast.SetStmt) error {
	e := &env{c: c}
	for _, a := range st.Variables {
		name := strings.ToLower(a.Name)
		if name == strings.ToLower(ast.SetNames) || name == strings.ToLower(ast.SetCharset) {
			continue
		}
		var v val
		switch x := a.Value.(type) {
		case nil:
			continue
		case *ast.ColumnNameExpr:
			v = strVal(x.Name.Name.O) // bare words: ON, OFF, SYSTEM, ...
		case *ast.DefaultExpr:
			delete(c.vars, name)
			if name == "autocommit" {
				v = intVal(1)
			} else {
				continue
			}
		default:
			var err error
			if v, err = e.eval(a.Value); err != nil {
				return err
			}
		}
		if !a.IsSystem {
			c.userVars[name] = v
			continue
		}
		switch name {
		case "autocommit":
			on, err := parseBoolVar(v)
			if err != nil {
				return err
			}
			if on && !c.autocommit && c.sess.InTxn() {
				if _, err := c.sqlExec("COMMIT"); err != nil {
					return err
				}
				c.implicitTxn = false
			}
			c.autocommit = on
			continue
		case "tidb_snapshot":
			if s := v.String(); v.k != vNull && s != "" {
				if _, err := c.parseTs(v); err != nil {
					return err
				}
			}
		}
		if v.k == vNull {
			c.vars[name] = ""
		} else {
			c.vars[name] = v.String()
		}
	}
	return nil
}

func parseBoolVar(v val) (bool, error) {
	switch strings.ToLower(v.String()) {
	case "1", "on", "true":
		return true, nil
	case "0", "off", "false":
		return false, nil
	}
	return false, newError(1231, "42000", "Variable 'autocommit' can't be set to the value of '%s'", v.String())
}

// parseTs turns an AS OF / tidb_snapshot value into a TSO: a TSO integer,
// or a datetime string read as UTC (MY-R2).
func (c *conn) parseTs(v val) (uint64, error) {
	switch v.k {
	case vInt, vUint:
		i, err := v.toInt()
		if err != nil || i <= 0 {
			return 0, newError(ErUnknown, "HY000", "invalid timestamp %s", v)
		}
		return uint64(i), nil
	case vStr, vBytes:
		s := strings.TrimSpace(v.s)
		if u, err := strconv.ParseUint(s, 10, 64); err == nil && u > 0 {
			return u, nil
		}
		for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05.999999999", "2006-01-02"} {
			if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
				ms := t.UnixMilli()
				if ms <= 0 {
					break
				}
				return uint64(ms) << 18, nil
			}
		}
	}
	return 0, newError(ErUnknown, "HY000", "invalid timestamp %s: want TIDB_PARSE_TSO(n), a TSO integer or a datetime string", v)
}

// ---- DML ----

// dml runs INSERT/UPDATE/DELETE. With autocommit off an implicit
// transaction is opened first. An UPDATE or DELETE the SQL front rejects as
// unsupported (expressions beyond its column-op-literal WHERE and SET) is
// evaluated here and applied as per-row statements (expand.go).
func (c *conn) dml(st ast.StmtNode) (outcome, error) {
	if !c.autocommit && !c.sess.InTxn() {
		if _, err := c.sqlExec("BEGIN"); err != nil {
			return outcome{}, err
		}
		c.implicitTxn = true
	}
	c.srv.execMu.Lock()
	defer c.srv.execMu.Unlock()
	res, err := c.sess.Exec(c.ctx, st.Text())
	var ue *sqlfront.UnsupportedError
	if err != nil && errors.As(err, &ue) {
		switch st.(type) {
		case *ast.UpdateStmt, *ast.DeleteStmt:
			res, err = c.expand(st, err)
		}
	}
	if err != nil {
		return outcome{}, err
	}
	out := outcome{affected: uint64(res.RowsAffected)}
	if res.LastInsertID > 0 {
		// The SQL front reports the first AUTO_INCREMENT value the INSERT
		// generated, inside a transaction as well (MY-D2).
		c.lastInsertID = uint64(res.LastInsertID)
		out.lastID = c.lastInsertID
	}
	return out, nil
}

// newFT builds a field type for computed and virtual columns.
func newFT(tp byte, flen int, charset, collate string, flag uint) *mysqlFieldType {
	ft := newFieldType(tp)
	ft.SetFlen(flen)
	ft.SetCharset(charset)
	ft.SetCollate(collate)
	ft.SetFlag(flag)
	return ft
}

func stringFT() *mysqlFieldType {
	return newFT(mysql.TypeVarchar, 64, "utf8mb4", "utf8mb4_general_ci", 0)
}

func bigintFT() *mysqlFieldType {
	return newFT(mysql.TypeLonglong, 21, "binary", "binary", mysql.BinaryFlag)
}
