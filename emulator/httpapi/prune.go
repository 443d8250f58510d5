package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Fields that do not apply are left out of the JSON (H4): a zero that means
// "not applicable" (vector_dim on an INT field) reads like a fact, while a
// zero that is a fact (tombstone_count 0) stays. protojson can only emit
// every field or none of the zero ones, so the body is marshalled with every
// field and the fields an omitRule names are then cut from it, walking the
// JSON beside the message it came from.

// omitRule reports whether field fd of message m does not apply.
type omitRule func(m protoreflect.Message, fd protoreflect.FieldDescriptor) bool

// rules maps a message type to its rule.
type rules map[protoreflect.FullName]omitRule

var (
	fieldDesc     = (&apiv1.Field{}).ProtoReflect().Descriptor()
	searchHitDesc = (&apiv1.SearchHit{}).ProtoReflect().Descriptor()

	// defaultRules hold for every response.
	defaultRules = rules{fieldDesc.FullName(): fieldRule}
)

// fieldRule: vector_dim and vector_metric describe VECTOR fields only;
// source_column_id is 0 for a synthetic field, which has no column.
func fieldRule(m protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
	f := m.Interface().(*apiv1.Field)
	switch fd.Name() {
	case "vector_dim", "vector_metric":
		return f.GetType() != apiv1.FieldType_FIELD_TYPE_VECTOR
	case "source_column_id":
		return f.GetSourceColumnId() == 0
	}
	return false
}

// searchRules are the default rules plus those of a search request's hits:
// text_score without a text leg, vector_distance without a vector leg, and
// fields when the request asked for keys only.
func searchRules(req *apiv1.SearchRequest) rules {
	out := rules{}
	for k, v := range defaultRules {
		out[k] = v
	}
	noText, noVector, keysOnly := req.GetText() == nil, req.GetVector() == nil, req.GetKeysOnly()
	out[searchHitDesc.FullName()] = func(_ protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
		switch fd.Name() {
		case "text_score":
			return noText
		case "vector_distance":
			return noVector
		case "fields":
			return keysOnly
		}
		return false
	}
	return out
}

// pruner cuts the fields its rules name from protojson output.
type pruner struct {
	rules rules
	memo  map[protoreflect.FullName]bool
}

// prune returns b (protojson of m, proto field names) without the fields
// that do not apply.
func prune(b []byte, m protoreflect.Message, r rules) ([]byte, error) {
	p := &pruner{rules: r, memo: map[protoreflect.FullName]bool{}}
	if !p.needs(m.Descriptor()) {
		return b, nil
	}
	return p.message(b, m)
}

// needs reports whether a message of type md, or one nested in it, has a
// rule; other subtrees are copied as they are.
func (p *pruner) needs(md protoreflect.MessageDescriptor) bool {
	if v, ok := p.memo[md.FullName()]; ok {
		return v
	}
	p.memo[md.FullName()] = false // a recursive type is decided by its other fields
	need := p.rules[md.FullName()] != nil
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		need = false // well-known types have their own JSON forms
	} else {
		fields := md.Fields()
		for i := 0; i < fields.Len() && !need; i++ {
			if sub := messageOf(fields.Get(i)); sub != nil && p.needs(sub) {
				need = true
			}
		}
	}
	p.memo[md.FullName()] = need
	return need
}

// messageOf is the message type a field holds (its value type for a map),
// or nil.
func messageOf(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		return fd.Message()
	}
	return nil
}

func (p *pruner) message(b []byte, m protoreflect.Message) ([]byte, error) {
	md := m.Descriptor()
	rule := p.rules[md.FullName()]
	var out bytes.Buffer
	out.WriteByte('{')
	n := 0
	err := eachMember(b, func(key string, v json.RawMessage) error {
		fd := md.Fields().ByName(protoreflect.Name(key))
		if fd == nil {
			fd = md.Fields().ByJSONName(key)
		}
		if fd != nil && rule != nil && rule(m, fd) {
			return nil
		}
		if fd != nil {
			var err error
			if v, err = p.field(v, m, fd); err != nil {
				return err
			}
		}
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		writeKey(&out, key)
		out.Write(v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func (p *pruner) field(v json.RawMessage, m protoreflect.Message, fd protoreflect.FieldDescriptor) (json.RawMessage, error) {
	sub := messageOf(fd)
	if sub == nil || !p.needs(sub) || bytes.Equal(v, []byte("null")) {
		return v, nil
	}
	switch {
	case fd.IsMap():
		if fd.MapKey().Kind() != protoreflect.StringKind {
			return v, nil
		}
		mp := m.Get(fd).Map()
		var out bytes.Buffer
		out.WriteByte('{')
		n := 0
		err := eachMember(v, func(key string, ev json.RawMessage) error {
			mv := mp.Get(protoreflect.ValueOfString(key).MapKey())
			if mv.IsValid() {
				var err error
				if ev, err = p.message(ev, mv.Message()); err != nil {
					return err
				}
			}
			if n > 0 {
				out.WriteByte(',')
			}
			n++
			writeKey(&out, key)
			out.Write(ev)
			return nil
		})
		out.WriteByte('}')
		return out.Bytes(), err
	case fd.IsList():
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		list := m.Get(fd).List()
		if len(items) != list.Len() {
			return nil, fmt.Errorf("pruning %s: %d JSON items for %d values", fd.FullName(), len(items), list.Len())
		}
		var out bytes.Buffer
		out.WriteByte('[')
		for i, it := range items {
			pv, err := p.message(it, list.Get(i).Message())
			if err != nil {
				return nil, err
			}
			if i > 0 {
				out.WriteByte(',')
			}
			out.Write(pv)
		}
		out.WriteByte(']')
		return out.Bytes(), nil
	}
	return p.message(v, m.Get(fd).Message())
}

// eachMember calls f for the members of the JSON object b, in order.
func eachMember(b []byte, f func(key string, v json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("pruning: want a JSON object, got %v (%v)", tok, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if err := f(key, v); err != nil {
			return err
		}
	}
	return nil
}

func writeKey(out *bytes.Buffer, key string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(key)         // a string always encodes
	out.Truncate(out.Len() - 1) // Encode's newline
	out.WriteByte(':')
}
