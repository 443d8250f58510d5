package mysqlfront

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/sqlfront"
)

// rule: MY-P7 — with a configured user and password, go-sql-driver logs
// in with them (mysql_native_password, also after its default plugin is
// switched); a wrong password, no password, root, or another user is ERR
// 1045 without naming the account.
func TestMYP7_ConfiguredPassword(t *testing.T) {
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 1})
	require.NoError(t, err)
	s, err := sqlfront.New(context.Background(), c)
	require.NoError(t, err)
	logs := &logSink{}
	srv, err := StartConfig(s, Config{Logf: logs.logf, User: "mirror", Password: "s3cret pass"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })

	try := func(dsn string) error {
		db, err := sql.Open("mysql", dsn)
		require.NoError(t, err)
		defer db.Close()
		var one int
		return db.QueryRowContext(testCtx(t), "SELECT 1").Scan(&one)
	}
	require.NoError(t, try(srv.DSN("")), "the configured account")
	require.NoError(t, try(fmt.Sprintf("mirror:s3cret pass@tcp(%s)/?allowNativePasswords=true", srv.Addr())))
	for name, dsn := range map[string]string{
		"wrong password": fmt.Sprintf("mirror:wrong@tcp(%s)/", srv.Addr()),
		"no password":    fmt.Sprintf("mirror@tcp(%s)/", srv.Addr()),
		"root":           fmt.Sprintf("root@tcp(%s)/", srv.Addr()),
		"root with it":   fmt.Sprintf("root:s3cret pass@tcp(%s)/", srv.Addr()),
	} {
		err := try(dsn)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1045 {
			t.Fatalf("%s: want ERR 1045, got %v", name, err)
		}
		if strings.Contains(me.Message, "accepts user") {
			t.Fatalf("%s: the refusal names the account: %s", name, me.Message)
		}
	}
}

// The scramble matches the protocol's definition on a known vector: an
// empty password answers nothing; a password answers 20 bytes that differ
// per salt.
func TestMYP7_NativeScramble(t *testing.T) {
	salt1, salt2 := []byte("abcdefghijklmnopqrst"), []byte("tsrqponmlkjihgfedcba")
	a, b := nativeScramble(salt1, "pw"), nativeScramble(salt2, "pw")
	if len(a) != 20 || string(a) == string(b) {
		t.Fatalf("scramble %x %x", a, b)
	}
	cfg := Config{Password: "pw"}
	if !cfg.authOK("root", a, salt1) || cfg.authOK("root", a, salt2) || cfg.authOK("root", nil, salt1) {
		t.Fatal("authOK")
	}
	if (&Config{}).authOK("root", a, salt1) || !(&Config{}).authOK("root", nil, salt1) {
		t.Fatal("no password configured: only root with an empty password")
	}
}
