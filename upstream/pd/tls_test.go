package pd_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/sfemu/fakeupstream"
	"github.com/searchfabric/sfemu/fakeupstream/cdcfeed"
	"github.com/searchfabric/sfemu/fakeupstream/grpcserver"
	"github.com/searchfabric/sfemu/upstream/kvevent"
	"github.com/searchfabric/sfemu/upstream/logpuller"
	"github.com/searchfabric/sfemu/upstream/pd"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/codec"
	"github.com/searchfabric/sfemu/upstream/tidbcodec/tablecodec"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, generated for one test and written as PEM files.
type testPKI struct {
	dir                       string
	ca, serverCert, serverKey string
	clientCert, clientKey     string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	serial := int64(1)
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey ed25519.PrivateKey) (*x509.Certificate, ed25519.PrivateKey, []byte, []byte) {
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		kd, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
	}
	write := func(name string, b []byte) string {
		path := filepath.Join(p.dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ca, caKey, caPEM, _ := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "sfemu test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil)
	p.pool.AddCert(ca)
	p.ca = write("ca.pem", caPEM)
	_, _, sc, sk := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "tikv"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, ca, caKey)
	p.serverCert, p.serverKey = write("server.pem", sc), write("server-key.pem", sk)
	_, _, cc, ck := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "sfemu"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey)
	p.clientCert, p.clientKey = write("client.pem", cc), write("client-key.pem", ck)
	var err error
	if p.server, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverTLS asks for mutual TLS, as a cluster with security enabled does.
func (p *testPKI) serverTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

func (p *testPKI) security() pd.Security {
	return pd.Security{CAPath: p.ca, CertPath: p.clientCert, KeyPath: p.clientKey}
}

// rule: P20, G60 — against servers that require mutual TLS, the PD client
// (TSO, GC safe point), client-go (a snapshot read) and the log puller (a
// change-data stream delivering a row and resolved ts) all work with
// Security set; without it the connection is refused.
func TestP20_TLSEndToEnd(t *testing.T) {
	pki := newTestPKI(t)
	c, err := fakeupstream.New(fakeupstream.Config{Seed: 2, Stores: 2, RealClock: true, Feed: cdcfeed.Config{ResolvedTsIntervalMs: 20}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcserver.Start(c, grpcserver.Config{TLS: pki.serverTLS()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if !strings.HasPrefix(s.PDURL(), "https://") {
		t.Fatalf("PD URL %s", s.PDURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := pd.OpenUpstream(ctx, pd.Config{Endpoints: []string{s.PDAddr()}, Security: pki.security()})
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
	for name, sec := range map[string]pd.Security{"plaintext": {}, "no client certificate": {CAPath: pki.ca}} {
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
	pki := newTestPKI(t)
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
		"no CA":               {pd.Security{CertPath: pki.clientCert, KeyPath: pki.clientKey}, []string{"--ca"}},
		"cert without key":    {pd.Security{CAPath: pki.ca, CertPath: pki.clientCert}, []string{"--cert and --key go together"}},
		"missing cert":        {pd.Security{CAPath: pki.ca, CertPath: missing, KeyPath: pki.clientKey}, []string{"certificate file", missing}},
		"key of another cert": {pd.Security{CAPath: pki.ca, CertPath: pki.clientCert, KeyPath: pki.serverKey}, []string{pki.clientCert, pki.serverKey}},
		"cert is garbage":     {pd.Security{CAPath: pki.ca, CertPath: garbage, KeyPath: pki.clientKey}, []string{garbage}},
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
	if cfg, err := pki.security().TLSConfig(); err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("sound files: %v", err)
	}
}
