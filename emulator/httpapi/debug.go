package httpapi

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// registerPprof serves Go's profiles under /debug/pprof/ (H14), behind the
// same token as every other path. The binary turns it on by default only on
// a loopback listener: a profile shows code paths and command lines.
func registerPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", named("pprof", pprof.Index)) // also the named profiles (heap, goroutine, ...)
	mux.HandleFunc("/debug/pprof/cmdline", named("pprof", pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", named("pprof", pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", named("pprof", pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", named("pprof", pprof.Trace))
}

// runtimeCollectors are the standard go_* and process_* families (H12). They
// live in the API's own registry, so Options.Gatherer must not carry them
// too (a family gathered twice is an error).
func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}
