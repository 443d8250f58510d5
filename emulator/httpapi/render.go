package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/searchfabric/sfemu/emulator/contract"
)

// Readable answers (H4, H13): every JSON body leaves out the fields that do
// not apply, and ?pretty (or ?pretty=true) indents it. The request's view —
// whether to indent, and which omit rules hold — travels on the
// statusWriter every handler writes through.

// view is how one request's JSON bodies are rendered.
type view struct {
	pretty bool
	rules  rules // nil: defaultRules
}

// parsePretty reads ?pretty: absent or false is compact; present with no
// value, or true, indents.
func parsePretty(r *http.Request) (bool, *contract.Error) {
	vs, ok := r.URL.Query()["pretty"]
	if !ok {
		return false, nil
	}
	v := vs[len(vs)-1]
	if v == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &contract.Error{Reason: ReasonMalformedRequest, Field: "pretty", Expected: "empty, true or false", Actual: v, Message: "bad query parameter"}
	}
	return b, nil
}

func viewOf(w http.ResponseWriter) view {
	if sw, ok := w.(*statusWriter); ok {
		return sw.view
	}
	return view{}
}

// setRules replaces the omit rules of the request w answers.
func setRules(w http.ResponseWriter, r rules) {
	if sw, ok := w.(*statusWriter); ok {
		sw.view.rules = r
	}
}

// renderMessage is m's protojson, pruned and, when asked, indented.
func renderMessage(w http.ResponseWriter, m proto.Message) ([]byte, error) {
	b, err := marshal.Marshal(m)
	if err != nil {
		return nil, err
	}
	v := viewOf(w)
	r := v.rules
	if r == nil {
		r = defaultRules
	}
	if b, err = prune(b, m.ProtoReflect(), r); err != nil {
		return nil, err
	}
	return indent(v, b), nil
}

// renderJSON is v as JSON for the request w answers (for bodies that are
// not proto messages).
func renderJSON(w http.ResponseWriter, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return indent(viewOf(w), b), nil
}

func indent(v view, b []byte) []byte {
	if !v.pretty {
		return b
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return b
	}
	return out.Bytes()
}
