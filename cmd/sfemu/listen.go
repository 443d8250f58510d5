package main

import (
	"errors"
	"fmt"

	"github.com/searchfabric/sfemu/emulator/httpapi"
	"github.com/searchfabric/sfemu/upstream/pd"
)

// checkListen refuses to bind the HTTP or gRPC API to a non-loopback
// address without --token (SR21): without a token anyone who can reach the
// port may call /admin/restart-adapter, /admin/check and /upstream/sql,
// which is safe only while the port is reachable from this host alone.
// --insecure-listen is the explicit way to do it anyway.
func checkListen(cfg runConfig) error {
	if cfg.Token != "" || cfg.InsecureListen {
		return nil
	}
	for _, l := range []struct{ flag, addr string }{{"--http", cfg.HTTP}, {"--grpc", cfg.GRPC}} {
		if l.flag == "--grpc" && l.addr == "" {
			continue // gRPC off
		}
		addr, err := httpapi.LoopbackAddr(l.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", l.flag, err)
		}
		if !httpapi.IsLoopback(addr) {
			return fmt.Errorf("%s %s is not a loopback address and there is no --token: anyone who can reach it could call the admin endpoints (/admin/restart-adapter, /admin/check, /upstream/sql) and the APIs; set --token (required for a non-loopback listen address), or pass --insecure-listen to bind it without one", l.flag, addr)
		}
	}
	return nil
}

// security is the TLS configuration of the connection to a real cluster
// (--ca, --cert, --key; SR22).
func (c runConfig) security() pd.Security {
	return pd.Security{CAPath: c.CA, CertPath: c.Cert, KeyPath: c.Key}
}

// checkSecurity refuses TLS flags outside the real-cluster mode (the
// embedded cluster's servers are on loopback and plaintext) and checks
// the files before anything starts: a missing or bad one is named (SR22).
func checkSecurity(cfg runConfig) error {
	sec := cfg.security()
	if !sec.Enabled() {
		return nil
	}
	if cfg.PD == "" {
		return errors.New("--ca, --cert and --key secure the connection to a real cluster: they need --pd")
	}
	if _, err := sec.TLSConfig(); err != nil {
		return err
	}
	return nil
}
