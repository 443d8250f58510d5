package grpcserver

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// FeaturesKey and StreamMultiplexing are the gRPC metadata TiCDC sends on
// EventFeedV2 to ask for stream multiplexing. (G50)
const (
	FeaturesKey        = "features"
	StreamMultiplexing = "stream-multiplexing"
)

// maxEventsPerMessage and maxMessagePayload cap how many cdcpb.Events
// and about how many row bytes one ChangeDataEvent carries when consecutive
// feed deliveries are coalesced; an event is never split. (G57)
const (
	maxEventsPerMessage = 128
	maxMessagePayload   = 1 << 20
)

// eventPayload approximates an event's encoded size: its rows' bytes plus
// a fixed cost per row.
func eventPayload(e *cdcpb.Event) int {
	n := 16
	for _, r := range e.GetEntries().GetEntries() {
		n += len(r.Key) + len(r.Value) + len(r.OldValue) + 24
	}
	return n
}

// cdcServer is one store's ChangeData service, backed by the cluster's CDC
// feed (cdcfeed): every gRPC stream opens one feed stream to this store.
type cdcServer struct {
	cdcpb.UnimplementedChangeDataServer
	s       *Servers
	storeID uint64
}

// feedStream is what EventFeed and EventFeedV2 streams have in common.
type feedStream interface {
	Send(*cdcpb.ChangeDataEvent) error
	Recv() (*cdcpb.ChangeDataRequest, error)
}

// EventFeed is the v1 protocol: one subscription per region per stream,
// keyed by region id alone (a second register of a region still live on
// the stream is answered with DuplicateRequest), batched resolved ts
// without request ids. (G51)
func (c *cdcServer) EventFeed(stream cdcpb.ChangeData_EventFeedServer) error {
	return c.serve(stream, stream.Context(), false)
}

// EventFeedV2 multiplexes subscriptions keyed by (request id, region id)
// when the client sent "features: stream-multiplexing"; without it the
// stream behaves like v1. (G50)
func (c *cdcServer) EventFeedV2(stream cdcpb.ChangeData_EventFeedV2Server) error {
	mux := false
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok {
		for _, v := range md.Get(FeaturesKey) {
			for _, f := range strings.Split(v, ",") {
				if strings.TrimSpace(f) == StreamMultiplexing {
					mux = true
				}
			}
		}
	}
	return c.serve(stream, stream.Context(), mux)
}

// semver is a parsed ticdc_version.
type semver struct{ major, minor, patch int }

func (v semver) atLeast(o semver) bool {
	if v.major != o.major {
		return v.major > o.major
	}
	if v.minor != o.minor {
		return v.minor > o.minor
	}
	return v.patch >= o.patch
}

// parseVersion reads "v6.5.0", "6.5.0-alpha" and the like; anything that
// does not parse is 0.0.0, as TiKV treats it. (G52)
func parseVersion(s string) semver {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return semver{}
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return semver{}
		}
		n[i] = x
	}
	return semver{n[0], n[1], n[2]}
}

var (
	// versionBatchResolved: from 4.0.8 resolved ts arrive batched in
	// ChangeDataEvent.resolved_ts, before per region as Event.resolved_ts.
	versionBatchResolved = semver{4, 0, 8}
	// versionClusterIDCheck: from 5.3.0 TiKV checks header.cluster_id.
	versionClusterIDCheck = semver{5, 3, 0}
)

// requestSink is where accepted requests go (the feed stream).
type requestSink interface {
	Send(*cdcpb.ChangeDataRequest) error
}

// conn is the per-stream protocol state shared by the request reader and
// the sender.
type conn struct {
	mux bool

	mu         sync.Mutex
	versionSet bool
	version    semver
	// active maps a region to the request id of its live subscription
	// (non-multiplexed streams only).
	active  map[uint64]uint64
	pending []*cdcpb.Event // answers made here, not by the feed
}

