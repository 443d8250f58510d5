package logpuller

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/pingcap/kvproto/pkg/metapb"

	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
)

// This file holds the seams of the gRPC transport (GRPCSource): how it finds
// regions and stores, and how it resolves locks. upstream/pd implements them
// over the real PD client and client-go; tests use small doubles.

// RegionInfo is one region as the transport needs it: its id and epoch for
// the request, its range in comparable (PD) form, and the address of the
// store holding its leader.
type RegionInfo struct {
	ID       uint64
	Epoch    *metapb.RegionEpoch
	StartKey []byte // comparable; empty = -inf
	EndKey   []byte // comparable; empty = +inf
	// LeaderStoreID and LeaderAddr say where to send the request. A zero
	// store id means the leader is unknown (the region is skipped and
	// retried later).
	LeaderStoreID uint64
	LeaderAddr    string
	// Token is the locator's own handle on the cached region (e.g. its
	// client-go version id); the transport passes it back untouched.
	Token any
}

// RegionLocator finds the regions covering a span. Keys are comparable
// (memcomparable EncodeBytes form, as PD stores them): the locator must be
// built on a plain PD client (facts §4).
type RegionLocator interface {
	// LocateSpan returns the regions covering span from its start key, in
	// key order and contiguous. It may return fewer regions than needed to
	// cover the whole span (a hole during a split): the rest is retried.
	LocateSpan(ctx context.Context, span kvevent.Span) ([]RegionInfo, error)
	// UpdateLeader records that region's leader moved to leader (the peer
	// a not_leader error names). A nil leader means unknown: the cached
	// region is dropped.
	UpdateLeader(region RegionInfo, leader *metapb.Peer)
	// Invalidate drops a cached region after epoch_not_match,
	// region_not_found or a failed stream, so the next LocateSpan reloads
	// it from PD.
	Invalidate(region RegionInfo)
}

// LockResolver resolves the locks of one region with start ts below
// TargetTs (ScanLock + client-go's lock resolver), so a stuck resolved ts
// can move again. Span is comparable.
type LockResolver interface {
	ResolveLocks(ctx context.Context, task LockResolveTask) error
}

// ClientVersion is the ticdc_version every request header carries. TiKV
// reads it from the first request of a stream to gate features: 6.5.0
// enables batched resolved ts and cluster-id validation (facts §1.1).
const ClientVersion = "6.5.0"

// TransportConfig configures a GRPCSource. Zero durations take defaults.
type TransportConfig struct {
	// ClusterID is PD's cluster id, sent in every request header.
	ClusterID uint64
	// TLS, when set, secures the connections to the stores (P20); nil is
	// plaintext.
	TLS     *tls.Config
	Locator RegionLocator
	// Resolver resolves locks of stuck regions; nil disables lock
	// resolution.
	Resolver LockResolver
	// Clock gives the current TSO for the stuck-resolved-ts target; nil
	// disables lock resolution.
	Clock kvevent.Clock
	// Now is the wall clock (default time.Now); stuck detection measures
	// with it.
	Now func() time.Time
	// CheckStartTs, when set, is called by Subscribe to refuse start ts
	// below the GC safe point.
	CheckStartTs func(ctx context.Context, startTs uint64) error
	// StoreReconnectBackoff is the pause before a failed store is
	// connected again (default 1 s, TiCDC's value).
	StoreReconnectBackoff time.Duration
	// RegionRetryInterval is how often holes are re-located when a
	// previous attempt could not cover them (default 100 ms).
	RegionRetryInterval time.Duration
	// BusyBackoff is the pause after server_is_busy without backoff_ms and
	// after congested (default 500 ms).
	BusyBackoff time.Duration
	// ResolveLockInterval is the stuck-resolved-ts check tick (default 2 s).
	ResolveLockInterval time.Duration
	// MatcherQuota per span (0: DefaultMatcherQuota).
	MatcherQuota int
	// Matcher is the shared memory quota and prewrite spill store of
	// every span's matcher (LP13-LP16).
	Matcher MatcherMemory
	// DisableV2 forces the v1 EventFeed (tests; TiKV before 7.x is
	// detected automatically).
	DisableV2 bool
	// DialTimeout bounds opening a stream (default 10 s).
	DialTimeout time.Duration
	// EventQueueBytes bounds the heap of received events waiting for Run
	// (LP19; default EventQueueBytesFor the matcher's memory quota, or
	// DefaultEventQueueBytes without one).
	EventQueueBytes int64
}

func (c *TransportConfig) fill() error {
	if c.Locator == nil {
		return fmt.Errorf("logpuller: transport config: Locator is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.StoreReconnectBackoff <= 0 {
		c.StoreReconnectBackoff = time.Second
	}
	if c.RegionRetryInterval <= 0 {
		c.RegionRetryInterval = 100 * time.Millisecond
	}
	if c.BusyBackoff <= 0 {
		c.BusyBackoff = 500 * time.Millisecond
	}
	if c.ResolveLockInterval <= 0 {
		c.ResolveLockInterval = 2 * time.Second
	}
	if c.EventQueueBytes <= 0 {
		c.EventQueueBytes = DefaultEventQueueBytes
		if c.Matcher.Memory != nil {
			c.EventQueueBytes = EventQueueBytesFor(c.Matcher.Memory.Limit())
		}
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	return nil
}

// MaxKeyspaceID is the largest keyspace id the 3-byte prefix can carry.
const MaxKeyspaceID = 0xFFFFFF

// KeyspaceSpan builds the comparable span of the raw range [rawStart,
// rawEnd) inside keyspace id (API v2): each end is prefixed with
// 'x' + the 3-byte big-endian id and then EncodeBytes'd (facts §4). An empty
// rawEnd means the end of the keyspace. Row keys arrive with the prefix
// kept; StripKeyspacePrefix removes it.
func KeyspaceSpan(keyspaceID uint32, rawStart, rawEnd []byte) (kvevent.Span, error) {
	if keyspaceID > MaxKeyspaceID {
		return kvevent.Span{}, fmt.Errorf("logpuller: keyspace id %d exceeds the maximum %d", keyspaceID, MaxKeyspaceID)
	}
	prefix := keyspacePrefix(keyspaceID)
	start := append(append([]byte{}, prefix...), rawStart...)
	var end []byte
	if len(rawEnd) == 0 {
		// The keyspace ends where the next keyspace's prefix begins.
		next := keyspaceID + 1
		if next > MaxKeyspaceID {
			end = []byte{'x' + 1}
		} else {
			end = keyspacePrefix(next)
		}
	} else {
		end = append(append([]byte{}, prefix...), rawEnd...)
	}
	return kvevent.Span{StartKey: codec.EncodeBytes(nil, start), EndKey: codec.EncodeBytes(nil, end)}, nil
}

func keyspacePrefix(id uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], id)
	b[0] = 'x'
	return b[:]
}

// StripKeyspacePrefix returns key without its API v2 keyspace prefix
// ('x' + 3 bytes), or key unchanged when it has none.
func StripKeyspacePrefix(key []byte) []byte {
	if len(key) > 4 && key[0] == 'x' {
		return key[4:]
	}
	return key
}
