package sqlfront

import (
	"context"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values for the parser
	"github.com/searchfabric/sfemu/fakeupstream"
)

// Result says what a statement did.
type Result struct {
	// RowsAffected counts rows written by DML.
	RowsAffected int
	// CommitTs is the commit ts of an auto-committed DML statement, of a
	// COMMIT, or the FinishedTs of a DDL (0 when nothing was written).
	CommitTs uint64
	// DDL is true for DDL statements.
	DDL bool
	// LastInsertID is the first AUTO_INCREMENT value an INSERT generated
	// (0: none), also inside an explicit transaction (MySQL's
	// LAST_INSERT_ID()).
	LastInsertID int64
}

// Session is one client connection: a current database and an optional
// explicit transaction (BEGIN ... COMMIT/ROLLBACK).
type Session struct {
	srv    *Server
	db     string
	txn    *fakeupstream.Txn // explicit transaction, nil in autocommit
	parser *parser.Parser
	cache  stmtCache
}

// NewSession opens a session with an optional current database.
func (s *Server) NewSession(db string) *Session {
	return &Session{srv: s, db: db, parser: parser.New()}
}

// Exec runs one or more statements separated by semicolons and returns the
// result of the last one. A failing statement stops the batch; statements
// before it stay applied (as with a MySQL client), and an explicit
// transaction stays open for the caller to roll back.
func (ss *Session) Exec(ctx context.Context, sql string) (Result, error) {
	stmts, err := ss.parse(sql)
	if err != nil {
		return Result{}, err
	}
	if len(stmts) == 0 {
		return Result{}, fmt.Errorf("sqlfront: no statement in %q", abbreviate(sql))
	}
	var res Result
	for _, st := range stmts {
		if res, err = ss.execOne(ctx, st); err != nil {
			return res, err
		}
	}
	return res, nil
}

// parse parses sql, through the statement cache when it is one DML
// statement of a shape seen before (S23).
func (ss *Session) parse(sql string) ([]ast.StmtNode, error) {
	key, lits, ok := ss.cache.shape(sql)
	if ok {
		if st := ss.cache.lookup(key, lits, sql); st != nil {
			checkCachedParse(ss.parser, sql, st)
			return []ast.StmtNode{st}, nil
		}
	}
	stmts, _, err := ss.parser.Parse(sql, "", "")
	if err != nil {
		return nil, fmt.Errorf("sqlfront: parse %q: %w", abbreviate(sql), err)
	}
	if ok && len(stmts) == 1 {
		ss.cache.add(key, lits, stmts[0])
	}
	return stmts, nil
}

func abbreviate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// InTxn reports whether an explicit transaction is open.
func (ss *Session) InTxn() bool { return ss.txn != nil }

// execOne runs one statement under the server's lock. What it read and
// a commit it made (auto-commit DML, COMMIT) are applied or read under the
// lock and waited for on disk after the lock is released (DUR-13, DUR-15):
// another session's statement runs meanwhile, and one fsync covers the
// commits of several sessions. The statement returns (its result, or an
// error such as a duplicate key that tells what it read) only once
// everything it saw or wrote is durable.
func (ss *Session) execOne(ctx context.Context, st ast.StmtNode) (Result, error) {
	res, used, err := ss.execLocked(ctx, st)
	if used != nil {
		if werr := used.WaitDurable(); werr != nil && err == nil {
			return Result{}, fmt.Errorf("sqlfront: commit: %w", werr)
		}
	}
	return res, err
}

