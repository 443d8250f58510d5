package grpcsink_test

import (
	"github.com/searchfabric/sfemu/normalize"
	"github.com/searchfabric/sfemu/normalize/grpcsink"
)

// The bridge writes through it (the end-to-end gRPC test in normalize
// drives it against a served emulator).
var _ normalize.Sink = (*grpcsink.Sink)(nil)
