package adapter

// PhaseHook is told of the adapter's long phases so the binary can show
// them (the status page's adapter state and progress, specs/sfemu-run.md
// SR13). The initial snapshot calls Snapshotting with its progress while
// it runs (from any goroutine, as often as it likes) and Streaming once the
// stream took over. Calls must not block: the binary only records them.
type PhaseHook interface {
	Snapshotting(p PhaseProgress)
	Streaming()
}

// PhaseProgress is a phase's progress: Done of Total in Unit (e.g. rows).
// Total 0 means not known yet.
type PhaseProgress struct {
	// What names the work, e.g. "snapshot of demo.products".
	What  string
	Unit  string
	Done  float64
	Total float64
}
