package specs

// The scanner behind rules_test.go: it finds rule definitions in the specs
// and rule citations in any text. Kept apart from the checks so its own
// test (scan_self_test.go) can feed it small inputs.

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// idPattern is one rule id: a prefix (upper-case letters, optionally
// followed by dash-separated upper-case groups and/or a dash) and a number,
// optionally with one lower-case letter (E51a). specs/README.md lists the
// prefixes.
const idPattern = `[A-Z]+(?:-[A-Z]+)*-?[0-9]+[a-z]?`

var (
	// defRE finds an id written in bold: `**N30**`, `**T1 Streams.**`,
	// `**G31-G34**` (its first id; the inline bold ids define the rest).
	defRE = regexp.MustCompile(`\*\*(` + idPattern + `)`)
	// citeRE finds a candidate id anywhere; the checks around it decide.
	citeRE = regexp.MustCompile(idPattern)
	// rangeRE finds "X3-X7", "X3–X7", "X3..X7" and "E32toE35".
	rangeRE = regexp.MustCompile(`(` + idPattern + `)(?:-|–|\.\.|to)(` + idPattern + `)`)
)

// splitID splits an id into its prefix, number and letter suffix.
func splitID(id string) (prefix string, n int, suffix string) {
	end := len(id)
	if end > 0 && id[end-1] >= 'a' && id[end-1] <= 'z' {
		suffix = id[end-1:]
		end--
	}
	start := end
	for start > 0 && id[start-1] >= '0' && id[start-1] <= '9' {
		start--
	}
	n, _ = strconv.Atoi(id[start:end])
	return id[:start], n, suffix
}

// family is the prefix's leading letters: what must differ between specs
// ("MY" for MY-P, "TXT" for TXT-S, "MVCC" for MVCC-).
func family(prefix string) string {
	if i := strings.IndexByte(prefix, '-'); i >= 0 {
		return prefix[:i]
	}
	return prefix
}

// definitions returns the ids a spec defines, in order of first appearance.
func definitions(text string) []string {
	var ids []string
	seen := map[string]bool{}
	for _, m := range defRE.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			ids = append(ids, m[1])
		}
	}
	return ids
}

// citations returns the ids text cites, each once, sorted. A range whose two
// ends share a prefix cites every number between them. known tells which
// ids exist: an id with a letter suffix that does not exist is read without
// it ("M12s" cites M12), so that prose plurals do not count as ids.
// Candidates are ids not glued to a preceding upper-case letter or digit
// (HTTP2, SHA256 are no citations), except where one id directly follows
// another (TestCreateCollectionE23E26); a lower-case letter may precede
// (TestM12_..., TestFailedModalityStallsE51a). A candidate directly followed
// by an upper-case letter that starts neither a word nor another id ("E2E")
// is no citation.
func citations(text string, known map[string]bool) []string {
	set := map[string]bool{}
	locs := citeRE.FindAllStringIndex(text, -1)
	acceptedEnd := -1 // end of the last accepted candidate
	for _, l := range locs {
		start, end := l[0], l[1]
		id := text[start:end]
		glued := acceptedEnd == start
		if start > 0 && !glued {
			c := text[start-1]
			if c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				continue
			}
			// A letter-dash before means the candidate starts inside a
			// longer token the greedy regexp did not take whole.
			if c == '-' && start > 1 && text[start-2] >= 'A' && text[start-2] <= 'Z' {
				continue
			}
			// Glued to lower-case letters, an id counts only inside a
			// test's name (TestM12_...), not inside words like
			// handshakeV10 or base64 text.
			if c >= 'a' && c <= 'z' && !inTestName(text, start) {
				continue
			}
		}
		if end < len(text) {
			c := text[end]
			if c >= 'A' && c <= 'Z' {
				next := byte(0)
				if end+1 < len(text) {
					next = text[end+1]
				}
				startsWord := next >= 'a' && next <= 'z'
				startsID := citeRE.FindStringIndex(text[end:]) != nil && citeRE.FindStringIndex(text[end:])[0] == 0
				if !startsWord && !startsID {
					continue
				}
			}
		}
		acceptedEnd = end
		set[trimSuffix(id, known)] = true
	}
	for _, m := range rangeRE.FindAllStringSubmatch(text, -1) {
		p1, n1, _ := splitID(m[1])
		p2, n2, _ := splitID(m[2])
		if p1 != p2 || n2 <= n1 || n2-n1 > 100 {
			continue
		}
		if !set[trimSuffix(m[1], known)] || !set[trimSuffix(m[2], known)] {
			continue // an end was rejected above (glued, "E2E")
		}
		for n := n1; n <= n2; n++ {
			id := p1 + strconv.Itoa(n)
			if known[id] {
				set[id] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// inTestName reports whether the identifier around pos is a Test, Fuzz,
// Benchmark or Example function's name.
func inTestName(text string, pos int) bool {
	i := pos
	for i > 0 && isIdentByte(text[i-1]) {
		i--
	}
	w := text[i:pos]
	for _, p := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
		if strings.HasPrefix(w, p) {
			return true
		}
	}
	return false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func trimSuffix(id string, known map[string]bool) string {
	if _, _, sfx := splitID(id); sfx != "" && !known[id] {
		return id[:len(id)-1]
	}
	return id
}
