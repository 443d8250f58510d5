package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pingcap/kvproto/pkg/tikvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// BatchCommands is client-go's default transport: a bidi stream of batches
// of (request id, request). Each inner request is handed to the unary
// handler of the same command and answered under its id, batch for batch.
// A command the fake does not serve ends the stream with Unimplemented,
// naming it, rather than hanging the caller. (G43)
func (t *tikvServer) BatchCommands(stream tikvpb.Tikv_BatchCommandsServer) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := t.down(); err != nil {
			return err
		}
		ids := req.GetRequestIds()
		reqs := req.GetRequests()
		if len(ids) != len(reqs) {
			return status.Errorf(codes.InvalidArgument, "batch has %d request ids for %d requests", len(ids), len(reqs))
		}
		resp := &tikvpb.BatchCommandsResponse{RequestIds: ids, Responses: make([]*tikvpb.BatchCommandsResponse_Response, len(reqs))}
		for i, r := range reqs {
			out, err := t.dispatch(ctx, r)
			if err != nil {
				return err
			}
			resp.Responses[i] = out
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (t *tikvServer) dispatch(ctx context.Context, r *tikvpb.BatchCommandsRequest_Request) (*tikvpb.BatchCommandsResponse_Response, error) {
	type R = tikvpb.BatchCommandsResponse_Response
	switch c := r.GetCmd().(type) {
	case *tikvpb.BatchCommandsRequest_Request_Get:
		x, err := t.KvGet(ctx, c.Get)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_Get{Get: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_BatchGet:
		x, err := t.KvBatchGet(ctx, c.BatchGet)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_BatchGet{BatchGet: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_Scan:
		x, err := t.KvScan(ctx, c.Scan)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_Scan{Scan: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_ScanLock:
		x, err := t.KvScanLock(ctx, c.ScanLock)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_ScanLock{ScanLock: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_CheckTxnStatus:
		x, err := t.KvCheckTxnStatus(ctx, c.CheckTxnStatus)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_CheckTxnStatus{CheckTxnStatus: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_CheckSecondaryLocks:
		x, err := t.KvCheckSecondaryLocks(ctx, c.CheckSecondaryLocks)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_CheckSecondaryLocks{CheckSecondaryLocks: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_ResolveLock:
		x, err := t.KvResolveLock(ctx, c.ResolveLock)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_ResolveLock{ResolveLock: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_TxnHeartBeat:
		x, err := t.KvTxnHeartBeat(ctx, c.TxnHeartBeat)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_TxnHeartBeat{TxnHeartBeat: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_Prewrite:
		x, err := t.KvPrewrite(ctx, c.Prewrite)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_Prewrite{Prewrite: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_Commit:
		x, err := t.KvCommit(ctx, c.Commit)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_Commit{Commit: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_BatchRollback:
		x, err := t.KvBatchRollback(ctx, c.BatchRollback)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_BatchRollback{BatchRollback: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_Cleanup:
		x, err := t.KvCleanup(ctx, c.Cleanup)
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_Cleanup{Cleanup: x}}, err
	case *tikvpb.BatchCommandsRequest_Request_Empty:
		return &R{Cmd: &tikvpb.BatchCommandsResponse_Response_Empty{Empty: &tikvpb.BatchCommandsEmptyResponse{TestId: c.Empty.GetTestId()}}}, nil
	}
	err := status.Errorf(codes.Unimplemented, "fake tikv: batch command %T is not served", r.GetCmd())
	t.s.noteUnimplemented(fmt.Sprintf("/tikvpb.Tikv/BatchCommands(%T)", r.GetCmd()), err)
	return nil, err
}
