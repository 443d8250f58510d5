package ddlmap

import (
	"go/build"
	"strings"
	"testing"
)

// TestDDLMapIsPure: the mapping imports no I/O or upstream package (it is a
// function of the DDL and the lineage, N28), only the runtime's types and
// the emulator's API and contract.
func TestDDLMapIsPure(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		switch {
		case imp == "github.com/searchfabric/sfemu/minicdc",
			imp == "github.com/searchfabric/sfemu/emulator/api/v1",
			imp == "github.com/searchfabric/sfemu/emulator/contract",
			!strings.Contains(imp, "."): // stdlib
		default:
			t.Errorf("ddlmap imports %s", imp)
		}
	}
	for _, imp := range pkg.Imports {
		if imp == "os" || imp == "net" || strings.HasPrefix(imp, "net/") {
			t.Errorf("ddlmap imports %s: it does no I/O", imp)
		}
	}
}
