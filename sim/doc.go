// Package sim is the deterministic simulator of the whole pipeline
// (specs/sim.md): the fake cluster with its SQL front and CDC feed, the
// log puller's driver and core (fakeupstream.Source), the schema store,
// the Mini-CDC runtime, the normalize bridge and the emulator on its
// bbolt storage, all real code, driven from one goroutine under a virtual
// clock. One seed decides the SQL workload, the fault schedule, the feed's
// delivery order, when time passes and when the invariants are checked;
// Run returns a trace hash that the same seed reproduces exactly.
package sim
