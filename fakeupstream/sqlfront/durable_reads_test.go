package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/stretchr/testify/require"
)

// newDurableServer opens a SQL front on a durable cluster in a temp dir
// (no background maintenance, so every fsync is a statement's).
func newDurableServer(t *testing.T) (*fakeupstream.Cluster, *Server) {
	t.Helper()
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1, Dir: t.TempDir(), Maintain: fakeupstream.MaintainConfig{Off: true}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s, err := Open(context.Background(), c)
	require.NoError(t, err)
	return c, s
}

// applyNoWait runs the first half of one statement, the part under the
// server's lock (what a session does while another waits for its fsync),
// and returns the txn whose records it has not yet waited for.
func applyNoWait(t *testing.T, ss *Session, sql string) *fakeupstream.Txn {
	t.Helper()
	stmts, err := ss.parse(sql)
	require.NoError(t, err, sql)
	require.Len(t, stmts, 1, sql)
	_, used, err := ss.execLocked(context.Background(), stmts[0])
	require.NoError(t, err, sql)
	require.NotNil(t, used, "%s: nothing to wait for", sql)
	return used
}

// TestDUR15StatementsRevealOnlyDurableReads (DUR-15): session a's commit is
// applied and not yet on disk; each statement of session b that reads
// a's row (a duplicate-key INSERT, an UPDATE matching nothing, an UPDATE
// or DELETE inside an explicit transaction) writes nothing durable itself, yet must
// return its result or error only once a's commit is on disk. A front
// that let reads skip the wait fails here.
func TestDUR15StatementsRevealOnlyDurableReads(t *testing.T) {
	c, s := newDurableServer(t)
	a, b := s.NewSession(""), s.NewSession("")
	mustExec(t, a, "CREATE DATABASE d; USE d; CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
	mustExec(t, b, "USE d")
	probes := []struct {
		sql     string
		wantErr error
		wantN   int
	}{
		{"INSERT INTO t VALUES (2, 0)", ErrDuplicateKey, 0},
		{"UPDATE t SET v = 0 WHERE id = 2 AND v = 100", nil, 0},
		{"BEGIN; UPDATE t SET v = v + 10 WHERE id = 2", nil, 1},
		{"BEGIN; DELETE FROM t WHERE id = 2", nil, 1},
	}
	writes := []string{"INSERT INTO t VALUES (2, 1)", "UPDATE t SET v = v + 1 WHERE id = 2"}
	for i, p := range probes {
		w := writes[min(i, 1)]
		pending := applyNoWait(t, a, w)
		require.True(t, c.LogPending(), "%q: a's commit is already on disk; the probe proves nothing", w)
		res, err := b.Exec(context.Background(), p.sql)
		if p.wantErr != nil {
			require.True(t, errors.Is(err, p.wantErr), "%q: got %v, want %v", p.sql, err, p.wantErr)
		} else {
			require.NoError(t, err, p.sql)
			require.Equal(t, p.wantN, res.RowsAffected, p.sql)
		}
		require.False(t, c.LogPending(), "%q returned while the commit it read (%q) was not on disk", p.sql, w)
		require.NoError(t, pending.WaitDurable())
		if b.InTxn() {
			mustExec(t, b, "ROLLBACK")
		}
	}
}

// TestDUR15LanesShareOneFsync (DUR-15): four lanes (sessions) each run an
// auto-commit UPDATE by id, which reads its row before writing it. Each
// statement's part under the server's lock runs while the earlier lanes'
// commits still wait for the disk: none of them fsyncs (a read that
// waited under the lock for every pending record would fsync each
// earlier lane's commit), and the four commits then share one fsync.
func TestDUR15LanesShareOneFsync(t *testing.T) {
	c, s := newDurableServer(t)
	setup := s.NewSession("")
	mustExec(t, setup, "CREATE DATABASE d; USE d; CREATE TABLE t (id BIGINT PRIMARY KEY, v INT, UNIQUE KEY uv (v))")
	mustExec(t, setup, "INSERT INTO t VALUES (0, 0), (1, 10), (2, 20), (3, 30)")
	const lanes = 4
	var used []*fakeupstream.Txn
	before := c.LogSyncs()
	for lane := 0; lane < lanes; lane++ {
		ss := s.NewSession("d")
		used = append(used, applyNoWait(t, ss, fmt.Sprintf("UPDATE t SET v = v + 1 WHERE id = %d", lane)))
		// an INSERT's duplicate checks read too
		used = append(used, applyNoWait(t, ss, fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", 100+lane, 100+lane)))
	}
	require.Equal(t, before, c.LogSyncs(), "statements fsynced under the server's lock")
	require.True(t, c.LogPending())
	for _, u := range used {
		require.NoError(t, u.WaitDurable())
	}
	commits := len(used)
	fsyncs := c.LogSyncs() - before
	t.Logf("%d lanes: %d commits, %d fsyncs", lanes, commits, fsyncs)
	require.Equal(t, int64(1), fsyncs, "the lanes' %d commits did not share one fsync", commits)
	require.False(t, c.LogPending())
	for lane := 0; lane < lanes; lane++ {
		ss := s.NewSession("d")
		_, err := ss.Exec(context.Background(), fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", lane))
		require.ErrorIs(t, err, ErrDuplicateKey)
	}
}
