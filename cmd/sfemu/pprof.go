package main

import (
	"fmt"

	"github.com/searchfabric/sfemu/emulator/httpapi"
)

// pprofEnabled decides --pprof (H14): "auto" serves /debug/pprof/ only on a
// loopback HTTP listener, since profiles show code paths and the command
// line; "on" and "off" choose explicitly.
func pprofEnabled(mode, httpAddr string) (bool, error) {
	switch mode {
	case "", "auto":
		return httpapi.IsLoopback(httpAddr), nil
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("--pprof %q: want auto, on or off", mode)
}
