package logpuller

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/pingcap/kvproto/pkg/cdcpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
)

// gRPC settings for TiKV change-data connections: TiCDC's (facts §1.2),
// except the stream window, 1 MiB instead of 64 KiB − 1 (T14): with one
// multiplexed stream per store, 64 KiB in flight made the server stall on
// flow control whenever the client's goroutines waited for a core.
const (
	grpcMaxRecvMsgSize  = 256 << 20
	grpcStreamWindow    = 1 << 20
	grpcConnWindow      = 8 << 20
	grpcKeepaliveTime   = KeepaliveTime
	grpcKeepaliveTimout = 3 * time.Second
)

// KeepaliveTime is how often the client pings a store connection that
// carried nothing (also without a stream); a server must permit it (T17).
const KeepaliveTime = 10 * time.Second

// dialOptions are the store connections' options; tlsConfig nil is
// plaintext, else TLS as the cluster's other clients use it (P20).
func dialOptions(tlsConfig *tls.Config) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if tlsConfig != nil {
		creds = credentials.NewTLS(tlsConfig)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcMaxRecvMsgSize), grpc.MaxCallSendMsgSize(math.MaxInt32)),
		grpc.WithInitialWindowSize(grpcStreamWindow),
		grpc.WithInitialConnWindowSize(grpcConnWindow),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: grpcKeepaliveTime, Timeout: grpcKeepaliveTimout, PermitWithoutStream: true}),
	}
}

// featuresKey/streamMultiplexing is the metadata TiKV reads to enable
// request-id multiplexing on EventFeedV2 (facts §0).
const (
	featuresKey        = "features"
	streamMultiplexing = "stream-multiplexing"
)

// Send queues a request for the stream's sender goroutine. It never
// blocks Run and never fails: a stream whose peer stopped reading fails on
// its own, through Run (FailStream).
func (st *grpcStream) Send(req *cdcpb.ChangeDataRequest) error {
	st.sendMu.Lock()
	st.sendQ = append(st.sendQ, req)
	st.sendMu.Unlock()
	select {
	case st.sendWake <- struct{}{}:
	default:
	}
	return nil
}

func (st *grpcStream) takeQueue() []*cdcpb.ChangeDataRequest {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	q := st.sendQ
	st.sendQ = nil
	return q
}

// changeDataStream is what EventFeed and EventFeedV2 clients share.
type changeDataStream interface {
	Send(*cdcpb.ChangeDataRequest) error
	Recv() (*cdcpb.ChangeDataEvent, error)
	CloseSend() error
}

// runStream opens the stream, then sends queued requests while a receiver
// goroutine forwards every message (and the final error) to Run. Both end
// when the stream's context is cancelled or the stream fails.
func (s *GRPCSource) runStream(st *grpcStream) {
	report := func(m streamMsg) {
		select {
		case s.events <- m:
		case <-s.baseCtx.Done():
		}
	}
	conn, err := s.conn(st.ds.Addr)
	if err != nil {
		report(streamMsg{st: st.ds, err: err})
		return
	}
	client := cdcpb.NewChangeDataClient(conn)
	var stream changeDataStream
	if st.ds.V1 {
		stream, err = client.EventFeed(st.ctx)
	} else {
		ctx := metadata.AppendToOutgoingContext(st.ctx, featuresKey, streamMultiplexing)
		stream, err = client.EventFeedV2(ctx)
	}
	if err != nil {
		report(streamMsg{st: st.ds, err: err})
		return
	}
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			ev, err := stream.Recv()
			if err != nil {
				if st.ctx.Err() == nil {
					report(streamMsg{st: st.ds, err: err})
				}
				return
			}
			// LP19: the receiver waits while the queue holds its bound, so
			// gRPC flow control stops the store instead of the heap growing.
			n := EventHeapBytes(ev)
			charged, ok := s.queue.admit(st.ctx, n)
			if !ok {
				return
			}
			select {
			case s.events <- streamMsg{st: st.ds, ev: ev, bytes: n, charged: charged}:
			case <-s.baseCtx.Done():
				s.queue.done(n, charged)
			}
		}
	}()
	defer func() { <-recvDone }()
	for {
		select {
		case <-st.ctx.Done():
			return
		case <-recvDone:
			return
		case <-st.sendWake:
		}
		for _, req := range st.takeQueue() {
			if err := stream.Send(req); err != nil {
				if errors.Is(err, io.EOF) {
					// The server ended the stream: Recv returns the real
					// status (e.g. Unimplemented) and reports it.
					<-recvDone
					return
				}
				if st.ctx.Err() == nil {
					report(streamMsg{st: st.ds, err: fmt.Errorf("send to store %s: %w", st.ds.Addr, err)})
				}
				st.cancel()
				return
			}
		}
	}
}
