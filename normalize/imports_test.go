package normalize

import (
	"go/build"
	"strings"
	"testing"
)

// TestNormalizeImportsOnlyTheSeam: the bridge reads the runtime's output
// through minicdc's own types (specs/minicdc.md M12), so its production
// code imports no upstream package (nor grpc: the gRPC sink is package
// grpcsink). Test files may.
func TestNormalizeImportsOnlyTheSeam(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/searchfabric/sfemu/upstream/") || strings.HasPrefix(imp, "github.com/pingcap/") || strings.HasPrefix(imp, "google.golang.org/grpc") {
			t.Errorf("normalize imports %s (rule M12: consumers of the runtime import no upstream package)", imp)
		}
	}
}
