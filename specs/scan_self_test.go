package specs

import (
	"reflect"
	"testing"
)

// TestScannerReadsDefinitionsAndCitations pins what the checks count as a
// definition and as a citation, so a change of the scanner that would let
// offenders through shows up here first.
func TestScannerReadsDefinitionsAndCitations(t *testing.T) {
	spec := "- **M1** one\n- **T-X2 Title.** two\n- **G31-G34** four:\n  **G32** x; **G33** y\n- **E51a** z\nprose cites M1 and **not bold** N9"
	if got, want := definitions(spec), []string{"M1", "T-X2", "G31", "G32", "G33", "E51a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("definitions = %v, want %v", got, want)
	}
	known := map[string]bool{}
	for _, id := range []string{"M1", "M2", "M3", "M12", "M15", "M40", "E2", "E23", "E26", "E32", "E33", "E34", "E35", "E51a",
		"SS10", "SS11", "SS12", "S1", "TXT-S1", "MY-P1", "TSO-1", "V2", "V10", "K2"} {
		known[id] = true
	}
	cases := []struct {
		text string
		want []string
	}{
		{"func TestM12_Thing(t *testing.T)", []string{"M12"}},
		{"func TestM15_StartupOrderAndM40_ShutdownOrder(", []string{"M15", "M40"}},
		{"func TestCreateCollectionE23E26(", []string{"E23", "E26"}},
		{"func TestFailedModalityStallsE51a(", []string{"E51a"}},
		{"// rules SS10-SS12", []string{"SS10", "SS11", "SS12"}},
		{"func TestIngestAdmissionE32toE35(", []string{"E32", "E33", "E34", "E35"}},
		{"# M1, M3: script case", []string{"M1", "M3"}},
		{"// TXT-S1 and MY-P1 and TSO-1", []string{"MY-P1", "TSO-1", "TXT-S1"}},
		{"func TestE2E_Wire(", nil},                   // E2E is no citation of E2
		{"HTTP2 SHA256", []string{"HTTP2", "SHA256"}}, // candidates; no spec has these prefixes
		{"0x9E3779B97F4A7C15", nil},                   // glued to digits
		{"h ^= (startTs + 0x632BE59BD9B4E019)", nil},  // hex constants
		{"handshakeV10 czNjcmV0", nil},                // inside words that are no test names
		{"// the M2s", []string{"M2"}},                // a plural is its rule
	}
	for _, c := range cases {
		if got := citations(c.text, known); !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("citations(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	if f := family("MY-P"); f != "MY" {
		t.Errorf("family(MY-P) = %q", f)
	}
	if p, n, s := splitID("E51a"); p != "E" || n != 51 || s != "a" {
		t.Errorf("splitID(E51a) = %q %d %q", p, n, s)
	}
}
