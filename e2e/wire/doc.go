// Package wire holds the end-to-end fault tests over real gRPC (issue 9):
// the embedded fake cluster and its SQL front serve PD, TiKV and ChangeData
// on loopback; the adapter reads them through the real PD client,
// client-go and logpuller.GRPCSource, then minicdc, the mounter and the
// normalize bridge feed the emulator. Each test injects one fault
// (region split and merge mid-transaction, leader move, store down and
// back, stream reset, duplicate delivery, an abandoned lock, an
// epoch_not_match storm, an error kind the pinned proto does not know)
// into a running multi-region workload and then checks the emulator's
// collections against the upstream snapshot at the final resolved ts,
// together with the delivery invariants of specs/wire-faults.md (W-n).
//
// The package has no non-test code; run it with
//
//	go test ./e2e/wire/ -count=1 -v
package wire
