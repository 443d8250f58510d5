package emulator

import (
	"time"

	"github.com/searchfabric/sfemu/internal/cputime"
)

// processCPU is the CPU time (user + system) the process has used, so a
// benchmark can report CPU per row, which a loaded machine distorts less
// than wall-clock rows/s.
func processCPU() time.Duration { return cputime.Process() }
