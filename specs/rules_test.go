// Package specs holds the normative specs (*.md) and the checks that keep
// their rule ids honest: ids are unique across specs, every rule is cited by
// a test, and every cited id exists (specs/README.md describes the scheme).
package specs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// retired maps the prefixes renamed when ids became unique (issue 14) to
// their new names, so a citation written from memory gets told where its
// rule went instead of silently citing nothing.
var retired = map[string]string{
	"T-S": "TXT-S", "T-A": "TXT-A", "T-P": "TXT-P",
	"V-M": "VEC-M", "V-S": "VEC-S", "V-E": "VEC-E", "V-H": "VEC-H", "V-P": "VEC-P", "V-C": "VEC-C",
	"S-": "SRC-",
}

// rulebook is every rule of every spec.
type rulebook struct {
	specOf   map[string]string // id -> spec file
	order    []string          // ids in spec order (spec files sorted)
	prefixes map[string]string // prefix -> spec file
}

func loadRules(t *testing.T) rulebook {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	files = specFiles(files)
	rb := rulebook{specOf: map[string]string{}, prefixes: map[string]string{}}
	var dups []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range definitions(string(b)) {
			if other, ok := rb.specOf[id]; ok {
				dups = append(dups, fmt.Sprintf("%s defined in %s and %s", id, other, f))
				continue
			}
			rb.specOf[id] = f
			rb.order = append(rb.order, id)
			p, _, _ := splitID(id)
			rb.prefixes[p] = f
		}
	}
	if len(rb.order) == 0 {
		t.Fatal("no rule definitions found in specs/*.md")
	}
	if len(dups) > 0 {
		t.Fatalf("rule ids defined twice:\n  %s", strings.Join(dups, "\n  "))
	}
	return rb
}

// specFiles drops README.md: it describes the scheme (and names retired
// ids on purpose), it defines no rules.
func specFiles(files []string) []string {
	out := files[:0:0]
	for _, f := range files {
		if f != "README.md" {
			out = append(out, f)
		}
	}
	return out
}

func (rb rulebook) known() map[string]bool {
	k := make(map[string]bool, len(rb.specOf))
	for id := range rb.specOf {
		k[id] = true
	}
	return k
}

// sourceFile is one file the checks read, with its path from the repo root.
type sourceFile struct {
	path string
	text string
	test bool // a *_test.go or a testdata script: its citations count as coverage
}

// repoFiles reads every Go file and every testdata/*.txt script of the
// module (fuzz corpora, hidden directories and build output excluded).
func repoFiles(t *testing.T) []sourceFile {
	t.Helper()
	var out []sourceFile
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "fuzz" || name == "bin" || name == "var" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		inTestdata := strings.Contains(filepath.ToSlash(path), "/testdata/")
		isGo := strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".pb.go")
		isScript := inTestdata && strings.HasSuffix(name, ".txt")
		if !isGo && !isScript {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		out = append(out, sourceFile{
			path: filepath.ToSlash(rel),
			text: string(b),
			test: isScript || strings.HasSuffix(name, "_test.go"),
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRuleIDsUniqueAcrossSpecs: no id is defined twice, and no two specs
// share the leading letters of a prefix (specs/README.md).
func TestRuleIDsUniqueAcrossSpecs(t *testing.T) {
	rb := loadRules(t) // fails on an id defined twice
	famSpec := map[string]string{}
	var bad []string
	prefixes := make([]string, 0, len(rb.prefixes))
	for p := range rb.prefixes {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	for _, p := range prefixes {
		f, spec := family(p), rb.prefixes[p]
		if other, ok := famSpec[f]; ok && other != spec {
			bad = append(bad, fmt.Sprintf("prefix %s (%s) shares its letters %q with a prefix of %s", p, spec, f, other))
			continue
		}
		famSpec[f] = spec
	}
	for p := range rb.prefixes {
		if _, ok := retired[p]; ok {
			bad = append(bad, fmt.Sprintf("prefix %s (%s) was retired; pick another", p, rb.prefixes[p]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("rule prefixes collide (see specs/README.md):\n  %s", strings.Join(bad, "\n  "))
	}
}

// TestEveryRuleIsCitedByATest: each rule defined in specs/ is named by at
// least one test (a test name, a comment in a *_test.go, or a case of a
// testdata script).
func TestEveryRuleIsCitedByATest(t *testing.T) {
	rb := loadRules(t)
	known := rb.known()
	cited := map[string]bool{}
	for _, f := range repoFiles(t) {
		if !f.test {
			continue
		}
		for _, id := range citations(f.text, known) {
			cited[id] = true
		}
	}
	bySpec := map[string][]string{}
	var specs []string
	n := 0
	for _, id := range rb.order {
		if cited[id] {
			continue
		}
		s := rb.specOf[id]
		if bySpec[s] == nil {
			specs = append(specs, s)
		}
		bySpec[s] = append(bySpec[s], id)
		n++
	}
	if n > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%d rules are cited by no test (name the rule in the test that fails when it is broken: a test name, `// rule X12` near the assertion, or `# X12` in a testdata script):\n", n)
		for _, s := range specs {
			fmt.Fprintf(&b, "  %s: %s\n", s, strings.Join(bySpec[s], " "))
		}
		t.Fatal(b.String())
	}
}

// TestCitationsNameDefinedRules: an id with a known prefix must be defined,
// in tests, testdata scripts, code comments and the specs' own prose; an id
// with a retired prefix names its new prefix.
func TestCitationsNameDefinedRules(t *testing.T) {
	rb := loadRules(t)
	known := rb.known()
	var bad []string
	check := func(path, text string) {
		for i, line := range strings.Split(text, "\n") {
			for _, id := range citations(line, known) {
				if known[id] {
					continue
				}
				p, n, sfx := splitID(id)
				if to, ok := retired[p]; ok {
					bad = append(bad, fmt.Sprintf("%s:%d: %s was renamed to %s%d%s", path, i+1, id, to, n, sfx))
					continue
				}
				if spec, ok := rb.prefixes[p]; ok {
					bad = append(bad, fmt.Sprintf("%s:%d: %s is not defined in %s", path, i+1, id, spec))
				}
			}
		}
	}
	for _, f := range repoFiles(t) {
		check(f.path, f.text)
	}
	mds, _ := filepath.Glob("*.md")
	for _, f := range specFiles(mds) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check("specs/"+f, string(b))
	}
	if len(bad) > 0 {
		t.Fatalf("%d citations name no rule:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
}
