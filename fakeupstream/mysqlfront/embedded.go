package mysqlfront

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// EmbeddedConfig configures StartEmbedded. Zero fields take defaults.
type EmbeddedConfig struct {
	// Seed of the cluster's random choices.
	Seed int64
	// MySQLAddr is where the MySQL front listens (default 127.0.0.1:0).
	MySQLAddr string
	// ResolvedTsInterval between resolved-ts rounds (default 50ms).
	ResolvedTsInterval time.Duration
	// Logf receives the MySQL front's connection log lines.
	Logf func(format string, args ...any)
	// LockTTL is the TTL of the locks transactions write (default: the
	// cluster's, 3 s). The fake sends no TTL heartbeats, so a transaction
	// that takes longer than it from BEGIN to COMMIT (a bulk load of a
	// million rows) needs a longer one, or a CDC client's lock resolver
	// may roll it back.
	LockTTL time.Duration
}

// Embedded is a whole embedded upstream on the wall clock: the cluster,
// its SQL front, the PD/TiKV/CDC gRPC servers and the MySQL front; what a
// real TiDB cluster offers its clients (PD endpoints and a MySQL DSN). (MY-U1)
type Embedded struct {
	Cluster *fakeupstream.Cluster
	SQL     *sqlfront.Server
	GRPC    *grpcserver.Servers
	MySQL   *Server
}

// StartEmbedded starts the embedded upstream.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	iv := cfg.ResolvedTsInterval
	if iv <= 0 {
		iv = 50 * time.Millisecond
	}
	c, err := fakeupstream.New(fakeupstream.Config{Seed: cfg.Seed, RealClock: true, LockTTLMs: uint64(cfg.LockTTL.Milliseconds()),
		Feed: cdcfeed.Config{ResolvedTsIntervalMs: iv.Milliseconds()}})
	if err != nil {
		return nil, err
	}
	sq, err := sqlfront.New(ctx, c)
	if err != nil {
		return nil, err
	}
	gs, err := grpcserver.Start(c, grpcserver.Config{})
	if err != nil {
		return nil, err
	}
	ms, err := StartConfig(sq, Config{Addr: cfg.MySQLAddr, Logf: cfg.Logf})
	if err != nil {
		gs.Close()
		return nil, err
	}
	return &Embedded{Cluster: c, SQL: sq, GRPC: gs, MySQL: ms}, nil
}

// PDAddr is the value for SFEMU_TIDB_PD.
func (e *Embedded) PDAddr() string { return e.GRPC.PDAddr() }

// DSN is the value for SFEMU_TIDB_DSN (no database selected).
func (e *Embedded) DSN() string { return e.MySQL.DSN("") }

// Env is the environment the opt-in real-cluster suites read, as
// shell-quoted assignments: SFEMU_TIDB_PD=... SFEMU_TIDB_DSN='...'.
func (e *Embedded) Env() string {
	return fmt.Sprintf("SFEMU_TIDB_PD=%s SFEMU_TIDB_DSN='%s'", e.PDAddr(), e.DSN())
}

// Close stops the MySQL front, then the gRPC servers.
func (e *Embedded) Close() {
	_ = e.MySQL.Close()
	e.GRPC.Close()
}
