package sim

import (
	"github.com/searchfabric/sfemu/minicdc"
	"github.com/searchfabric/sfemu/normalize"
)

// Mutant is a deliberate bug the simulator must catch (SIM20).
type Mutant string

const (
	MutantNone           Mutant = ""
	MutantAnonymousFatal Mutant = "anonymous-fatal"
	MutantLostAck        Mutant = "lost-ack"
)

// mutantState tracks whether the run's mutant is armed and applied.
type mutantState struct {
	armed   bool
	applied bool
}

// fault arms the mutant when a fault begins.
func (m *mutantState) fault(w *world, k Kind) {}

// arm reports whether the mutant applies now (once).
func (m *mutantState) arm(w *world) bool {
	if m.applied {
		return false
	}
	m.applied = true
	return true
}

func (w *world) mutateSink(s normalize.Sink) normalize.Sink     { return s }
func (w *world) mutateTap(cb minicdc.Callback) minicdc.Callback { return cb }
