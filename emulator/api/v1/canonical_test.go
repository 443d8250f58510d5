package apiv1

import (
	"math/rand"
	"os"
	"strconv"
	"testing"
)

func TestPartitionNameRoundTrip(t *testing.T) {
	cases := []struct {
		ks   uint32
		id   int64
		want string
	}{{0, 42, "table:42"}, {7, 42, "keyspace:7/table:42"}}
	for _, c := range cases {
		got := PartitionName(c.ks, c.id)
		if got != c.want {
			t.Fatalf("PartitionName(%d,%d)=%q want %q", c.ks, c.id, got, c.want)
		}
		ks, id, err := ParsePartitionName(got)
		if err != nil || ks != c.ks || id != c.id {
			t.Fatalf("Parse(%q)=%d,%d,%v", got, ks, id, err)
		}
	}
	for _, bad := range []string{"", "table:", "table:0", "table:-1", "table:01", "keyspace:0/table:1", "keyspace:1", "keyspace:1/tab:2", "t:1", "table:1x"} {
		if _, _, err := ParsePartitionName(bad); err == nil {
			t.Fatalf("ParsePartitionName(%q) accepted", bad)
		}
	}
}

func TestKeyJoinSplitE14(t *testing.T) {
	if JoinKey([]string{"a,b"}) != "a,b" {
		t.Fatal("single component must not be escaped")
	}
	if got := JoinKey([]string{"a,b", `c\`, ""}); got != `a\,b,c\\,` {
		t.Fatalf("JoinKey=%q", got)
	}
	seed := int64(1)
	if s := os.Getenv("SFEMU_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	r := rand.New(rand.NewSource(seed))
	alphabet := []byte{'a', ',', '\\', 'z'}
	for i := 0; i < 2000; i++ {
		n := 1 + r.Intn(4)
		comps := make([]string, n)
		for j := range comps {
			b := make([]byte, r.Intn(5))
			for k := range b {
				b[k] = alphabet[r.Intn(len(alphabet))]
			}
			comps[j] = string(b)
		}
		got, err := SplitKey(JoinKey(comps), n)
		if err != nil {
			t.Fatalf("seed %d: split(%q): %v", seed, JoinKey(comps), err)
		}
		for j := range comps {
			if got[j] != comps[j] {
				t.Fatalf("seed %d: round trip %q -> %q", seed, comps, got)
			}
		}
	}
}

func TestEncodePrimaryKey(t *testing.T) {
	def := &CollectionDefinition{Name: "c", PrimaryKey: []string{"id", "name"}}
	key, err := EncodePrimaryKey(def, map[string]*Value{
		"id":   {Kind: &Value_Int64Value{Int64Value: -3}},
		"name": {Kind: &Value_StringValue{StringValue: "x,y"}},
	})
	if err != nil || key != `-3,x\,y` {
		t.Fatalf("key=%q err=%v", key, err)
	}
	if _, err := EncodePrimaryKey(def, map[string]*Value{"id": {Kind: &Value_Int64Value{Int64Value: 1}}}); err == nil {
		t.Fatal("missing pk field accepted")
	}
	if _, err := EncodePrimaryKey(def, map[string]*Value{"id": {Kind: &Value_NullValue{NullValue: true}}, "name": {Kind: &Value_StringValue{}}}); err == nil {
		t.Fatal("null pk accepted")
	}
}

func FuzzSplitKey(f *testing.F) {
	f.Add(`a\,b,c`, 2)
	f.Fuzz(func(t *testing.T, key string, n int) {
		if n < 1 || n > 8 {
			return
		}
		comps, err := SplitKey(key, n)
		if err != nil {
			return
		}
		if JoinKey(comps) != key {
			t.Fatalf("split/join not canonical: %q -> %q -> %q", key, comps, JoinKey(comps))
		}
	})
}

func FuzzParsePartitionName(f *testing.F) {
	f.Add("keyspace:1/table:2")
	f.Fuzz(func(t *testing.T, s string) {
		ks, id, err := ParsePartitionName(s)
		if err != nil {
			return
		}
		if PartitionName(ks, id) != s {
			t.Fatalf("non-canonical accepted: %q", s)
		}
	})
}
