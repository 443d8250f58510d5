package mysqlfront

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream/tso"
)

// TestStartEmbedded (rule MY-U1): the embedded upstream runs on the wall
// clock, serves SQL at its DSN, and its PD address is the gRPC servers'
// PD over the same cluster.
func TestStartEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := StartEmbedded(ctx, EmbeddedConfig{Seed: 5, Logf: t.Logf})
	require.NoError(t, err)
	defer e.Close()

	require.Equal(t, e.GRPC.PDAddr(), e.PDAddr())
	require.Equal(t, e.MySQL.DSN(""), e.DSN())
	now := time.Now().UnixMilli()
	phys := tso.Physical(e.Cluster.Oracle().Peek())
	require.InDelta(t, float64(now), float64(phys), float64(time.Minute.Milliseconds()), "the cluster's TSO follows the wall clock")

	db, err := sql.Open("mysql", e.DSN())
	require.NoError(t, err)
	defer db.Close()
	for _, q := range []string{"CREATE DATABASE emb", "CREATE TABLE emb.t (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO emb.t VALUES (1, 'one')"} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	var v string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT v FROM emb.t WHERE id = 1").Scan(&v))
	require.Equal(t, "one", v)
	ti, _, err := e.SQL.TableInfo("emb", "t")
	require.NoError(t, err)
	require.Positive(t, ti.ID, "the SQL front behind the DSN is the embedded one")
}
