package grpcserver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/opt"
	"github.com/tikv/pd/client/pkg/caller"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// startCluster builds a fake cluster with its gRPC servers and closes them
// when the test ends.
func startCluster(t testing.TB, cfg fakeupstream.Config) (*fakeupstream.Cluster, *Servers) {
	t.Helper()
	c, err := fakeupstream.New(cfg)
	require.NoError(t, err)
	s, err := Start(c, Config{})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close()
		if u := s.Unimplemented(); len(u) > 0 {
			t.Logf("RPCs answered Unimplemented: %v", u)
		}
	})
	return c, s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newPDClient connects the real PD client.
func newPDClient(t testing.TB, s *Servers) pd.Client {
	t.Helper()
	cli, err := pd.NewClientWithContext(testCtx(t), caller.Component("grpcserver-test"), []string{s.PDAddr()}, pd.SecurityOption{},
		opt.WithCustomTimeoutOption(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(cli.Close)
	// The pd client can build its first TSO stream twice at start (its
	// dispatcher and its connection updater race) and cancel the first
	// one with a request in flight, which fails that GetTS with "context
	// canceled"; seen under -race. Real deployments retry; here the first
	// timestamp is taken until the client has settled, so the tests
	// exercise the servers rather than that start-up race.
	var lastErr error
	for i := 0; i < 10; i++ {
		if _, _, lastErr = cli.GetTS(testCtx(t)); lastErr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, lastErr, "pd client never got a timestamp")
	return cli
}

func mustExec(t testing.TB, ss *sqlfront.Session, sql string) {
	t.Helper()
	_, err := ss.Exec(context.Background(), sql)
	require.NoError(t, err, sql)
}

func spanOf(start, end []byte) kvevent.Span { return kvevent.Span{StartKey: start, EndKey: end} }