// execLocked is execOne's work under the server's lock; used is the
// transaction whose reads and commit still have to be waited for on disk
// (nil: none).
func (ss *Session) execLocked(ctx context.Context, st ast.StmtNode) (Result, *fakeupstream.Txn, error) {
	s := ss.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	query := strings.TrimSpace(st.Text())
	if _, isDDL := st.(ast.DDLNode); isDDL && ss.txn != nil {
		// MySQL commits an open transaction before DDL; we refuse instead,
		// so a test never gets an implicit commit it did not ask for.
		return Result{}, nil, fmt.Errorf("sqlfront: DDL inside an explicit transaction is not allowed (COMMIT or ROLLBACK first): %s", abbreviate(query))
	}
	var ts uint64
	var err error
	switch x := st.(type) {
	case *ast.UseStmt:
		if s.cat.dbByName(x.DBName) == nil {
			return Result{}, nil, fmt.Errorf("sqlfront: unknown database %q", x.DBName)
		}
		ss.db = x.DBName
		return Result{}, nil, nil
	case *ast.BeginStmt:
		if ss.txn != nil {
			return Result{}, nil, fmt.Errorf("sqlfront: BEGIN inside an open transaction")
		}
		ss.txn = s.cluster.Begin()
		ss.txn.DeferDurability()
		return Result{}, nil, nil
	case *ast.CommitStmt:
		if ss.txn == nil {
			return Result{}, nil, nil
		}
		txn := ss.txn
		ss.txn = nil
		if txn.Len() == 0 {
			_ = txn.Discard()
			return Result{}, nil, nil
		}
		ts, err := txn.Commit()
		if err != nil {
			return Result{}, txn, fmt.Errorf("sqlfront: commit: %w", err)
		}
		return Result{CommitTs: ts}, txn, nil
	case *ast.RollbackStmt:
		if ss.txn != nil {
			// Nothing of it reached the store (the front prewrites only
			// at COMMIT): drop the buffer, as TiDB does.
			_ = ss.txn.Discard()
			ss.txn = nil
		}
		return Result{}, nil, nil
	case *ast.CreateDatabaseStmt:
		ts, err = s.execCreateDatabase(ctx, x, query)
	case *ast.DropDatabaseStmt:
		ts, err = s.execDropDatabase(ctx, x, query)
	case *ast.CreateTableStmt:
		ts, err = s.execCreateTable(ctx, ss, x, query)
	case *ast.DropTableStmt:
		ts, err = s.execDropTable(ctx, ss, x, query)
	case *ast.TruncateTableStmt:
		ts, err = s.execTruncateTable(ctx, ss, x, query)
	case *ast.RenameTableStmt:
		ts, err = s.execRenameTable(ctx, ss, x, query)
	case *ast.AlterTableStmt:
		ts, err = s.execAlterTable(ctx, ss, x, query)
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt:
		return ss.execDML(ctx, st)
	default:
		return Result{}, nil, unsupported("statement %T: %s", st, abbreviate(query))
	}
	if err != nil {
		return Result{}, nil, err
	}
	return Result{CommitTs: ts, DDL: true}, nil, nil
}

// execDML runs a DML statement in the open transaction, or in its own
// auto-committed one. A failing statement leaves nothing behind (S4): an
// auto-commit transaction is discarded, an explicit one is put back to the
// savepoint taken before the statement — the writes go straight into the
// transaction's buffer, so a large statement is held once, not staged.
func (ss *Session) execDML(ctx context.Context, st ast.StmtNode) (Result, *fakeupstream.Txn, error) {
	txn := ss.txn
	auto := txn == nil
	if auto {
		txn = ss.srv.cluster.Begin()
		txn.DeferDurability()
	} else {
		txn.Savepoint()
	}
	// Every return hands txn back: what the statement read is waited for
	// on disk before its result or error goes out (DUR-15).
	n, lastID, err := ss.srv.runDML(ss, txn, st)
	if err != nil {
		if auto {
			_ = txn.Discard()
		} else if rerr := txn.RollbackToSavepoint(); rerr != nil {
			return Result{}, txn, fmt.Errorf("%w (and the transaction could not be put back: %v)", err, rerr)
		}
		return Result{}, txn, err
	}
	res := Result{RowsAffected: n, LastInsertID: lastID}
	if !auto {
		txn.ReleaseSavepoint()
		return res, txn, nil
	}
	if txn.Len() == 0 {
		_ = txn.Discard()
		return res, txn, nil
	}
	ts, err := txn.Commit()
	if err != nil {
		return Result{}, txn, fmt.Errorf("sqlfront: commit: %w", err)
	}
	res.CommitTs = ts
	return res, txn, nil
}
