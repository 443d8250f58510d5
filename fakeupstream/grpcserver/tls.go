package grpcserver

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLS (G60): with Config.TLS set, PD and every store serve TLS with that
// configuration (a server certificate; ClientCAs with
// RequireAndVerifyClientCert asks for mutual TLS, as a cluster with
// security enabled does), and PD announces https:// client URLs. It lets
// make test exercise the real-cluster mode's TLS path (the PD client,
// client-go and the log puller) against the embedded cluster.

// serverOptions are the extra options of every endpoint's server.
func (c *Config) serverOptions() []grpc.ServerOption {
	if c.TLS == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c.TLS))}
}

// urlScheme is the scheme of PD's announced URLs.
func (c *Config) urlScheme() string {
	if c.TLS != nil {
		return "https://"
	}
	return "http://"
}
