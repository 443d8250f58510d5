// Package testpki generates, for one test, a CA, a server certificate for
// 127.0.0.1 and a client certificate signed by it, written as PEM files:
// the TLS paths (PD, TiKV, the log puller, the binary's --ca/--cert/--key)
// are tested against the embedded servers without certificates kept in
// the repository.
package testpki

import (
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
	"testing"
	"time"
)

// PKI is one test's certificates. The paths are PEM files in a TempDir.
type PKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string

	server tls.Certificate
	pool   *x509.CertPool
}

// New generates the certificates (Ed25519 keys) into t.TempDir().
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{pool: x509.NewCertPool()}
	serial := int64(1)
	issue := func(tmpl, parent *x509.Certificate, parentKey ed25519.PrivateKey) (*x509.Certificate, ed25519.PrivateKey, []byte, []byte) {
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
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ca, caKey, caPEM, _ := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "sfemu test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil)
	p.pool.AddCert(ca)
	p.CA = write("ca.pem", caPEM)
	_, _, sc, sk := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "tikv"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, ca, caKey)
	p.ServerCert, p.ServerKey = write("server.pem", sc), write("server-key.pem", sk)
	_, _, cc, ck := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "sfemu"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey)
	p.ClientCert, p.ClientKey = write("client.pem", cc), write("client-key.pem", ck)
	var err error
	if p.server, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	return p
}

// ServerTLS asks for mutual TLS, as a cluster with security enabled does.
func (p *PKI) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}
