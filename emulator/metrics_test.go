package emulator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"testing"
)

// H12: sfemu_rejections_total is in the first scrape, before any rejection:
// every op starts with a zero series per contract reason.
func TestRejectionsInFirstScrape(t *testing.T) {
	e := openMem(t, Options{Clock: newFakeClock()})
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() != "sfemu_rejections_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Fatalf("rejection series %v = %v before any request", m.GetLabel(), v)
			}
			series++
		}
	}
	if want := len(rejectOps) * len(contractReasons); series != want {
		t.Fatalf("sfemu_rejections_total has %d series in the first scrape, want %d (ops x reasons)", series, want)
	}
}

// contractReasons lists every Reason constant of the contract package, so
// no reason is missing from the first scrape.
func TestContractReasonsComplete(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join("contract"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
						continue
					}
					for _, v := range vs.Values {
						if lit, ok := v.(*ast.BasicLit); ok {
							declared = append(declared, lit.Value[1:len(lit.Value)-1])
						}
					}
				}
			}
		}
	}
	var listed []string
	for _, r := range contractReasons {
		listed = append(listed, string(r))
	}
	sort.Strings(declared)
	sort.Strings(listed)
	if len(declared) == 0 || len(declared) != len(listed) {
		t.Fatalf("contract declares reasons %v; contractReasons lists %v", declared, listed)
	}
	for i := range declared {
		if declared[i] != listed[i] {
			t.Fatalf("contract declares reasons %v; contractReasons lists %v", declared, listed)
		}
	}
}
