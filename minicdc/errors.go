package minicdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Trigger names what stopped the runtime (specs/minicdc.md M43). The string
// values are stable: logs, tests and the CLI print them.
type Trigger string

const (
	TriggerConfig           Trigger = "config"
	TriggerDependency       Trigger = "dependency"
	TriggerStartupReadiness Trigger = "startup-readiness"
	TriggerRegisterTable    Trigger = "register-table"
	TriggerStartupProbe     Trigger = "startup-probe"
	TriggerSubscribe        Trigger = "subscribe"
	TriggerInitialProgress  Trigger = "initial-progress"
	TriggerOrderingAnomaly  Trigger = "ordering-anomaly"
	TriggerSchemaReadiness  Trigger = "schema-readiness"
	TriggerSchemaLookup     Trigger = "schema-lookup"
	TriggerDecode           Trigger = "decode"
	TriggerOldValue         Trigger = "old-value"
	TriggerCallback         Trigger = "callback"
	TriggerReorderOverflow  Trigger = "reorder-overflow"
	TriggerDDLOrder         Trigger = "ddl-order"
	TriggerDDLFetchGC       Trigger = "ddl-fetch-gc"
	TriggerDDLFetch         Trigger = "ddl-fetch"
	TriggerDDLFetchRepeated Trigger = "ddl-fetch-repeated"
	TriggerSource           Trigger = "source"
)

// ErrReorderOverflow is the sentinel a callback wraps (errors.Is) when its
// bounded reorder buffer could not get a seal in time; the runtime then
// reports trigger reorder-overflow instead of the generic callback trigger
// (M14).
var ErrReorderOverflow = errors.New("reorder buffer overflow")

// ErrAnotherInstance is the cause of the dependency error returned when a
// runtime is already active in this process (M8).
var ErrAnotherInstance = errors.New("another Mini-CDC runtime is active in this process")

// FatalError is the one error that stopped a runtime: which trigger fired,
// for which table (0 when not table-specific), at which ts (0 when not
// applicable), and the underlying cause.
type FatalError struct {
	Trigger Trigger
	TableID int64
	Ts      uint64
	Err     error
}

func (e *FatalError) Error() string {
	var b strings.Builder
	b.WriteString("minicdc: ")
	b.WriteString(string(e.Trigger))
	if e.TableID != 0 {
		fmt.Fprintf(&b, " table %d", e.TableID)
	}
	if e.Ts != 0 {
		fmt.Fprintf(&b, " ts %d", e.Ts)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *FatalError) Unwrap() error { return e.Err }

func fatalf(trigger Trigger, table int64, ts uint64, format string, args ...any) *FatalError {
	return &FatalError{Trigger: trigger, TableID: table, Ts: ts, Err: fmt.Errorf(format, args...)}
}

// errOwner keeps the first fatal error and stops the runtime when it is
// recorded (M42). Later errors are dropped: they are usually consequences
// of the first (cancelled contexts, closed sources).
type errOwner struct {
	once   sync.Once
	failed atomic.Bool
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

func newErrOwner(cancel context.CancelFunc) *errOwner {
	return &errOwner{done: make(chan struct{}), cancel: cancel}
}

// fail records err if it is the first and cancels the root context. It
// reports whether err became the runtime's error. A nil err marks a clean
// stop (Close or a cancelled parent context): later errors are then
// consequences of the stop and are dropped as well.
func (o *errOwner) fail(err error) bool {
	first := false
	o.once.Do(func() {
		o.err = err
		o.failed.Store(true)
		first = true
		close(o.done)
		o.cancel()
	})
	return first
}

// stopped reports whether a fatal error was recorded.
func (o *errOwner) stopped() bool { return o.failed.Load() }

func (o *errOwner) get() error {
	if !o.failed.Load() {
		return nil
	}
	return o.err
}
