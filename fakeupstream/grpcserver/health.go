package grpcserver

import (
	"context"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// storeHealth is a TiKV store's gRPC health service. client-go probes it
// to decide whether a store whose requests failed is reachable: a store
// that is down in the topology answers NOT_SERVING, so client-go stops
// routing to it and fails over to the new leader at once. (G30)
type storeHealth struct {
	healthpb.UnimplementedHealthServer
	s       *Servers
	storeID uint64
}

func (h *storeHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {
	case <-h.s.done:
		return nil, status.Error(codes.Unavailable, "fake tikv: server closing")
	default:
	}
	st := healthpb.HealthCheckResponse_SERVING
	if !h.s.storeUp(h.storeID) {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

func (h *storeHealth) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return nil, err
	}
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{"": r}}, nil
}
