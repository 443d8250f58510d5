package pipeline

import (
	"os"
	"testing"

	"github.com/pingcap/log"
)

// TestMain keeps the PD client's and client-go's INFO logs (wire mode) out
// of test output (SFEMU_GRPC_TEST_LOG=info shows them).
func TestMain(m *testing.M) {
	level := os.Getenv("SFEMU_GRPC_TEST_LOG")
	if level == "" {
		level = "fatal"
	}
	if lg, props, err := log.InitLogger(&log.Config{Level: level}); err == nil {
		log.ReplaceGlobals(lg, props)
	}
	os.Exit(m.Run())
}
