// Package adapter wires the whole sfemu data path: an upstream (the
// embedded fake cluster with its SQL front, read in process or over its
// PD/TiKV gRPC servers, or a real TiDB cluster through PD), the schema
// store, the Mini-CDC runtime with the mounter, the normalize bridge and
// the emulator. `sfemu run` and the end-to-end tests build the same
// pipeline through it. Rules: specs/sfemu-run.md (SR*).
//
// One job per file:
//
//	upstream*.go   the three kinds of upstream (Mode): in process, embedded
//	               over gRPC, real cluster
//	tables.go      the table set: resolved from the upstream, aligned with
//	               what the collections map
//	adapter.go     Start and the running Adapter: the startup phases in order
//	resume.go      phase 1, the resume point (the bridge reads stored progress)
//	gc.go          phase 2, the service GC safe point hold (over PD)
//	schemastore.go phase 3, the schema store on its own source
//	runtime.go     phase 4, the Mini-CDC runtime on the tables' source
//	callback.go    phase 5, the bridge as the runtime's callback chain
//	supervisor.go  restarts the adapter when a DDL changes the table set
//
// The consistency check is package verify; the GC hold's renewal loop is
// upstream/pd's Hold.
package adapter
