package adapter

// A real TiDB cluster reached through PD (ModeReal).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/searchfabric/sfemu/upstream/pd"
)

// DefaultConnectTimeout bounds ConnectUpstream's attempt to reach PD (a
// shorter deadline of ctx wins).
const DefaultConnectTimeout = 15 * time.Second

// ConnectUpstream connects to a real cluster's PD (addresses host:port or
// http://host:port): ModeReal. Reaching PD is bounded by
// DefaultConnectTimeout (or ctx's earlier deadline); the error names the
// addresses. There is no embedded cluster and no SQL front: tables are
// resolved through the meta keys at the start ts.
func ConnectUpstream(ctx context.Context, pdAddrs []string) (*Upstream, error) {
	return ConnectUpstreamSecure(ctx, pdAddrs, pd.Security{})
}

// ConnectUpstreamSecure is ConnectUpstream over TLS (--ca, --cert, --key;
// specs/logpuller.md P20): PD, client-go and the log puller all use sec. A
// missing or bad file fails at once, naming it.
func ConnectUpstreamSecure(ctx context.Context, pdAddrs []string, sec pd.Security) (*Upstream, error) {
	if _, err := sec.TLSConfig(); err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	var eps []string
	for _, a := range pdAddrs {
		if a = strings.TrimSpace(a); a != "" {
			eps = append(eps, a)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("adapter: no PD address given")
	}
	began := time.Now()
	octx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	p, err := pd.OpenUpstream(octx, pd.Config{Endpoints: eps, Security: sec})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("adapter: PD at %s unreachable (gave up after %v): %w", strings.Join(eps, ","), time.Since(began).Round(time.Millisecond), err)
		}
		return nil, fmt.Errorf("adapter: connecting to PD at %s: %w", strings.Join(eps, ","), err)
	}
	// A first TSO proves the connection works (the client may return
	// before it reached a leader).
	if _, err := p.PD.CurrentTs(octx); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("adapter: PD at %s: first TSO: %w", strings.Join(eps, ","), err)
	}
	return &Upstream{PD: p, mode: ModeReal, endpoints: eps}, nil
}
