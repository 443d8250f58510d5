package logpuller_test

import (
	"testing"

	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/upstream/logpuller"
)

// T17: the client's keepalive pings (every KeepaliveTime, also on a
// connection without a stream) are within what the fake stores enforce,
// so a store that sends nothing for a while (a long prewrite holding its
// lock) is pinged, not told GOAWAY "too_many_pings". With gRPC's default
// server policy (5 min, no pings without a stream) the third ping of a
// silent connection closed it: every change-data stream failed, and the
// rows of a big transaction came back through re-subscription instead of
// its live prewrites. The behaviour itself is shown over gRPC by
// e2e/wire TestWireBigTransactionAcrossRegionsWithSplit with
// SFEMU_WIRE_BIGTXN_SILENCE=40s (stores silent for 40 s).
func TestT17_KeepaliveWithinTheStoresPolicy(t *testing.T) {
	p := grpcserver.KeepalivePolicy()
	if p.MinTime > logpuller.KeepaliveTime {
		t.Fatalf("stores refuse pings closer than %s; the client pings every %s", p.MinTime, logpuller.KeepaliveTime)
	}
	if !p.PermitWithoutStream {
		t.Fatal("stores refuse pings on a connection without a stream; the client sends them (PermitWithoutStream)")
	}
}
