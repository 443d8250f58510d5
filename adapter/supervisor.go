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

// Restart records one restart of the adapter after a table-set change.
type Restart struct {
	// Change is the bridge's report: which DDL, which ids.
	Change *normalize.TableSetChangedError
	// StartTs and Epoch are where the new adapter resumed.
	StartTs, Epoch uint64
}

// Supervisor owns the running adapter. The Mini-CDC runtime follows a
// fixed table set (M6); when a DDL changes the physical tables of a
// mirrored table (TRUNCATE TABLE, ADD/DROP/TRUNCATE PARTITION), the
// normalize bridge stops it with a *normalize.TableSetChangedError after
// mapping the new partitions (normalization N34, N35). The supervisor then
// closes that adapter and starts a new one over the new table set from the
// emulator's stored progress (the change's FinishedTs) with the next epoch
// (M48). Any other fatal error stops the supervisor: Done is closed and
// Err returns it.
type Supervisor struct {
	up  *Upstream
	emu *emulator.Emulator
	cfg Config
	ctx context.Context
	log io.Writer

	mu       sync.Mutex
	cur      *Adapter
	restarts []Restart
	err      error

	closing  chan struct{}
	done     chan struct{} // closed when the supervisor stopped on its own
	loopDone chan struct{}
	once     sync.Once
}

// StartSupervisor starts an adapter (Start) and supervises it.
// log receives one line per restart (nil discards). ctx is used for
// starting adapters, also later ones: pass a context that lives as long as
// the supervisor.
func StartSupervisor(ctx context.Context, up *Upstream, emu *emulator.Emulator, cfg Config, log io.Writer) (*Supervisor, error) {
	a, err := Start(ctx, up, emu, cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	s := &Supervisor{up: up, emu: emu, cfg: cfg, ctx: ctx, log: log, cur: a,
		closing: make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{})}
	go s.loop()
	return s, nil
}

// Adapter returns the adapter running now (it changes at each restart).
func (s *Supervisor) Adapter() *Adapter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Restarts returns the table-set restarts so far.
func (s *Supervisor) Restarts() []Restart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Restart(nil), s.restarts...)
}

// Done is closed when the supervisor stopped because of an error that is
// not a table-set change (or a failed restart).
func (s *Supervisor) Done() <-chan struct{} { return s.done }

// Err returns the error that stopped the supervisor, or nil.
func (s *Supervisor) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Supervisor) loop() {
	defer close(s.loopDone)
	for {
		a := s.Adapter()
		select {
		case <-s.closing:
			return
		case <-a.Done():
		}
		err := a.Close()
		var change *normalize.TableSetChangedError
		if !errors.As(err, &change) {
			s.stop(err)
			return
		}
		select {
		case <-s.closing:
			return // Close owns the shutdown; the old adapter is closed
		default:
		}
		fmt.Fprintf(s.log, "sfemu: DDL job %d (%s) at ts %d changed the tables of collection %q (added %v, dropped %v; %q): restarting the adapter with physical tables %v\n",
			change.JobID, change.Action, change.FinishedTs, change.Collection, change.Added, change.Dropped, change.Query, change.NewTableIDs)
		next, err := startWithTables(s.ctx, s.up, s.emu, s.cfg, change.Tables)
		if err != nil {
			s.stop(fmt.Errorf("adapter: restarting the adapter after DDL job %d at %d changed the table set: %w", change.JobID, change.FinishedTs, err))
			return
		}
		s.mu.Lock()
		s.cur = next
		s.restarts = append(s.restarts, Restart{Change: change, StartTs: next.Resume.StartTs, Epoch: next.Resume.Epoch})
		s.mu.Unlock()
	}
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
