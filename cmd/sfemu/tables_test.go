package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// TF6: a bad filter rule in --tables is refused before anything starts
// (the PD address is never dialed), naming the rule and its offset.
func TestTF6_TablesFilterRefusedWithPosition(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetArgs([]string{"run", "--data-dir", t.TempDir(), "--pd", "127.0.0.1:1", "--tables", "shop.*,sh%p.a", "--pd-timeout", "30s"})
	cmd.SetOut(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--tables") || !strings.Contains(err.Error(), "rule 2, at offset 9") || strings.Contains(err.Error(), "PD") {
		t.Fatalf("want a --tables syntax error at rule 2 offset 9, got %v", err)
	}
}

// TF7: rules that only name plain tables are the fixed list of before;
// a pattern makes a filter resolved later.
func TestTF7_TablesParsing(t *testing.T) {
	refs, f, err := parseTables("`shop`.items, shop.orders")
	if err != nil || f != nil || fmt.Sprint(refs) != "[shop.items shop.orders]" {
		t.Fatalf("quoted plain list: %v %v %v", refs, f, err)
	}
	refs, f, err = parseTables("shop.*,!shop.audit")
	if err != nil || refs != nil || f == nil || !f.Match("shop", "x") || f.Match("shop", "audit") {
		t.Fatalf("filter: %v %v %v", refs, f, err)
	}
}
