package pd

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/tikv/client-go/v2/config"
	pdclient "github.com/tikv/pd/client"
)

// Security is the TLS configuration of the connection to a cluster (P20):
// PEM files as TiCDC's --ca, --cert and --key, used for PD, TiKV (the KV
// store's snapshot reads and lock resolution) and the log puller's
// change-data streams alike. The zero value is plaintext.
type Security struct {
	CAPath, CertPath, KeyPath string
}

// Enabled reports whether any file is set.
func (s Security) Enabled() bool { return s.CAPath != "" || s.CertPath != "" || s.KeyPath != "" }

// TLSConfig checks the files and returns the client TLS configuration
// (nil, nil when s is the zero value). The CA is required; the certificate
// and key go together (mutual TLS). Every error names the file and what is
// wrong with it, so a bad certificate is a clear startup error instead of a
// handshake failure later.
func (s Security) TLSConfig() (*tls.Config, error) {
	if !s.Enabled() {
		return nil, nil
	}
	if s.CAPath == "" {
		return nil, errors.New("pd: TLS needs --ca (the CA certificate that signed the cluster's certificates); --cert and --key alone are not enough")
	}
	if (s.CertPath == "") != (s.KeyPath == "") {
		return nil, fmt.Errorf("pd: TLS: --cert and --key go together (got cert %q, key %q)", s.CertPath, s.KeyPath)
	}
	caPEM, err := os.ReadFile(s.CAPath)
	if err != nil {
		return nil, fmt.Errorf("pd: TLS: CA file %s: %w", s.CAPath, err)
	}
	pool := x509.NewCertPool()
	if err := addPEMCerts(pool, caPEM); err != nil {
		return nil, fmt.Errorf("pd: TLS: CA file %s: %w", s.CAPath, err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if s.CertPath != "" {
		if _, err := os.Stat(s.CertPath); err != nil {
			return nil, fmt.Errorf("pd: TLS: certificate file %s: %w", s.CertPath, err)
		}
		if _, err := os.Stat(s.KeyPath); err != nil {
			return nil, fmt.Errorf("pd: TLS: key file %s: %w", s.KeyPath, err)
		}
		pair, err := tls.LoadX509KeyPair(s.CertPath, s.KeyPath)
		if err != nil {
			return nil, fmt.Errorf("pd: TLS: certificate %s with key %s: %w", s.CertPath, s.KeyPath, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// addPEMCerts adds every certificate of a PEM file to pool; a file
// without one, or with an unparsable one, is an error.
func addPEMCerts(pool *x509.CertPool, data []byte) error {
	n := 0
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate in the file")
	}
	return nil
}

func (s Security) pdOption() pdclient.SecurityOption {
	return pdclient.SecurityOption{CAPath: s.CAPath, CertPath: s.CertPath, KeyPath: s.KeyPath}
}

func (s Security) clientGo() config.Security {
	return config.NewSecurity(s.CAPath, s.CertPath, s.KeyPath, nil)
}
