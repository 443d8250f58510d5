// Package pd connects sfemu to a TiDB cluster's placement driver through
// the real PD client (github.com/tikv/pd/client): cluster id, TSO (a
// kvevent.Clock), store addresses, region lookup for CDC spans through
// client-go's region cache built on the plain PD client (comparable keys),
// GC safe point checks and the service GC safe point that keeps the
// history the adapter still needs. It also opens client-go's KV store for
// snapshot reads and lock resolution (raw keys).
//
// Rules are numbered in specs/logpuller.md (P1..).
package pd

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	pdclient "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/opt"
	"github.com/tikv/pd/client/pkg/caller"

	"github.com/searchfabric/sfemu/upstream/kvevent"
)

// Config says how to reach PD.
type Config struct {
	// Endpoints are PD addresses (host:port or http://host:port).
	Endpoints []string
	// Timeout bounds each PD call (default 5 s).
	Timeout time.Duration
	// Security enables TLS (P20); the zero value is plaintext.
	Security Security
}

// Client wraps the real PD client.
type Client struct {
	pd        pdclient.Client
	clusterID uint64
	timeout   time.Duration
	// endpoints PD was opened with (empty after Wrap).
	endpoints []string
	// security and tlsConfig are what Open was given (zero after Wrap):
	// the KV store and the log puller use the same.
	security  Security
	tlsConfig *tls.Config

	mu     sync.Mutex
	stores map[uint64]string
}

// Open connects to PD. ctx bounds only the connection attempt: the PD
// client lives until Close (the real client ties its background loops,
// such as the TSO dispatcher, to the context it is created with).
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("pd: no endpoints given")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pd: connect to %v: %w", cfg.Endpoints, err)
	}
	tlsConfig, err := cfg.Security.TLSConfig()
	if err != nil {
		return nil, err
	}
	type result struct {
		cli pdclient.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cli, err := pdclient.NewClientWithContext(context.Background(), caller.Component("sfemu-minicdc"), cfg.Endpoints,
			cfg.Security.pdOption(), opt.WithCustomTimeoutOption(cfg.Timeout))
		ch <- result{cli, err}
	}()
	var cli pdclient.Client
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("pd: connect to %v: %w", cfg.Endpoints, r.err)
		}
		cli = r.cli
	case <-ctx.Done():
		// The attempt ends on its own (the client has its own timeouts);
		// close what it yields.
		go func() {
			if r := <-ch; r.cli != nil {
				r.cli.Close()
			}
		}()
		return nil, fmt.Errorf("pd: connect to %v: %w", cfg.Endpoints, ctx.Err())
	}
	c := Wrap(ctx, cli, cfg.Timeout)
	c.endpoints = append([]string(nil), cfg.Endpoints...)
	c.security, c.tlsConfig = cfg.Security, tlsConfig
	return c, nil
}

// Wrap uses an already connected PD client (tests, or a caller that shares
// one). Close closes it.
func Wrap(ctx context.Context, cli pdclient.Client, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Client{pd: cli, clusterID: cli.GetClusterID(ctx), timeout: timeout, stores: map[uint64]string{}}
}

// PD is the underlying client (plain: region keys are comparable).
func (c *Client) PD() pdclient.Client { return c.pd }

// ClusterID is PD's cluster id, sent in every CDC request header.
func (c *Client) ClusterID() uint64 { return c.clusterID }

// Close closes the PD client.
func (c *Client) Close() { c.pd.Close() }

var _ kvevent.Clock = (*Client)(nil)

// CurrentTs returns a fresh timestamp from PD's TSO (P1). A request the
// PD client drops while it re-creates its TSO stream (it answers Canceled
// or Unavailable although the caller's context is alive) is retried a few
// times before the error is returned.
func (c *Client) CurrentTs(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var lastErr error
	for attempt := 0; attempt < tsoAttempts; attempt++ {
		physical, logical, err := c.pd.GetTS(ctx)
		if err == nil {
			return composeTs(physical, logical), nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("pd: get TSO: %w", lastErr)
}

// tsoAttempts bounds CurrentTs's retries of transient TSO failures.
const tsoAttempts = 5

// composeTs builds a TSO from its physical (ms) and logical parts.
func composeTs(physical, logical int64) uint64 {
	return uint64(physical)<<18 | uint64(logical)&(1<<18-1)
}

// StoreAddr returns the address of a store, cached after the first lookup
// (P2). A tombstone or unknown store is an error.
func (c *Client) StoreAddr(ctx context.Context, storeID uint64) (string, error) {
	c.mu.Lock()
	addr, ok := c.stores[storeID]
	c.mu.Unlock()
	if ok {
		return addr, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	st, err := c.pd.GetStore(ctx, storeID)
	if err != nil {
		return "", fmt.Errorf("pd: get store %d: %w", storeID, err)
	}
	if st == nil || st.GetAddress() == "" {
		return "", fmt.Errorf("pd: store %d is unknown or has no address", storeID)
	}
	c.mu.Lock()
	c.stores[storeID] = st.GetAddress()
	c.mu.Unlock()
	return st.GetAddress(), nil
}

// ForgetStore drops a cached store address (after the store failed, so a
// moved store is looked up again).
func (c *Client) ForgetStore(storeID uint64) {
	c.mu.Lock()
	delete(c.stores, storeID)
	c.mu.Unlock()
}
