package sqlfront

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestS1_BatchStopsAtFirstFailure (rule S1): statements separated by `;`
// run in order through TiDB's parser; the first failure ends the batch and
// is returned, so the statements after it never run.
func TestS1_BatchStopsAtFirstFailure(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, v TINYINT)")
	_, err := ss.Exec(context.Background(), "INSERT INTO t VALUES (1, 1); INSERT INTO t VALUES (2, 1000); INSERT INTO t VALUES (3, 3)")
	require.ErrorContains(t, err, "out of range")
	require.Equal(t, []string{"id=1,v=1"}, rowsAt(t, s, "d", "t", now(t, s)))

	_, err = ss.Exec(context.Background(), "INSERT INTO t VALUES (4, 4); INSERT INTO t VALUES (5,")
	require.Error(t, err, "a batch that does not parse")
	require.Equal(t, []string{"id=1,v=1"}, rowsAt(t, s, "d", "t", now(t, s)), "the batch is parsed whole before any statement runs")
}
