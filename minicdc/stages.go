package minicdc

// StageObserver sees a resolved ts pass the runtime's stages, in order:
// a path's report (M26), the DDL-known ts that caps a checkpoint (M33,
// M36), then the checkpoint itself (OnCheckpoint). The difference between
// two stages for one ts is the time the runtime held it there; the
// adapter's lag benchmarks build their per-stage breakdown from it.
type StageObserver interface {
	// PathResolved: table's resolved ts reached ts and the fence has it.
	PathResolved(table int64, ts uint64)
	// DDLKnown: every DDL through ts has reached OnDDL (a poll raised
	// ddlKnown to ts).
	DDLKnown(ts uint64)
}
