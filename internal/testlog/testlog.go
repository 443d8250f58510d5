// Package testlog quiets the PD client's and client-go's logs in tests.
// Both log every connection step at INFO through pingcap/log's global
// logger, which buries test failures; a test binary that starts them calls
// Quiet from its TestMain. SFEMU_GRPC_TEST_LOG=<level> (e.g. info) shows
// them again.
package testlog

import (
	"os"

	"github.com/pingcap/log"
)

// Quiet sets pingcap/log's global level to SFEMU_GRPC_TEST_LOG, or to
// fatal when that is unset.
func Quiet() {
	level := os.Getenv("SFEMU_GRPC_TEST_LOG")
	if level == "" {
		level = "fatal"
	}
	if lg, props, err := log.InitLogger(&log.Config{Level: level}); err == nil {
		log.ReplaceGlobals(lg, props)
	}
}
