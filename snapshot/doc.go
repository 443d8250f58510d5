// Package snapshot reads the tables an adapter mirrors at one snapshot ts
// S, before the stream starts at S: the initial load (specs/sfemu-run.md
// SN1-SN12). A table's record span is split at the region boundaries into
// ranges; several ranges are scanned in parallel (Config.Concurrency), each
// in bounded chunks charged to the adapter's memory quota; each chunk is
// handed to a Writer (the adapter decodes it with the mounter and the
// schema at S and ingests it through normalize's snapshot path) and, once
// acknowledged, recorded in the State, which is saved beside the
// emulator's data so a stopped snapshot resumes with the ranges not yet
// acknowledged.
//
//	plan.go      the plan and its progress (pure): ranges, acks, pending
//	progress.go  counters, rates and ETAs for the terminal and /v1/progress
//	run.go       the runner: workers, chunks, quota, saves
//	store.go     the state file
package snapshot