func (c *cdcServer) serve(stream feedStream, ctx context.Context, mux bool) error {
	if !c.s.storeUp(c.storeID) {
		return errStoreDown(c.storeID)
	}
	fs, err := c.s.c.OpenStream(c.storeID)
	if err != nil {
		return status.Errorf(codes.Unavailable, "fake tikv store %d: %v", c.storeID, err)
	}
	defer fs.Close()
	cn := &conn{mux: mux, active: map[uint64]uint64{}}
	wake := make(chan struct{}, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				// EOF: the client sends no more requests but keeps
				// reading, so the sender goes on; any other error
				// cancels the stream context, which ends the sender.
				return
			}
			c.handle(cn, fs, req)
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	timer := time.NewTimer(c.s.cfg.PollInterval)
	defer timer.Stop()
	for {
		// Take the wake channel before stepping, so a Wake that comes
		// while this round runs is not lost.
		woken := c.s.wakeup()
		c.s.c.DeliverAll()
		c.s.c.Tick()
		cn.mu.Lock()
		local := cn.pending
		cn.pending = nil
		cn.mu.Unlock()
		evs, ferr := fs.Recv()
		out := cn.translate(local, evs)
		for _, ev := range out {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		if ferr != nil {
			// The feed broke the stream (store down, network fault):
			// the client sees the transport fail. (G56)
			return status.Errorf(codes.Unavailable, "fake tikv store %d: %v", c.storeID, ferr)
		}
		if len(out) > 0 {
			continue
		}
		timer.Reset(c.s.cfg.PollInterval)
		select {
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-woken:
			if !timer.Stop() {
				<-timer.C
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-c.s.done:
			return status.Error(codes.Unavailable, "fake tikv: server closing")
		}
	}
}

// handle applies one request: the first one fixes the stream's client
// version; cluster id, kv_api and (non-multiplexed) duplicate checks are
// made here, everything else is the feed's. (G52-G55)
func (c *cdcServer) handle(cn *conn, fs requestSink, req *cdcpb.ChangeDataRequest) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if !cn.versionSet {
		cn.versionSet = true
		cn.version = parseVersion(req.GetHeader().GetTicdcVersion())
	}
	fail := func(e *cdcpb.Error) {
		cn.pending = append(cn.pending, &cdcpb.Event{RegionId: req.GetRegionId(), RequestId: req.GetRequestId(),
			Event: &cdcpb.Event_Error{Error: e}})
	}
	if _, ok := req.GetRequest().(*cdcpb.ChangeDataRequest_Deregister_); ok {
		for region, id := range cn.active {
			if id == req.GetRequestId() && (req.GetRegionId() == 0 || req.GetRegionId() == region) {
				delete(cn.active, region)
			}
		}
		_ = fs.Send(req)
		return
	}
	if cn.version.atLeast(versionClusterIDCheck) {
		if got := req.GetHeader().GetClusterId(); got != c.s.cfg.ClusterID {
			fail(&cdcpb.Error{ClusterIdMismatch: &cdcpb.ClusterIDMismatch{Current: c.s.cfg.ClusterID, Request: got}})
			return
		}
	}
	if req.GetKvApi() != cdcpb.ChangeDataRequest_TiDB {
		fail(&cdcpb.Error{Compatibility: &cdcpb.Compatibility{RequiredVersion: "kv_api TiDB"}})
		return
	}
	if !cn.mux {
		if _, dup := cn.active[req.GetRegionId()]; dup {
			fail(&cdcpb.Error{DuplicateRequest: &cdcpb.DuplicateRequest{RegionId: req.GetRegionId()}})
			return
		}
		cn.active[req.GetRegionId()] = req.GetRequestId()
	}
	_ = fs.Send(req)
}

// translate turns feed output into what this stream's protocol sends:
// region errors release the region (non-multiplexed); resolved-ts batches
// lose their request id (non-multiplexed) or become per-region events
// (clients older than 4.0.8); consecutive event messages are coalesced.
func (cn *conn) translate(local []*cdcpb.Event, evs []*cdcpb.ChangeDataEvent) []*cdcpb.ChangeDataEvent {
	if len(local) == 0 && len(evs) == 0 {
		return nil
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	var out []*cdcpb.ChangeDataEvent
	lastBytes := 0 // payload of out[len(out)-1]
	appendEvents := func(es ...*cdcpb.Event) {
		for _, e := range es {
			if !cn.mux {
				if _, isErr := e.GetEvent().(*cdcpb.Event_Error); isErr && cn.active[e.RegionId] == e.RequestId {
					delete(cn.active, e.RegionId)
				}
			}
			size := eventPayload(e)
			if n := len(out); n > 0 && out[n-1].ResolvedTs == nil && len(out[n-1].Events) < maxEventsPerMessage &&
				lastBytes+size <= maxMessagePayload {
				out[n-1].Events = append(out[n-1].Events, e)
				lastBytes += size
				continue
			}
			out = append(out, &cdcpb.ChangeDataEvent{Events: []*cdcpb.Event{e}})
			lastBytes = size
		}
	}
	appendEvents(local...)
	for _, ev := range evs {
		if len(ev.Events) > 0 {
			appendEvents(ev.Events...)
		}
		rts := ev.GetResolvedTs()
		if rts == nil || rts.Ts == 0 {
			continue
		}
		switch {
		case !cn.version.atLeast(versionBatchResolved):
			// Per-region resolved ts, the pre-4.0.8 form. (G53)
			for _, r := range rts.Regions {
				appendEvents(&cdcpb.Event{RegionId: r, RequestId: rts.RequestId, Event: &cdcpb.Event_ResolvedTs{ResolvedTs: rts.Ts}})
			}
		case cn.mux:
			out = append(out, &cdcpb.ChangeDataEvent{ResolvedTs: rts})
		default:
			// v1: regions + ts only; batches at one ts merge. (G51)
			if n := len(out); n > 0 && out[n-1].ResolvedTs != nil && out[n-1].ResolvedTs.Ts == rts.Ts {
				out[n-1].ResolvedTs.Regions = append(out[n-1].ResolvedTs.Regions, rts.Regions...)
				continue
			}
			out = append(out, &cdcpb.ChangeDataEvent{ResolvedTs: &cdcpb.ResolvedTs{
				Regions: append([]uint64(nil), rts.Regions...), Ts: rts.Ts}})
		}
	}
	return out
}
