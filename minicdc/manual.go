package minicdc

import "time"

// ManualControl returns o with the control loop switched off: the caller
// drives the DDL poller and the checkpoint coalescer itself, one round per
// ControlStep call, on its own goroutine. The deterministic simulator
// (sim/, specs/sim.md) uses it so that when a DDL or a checkpoint happens
// is a function of its seed, not of goroutine scheduling.
func ManualControl(o Options) Options {
	o.manualControl = true
	return o
}

// ControlStep runs one round of the control loop (poll DDL, then consider
// a checkpoint) on the caller's goroutine. more reports a full DDL batch
// (call again at once); wait > 0 is how long until a coalesced checkpoint
// is due. A fatal error stops the runtime exactly as in the loop (M34) and
// is returned. Only for a runtime started with ManualControl, and never
// concurrently with the source's deliveries.
func (r *Runtime) ControlStep() (more bool, wait time.Duration, err error) {
	if !r.opts.manualControl {
		return false, 0, &FatalError{Trigger: TriggerConfig, Err: errorString("ControlStep on a runtime whose control loop runs")}
	}
	if r.owner.stopped() {
		return false, 0, r.owner.get()
	}
	if r.runCtx.Err() != nil {
		return false, 0, nil
	}
	more, wait, err = r.ctl.step()
	if err != nil {
		r.owner.fail(err)
		return false, 0, r.owner.get()
	}
	return more, wait, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }
