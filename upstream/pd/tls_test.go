package pd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/internal/testpki"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

func pkiSecurity(p *testpki.PKI) pd.Security {
	return pd.Security{CAPath: p.CA, CertPath: p.ClientCert, KeyPath: p.ClientKey}
}

// rule: P20, G60 — against servers that require mutual TLS, the PD client
// (TSO, GC safe point), client-go (a snapshot read) and the log puller (a
// change-data stream delivering a row and resolved ts) all work with
// Security set; without it the connection is refused.
func TestP20_TLSEndToEnd(t *testing.T) {
	pki := testpki.New(t)
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 2, Stores: 2, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{TLS: pki.ServerTLS()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if !strings.HasPrefix(s.PDURL(), "https://") {
		t.Fatalf("PD URL %s", s.PDURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := pd.OpenUpstream(ctx, pd.Config{Endpoints: []string{s.PDAddr()}, Security: pkiSecurity(pki)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	start, err := u.PD.CurrentTs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.GCSafePoint(ctx, u.PD.PD()); err != nil {
		t.Fatal(err)
	}
	key := tablecodec.EncodeIntRecordKey(nil, 3, 1)
	commit, err := c.Put(key, []byte("over tls"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := u.KV.Get(ctx, key, commit); err != nil || string(v) != "over tls" {
		t.Fatalf("snapshot read over TLS: %q %v", v, err)
	}
	src, err := u.NewSource(logpuller.TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := tablecodec.EncodeRecordPrefix(nil, 3)
	span := kvevent.Span{StartKey: codec.EncodeBytes(nil, p), EndKey: codec.EncodeBytes(nil, tablecodec.PrefixNext(p))}
	cons := &lastResolved{rows: make(chan int, 16), resolved: make(chan uint64, 1)}
	if err := src.Subscribe(ctx, 1, span, start, cons); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	select {
	case n := <-cons.rows:
		if n != 1 {
			t.Fatalf("%d rows", n)
		}
	case <-ctx.Done():
		t.Fatal("row never arrived over TLS")
	}
	for r := uint64(0); r < commit; {
		select {
		case r = <-cons.resolved:
		case <-ctx.Done():
			t.Fatal("resolved ts never passed the commit")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Plaintext, and TLS without a client certificate, are refused.
	for name, sec := range map[string]pd.Security{"plaintext": {}, "no client certificate": {CAPath: pki.CA}} {
		pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
		u2, err := pd.OpenUpstream(pctx, pd.Config{Endpoints: []string{s.PDAddr()}, Timeout: time.Second, Security: sec})
		pcancel()
		if err == nil {
			u2.Close()
			t.Fatalf("%s: connected to a server that requires mutual TLS", name)
		}
	}
}

// rule: P20 — a missing or bad file is a clear error naming it, before any
// connection is tried.
func TestP20_BadSecurityFiles(t *testing.T) {
	pki := testpki.New(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for name, tc := range map[string]struct {
		sec  pd.Security
		want []string
	}{
		"missing CA":          {pd.Security{CAPath: missing}, []string{"CA file", missing}},
		"CA not PEM":          {pd.Security{CAPath: garbage}, []string{"CA file", garbage, "no PEM certificate"}},
		"no CA":               {pd.Security{CertPath: pki.ClientCert, KeyPath: pki.ClientKey}, []string{"--ca"}},
		"cert without key":    {pd.Security{CAPath: pki.CA, CertPath: pki.ClientCert}, []string{"--cert and --key go together"}},
		"missing cert":        {pd.Security{CAPath: pki.CA, CertPath: missing, KeyPath: pki.ClientKey}, []string{"certificate file", missing}},
		"key of another cert": {pd.Security{CAPath: pki.CA, CertPath: pki.ClientCert, KeyPath: pki.ServerKey}, []string{pki.ClientCert, pki.ServerKey}},
		"cert is garbage":     {pd.Security{CAPath: pki.CA, CertPath: garbage, KeyPath: pki.ClientKey}, []string{garbage}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.sec.TLSConfig()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
			// pd.Open fails the same way, before dialing.
			if _, err := pd.Open(context.Background(), pd.Config{Endpoints: []string{"127.0.0.1:1"}, Security: tc.sec}); err == nil || !strings.Contains(err.Error(), tc.want[0]) {
				t.Errorf("Open: %v", err)
			}
		})
	}
	if cfg, err := pkiSecurity(pki).TLSConfig(); err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("sound files: %v", err)
	}
}
