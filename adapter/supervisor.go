package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/searchfabric/sfemu/emulator"
	"github.com/searchfabric/sfemu/normalize"
)

// Supervisor owns the running adapter and reports when it stops. A
// table-set change (CREATE/DROP/RENAME of a filtered table, TRUNCATE
// TABLE, ADD/DROP/TRUNCATE PARTITION) no longer stops the adapter: it is
// followed in place (specs/tableset.md LT2, minicdc M50-M54), so every
// stop of the runtime stops the supervisor: Done is closed and Err
// returns the error (M48).
type Supervisor struct {
	mu  sync.Mutex
	cur *Adapter
	err error

	closing  chan struct{}
	done     chan struct{} // closed when the supervisor stopped on its own
	loopDone chan struct{}
	once     sync.Once
}

// StartSupervisor starts an adapter (Start) and supervises it. log
// receives one line per table-set change the adapter follows (Config.Log
// when that is nil; nil discards). ctx must live as long as the
// supervisor.
func StartSupervisor(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config, log io.Writer) (*Supervisor, error) {
	if log == nil {
		log = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = log
	}
	a, err := Start(ctx, up, emu, cfg)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{cur: a,
		closing: make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{})}
	go s.loop()
	return s, nil
}

// Adapter returns the supervised adapter.
func (s *Supervisor) Adapter() *Adapter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Done is closed when the adapter stopped on its own (a fatal error or a
// cancelled context).
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Err returns the error that stopped the supervisor, or nil.
func (s *Supervisor) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Supervisor) loop() {
	defer close(s.loopDone)
	a := s.Adapter()
	select {
	case <-s.closing:
		return
	case <-a.Done():
	}
	err := a.Close()
	var change *normalize.TableSetChangedError
	if errors.As(err, &change) {
		// The live table set takes every change from the bridge (LT2): a
		// change reaching here is a bug, not a reason to restart.
		err = fmt.Errorf("adapter: a table-set change was not followed in place: %w", err)
	}
	s.stop(err)
}

func (s *Supervisor) stop(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.done)
}

// Close stops the supervision and the running adapter. It returns the
// error that stopped the supervisor, else the adapter's close error. It
// is idempotent.
func (s *Supervisor) Close() error {
	s.once.Do(func() { close(s.closing) })
	<-s.loopDone
	if err := s.Err(); err != nil {
		return err
	}
	return s.Adapter().Close()
}
