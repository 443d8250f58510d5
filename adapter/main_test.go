package adapter

import (
	"os"
	"testing"

	"github.com/searchfabric/sfemu/internal/testlog"
)

// TestMain quiets the PD client's and client-go's logs (testlog).
func TestMain(m *testing.M) {
	testlog.Quiet()
	os.Exit(m.Run())
}
