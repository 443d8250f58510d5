package sqlfront

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Issue 20 item 5: error texts name databases and tables by name, never by
// internal id (the MySQL front once answered an unknown table with "does
// not exist in database 102").
func TestUnknownTableErrorNamesTheDatabase(t *testing.T) {
	s, ss := newTestServer(t)
	mustExec(t, ss, "CREATE DATABASE shop")
	mustExec(t, ss, "CREATE TABLE shop.items (id BIGINT PRIMARY KEY)")
	snap, err := ReadTable(context.Background(), s.cluster, "shop", "items", now(t, s))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadTable(context.Background(), s.cluster, "shop", "nosuch", now(t, s))
	if err == nil || !strings.Contains(err.Error(), `table "nosuch" does not exist in database "shop"`) || strings.Contains(err.Error(), fmt.Sprint(snap.DBID)+" ") {
		t.Fatalf("unknown table: %v", err)
	}
	_, err = ss.Exec(context.Background(), "SELECT * FROM shop.nosuch")
	if err == nil || !strings.Contains(err.Error(), "shop.nosuch") {
		t.Fatalf("unknown table in a query: %v", err)
	}
}
