package grpcserver

import (
	"os"
	"testing"

	"github.com/pingcap/log"
)

// TestMain keeps the PD client's and client-go's logs quiet: they log every
// connection step at INFO, which buries test failures. Set
// SFEMU_GRPC_TEST_LOG=info to see them.
func TestMain(m *testing.M) {
	level := os.Getenv("SFEMU_GRPC_TEST_LOG")
	if level == "" {
		level = "fatal"
	}
	lg, props, err := log.InitLogger(&log.Config{Level: level})
	if err == nil {
		log.ReplaceGlobals(lg, props)
	}
	os.Exit(m.Run())
}
