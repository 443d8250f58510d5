package pd_test

import (
	"context"

	"github.com/pingcap/errors"
	"sync/atomic"
	"testing"

	pdclient "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/pkg/caller"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/searchfabric/sfemu/upstream/pd"
)

// flakyTSO is a PD client whose first GetTS calls fail as the real client's
// do while its TSO stream is being set up.
type flakyTSO struct {
	pdclient.Client
	fails *atomic.Int32
	code  codes.Code
}

func newFlaky(cli pdclient.Client, code codes.Code, fails int32) *flakyTSO {
	f := &flakyTSO{Client: cli, fails: new(atomic.Int32), code: code}
	f.fails.Store(fails)
	return f
}

// WithCallerComponent keeps the failures: client-go's oracle asks for a
// component-tagged client and takes its timestamps from that one.
func (f *flakyTSO) WithCallerComponent(c caller.Component) pdclient.Client {
	return &flakyTSO{Client: f.Client.WithCallerComponent(c), fails: f.fails, code: f.code}
}

func (f *flakyTSO) GetTS(ctx context.Context) (int64, int64, error) {
	if f.fails.Add(-1) >= 0 {
		if f.code == codes.Canceled && f.fails.Load()%2 == 0 {
			// As the real client answers from its own context.
			return 0, 0, errors.WithStack(context.Canceled)
		}
		return 0, 0, status.Error(f.code, "denied")
	}
	return f.Client.GetTS(ctx)
}

// P14: OpenKVStore retries a first timestamp that fails with Canceled or
// Unavailable (a bounded number of times) and gives up at once on anything
// else, naming the attempt.
func TestOpenKVStoreRetriesTransientTSO(t *testing.T) {
	_, s, _ := start(t)
	ctx := testCtx(t)
	// client-go's KVStore.Close closes the PD client it was given, so
	// every case has its own.
	newPD := func() pdclient.Client {
		cli, err := pd.Open(ctx, pd.Config{Endpoints: []string{s.PDAddr()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cli.Close)
		return cli.PD()
	}

	f := newFlaky(newPD(), codes.Canceled, 2)
	kv, err := pd.OpenKVStore(pd.Wrap(ctx, f, 0))
	if err != nil {
		t.Fatalf("two transient TSO failures were not retried: %v", err)
	}
	_ = kv.Close()

	f = newFlaky(newPD(), codes.Canceled, 100)
	if _, err := pd.OpenKVStore(pd.Wrap(ctx, f, 0)); err == nil {
		t.Fatal("a TSO that never comes back was retried forever or ignored")
	}

	f = newFlaky(newPD(), codes.PermissionDenied, 1)
	if _, err := pd.OpenKVStore(pd.Wrap(ctx, f, 0)); err == nil || f.fails.Load() != 0 {
		t.Fatalf("a non-transient error was retried or ignored (err %v, calls left %d)", err, f.fails.Load())
	}
}
