// Command sfemu runs the search-fabric emulator with its embedded Mini-CDC
// adapter. `sfemu run` (the default) starts an in-process TiKV-style
// cluster with a demo schema and workload, mirrors its tables into
// emulator collections through the Mini-CDC runtime, and serves the
// emulator's HTTP and gRPC APIs on loopback.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sfemu:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sfemu",
		Short: "search-fabric emulator with an embedded Mini-CDC adapter",
		Long: `sfemu mirrors TiDB tables into search collections: it pulls row changes from
TiKV's CDC protocol, decodes them with TiDB's schema history and feeds the
emulator's collections, which you query over HTTP or gRPC.

Without a subcommand it runs "sfemu run".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	run := newRunCmd()
	root.AddCommand(run, newSQLCmd())
	// `sfemu` alone behaves like `sfemu run` (with run's flags).
	root.Flags().AddFlagSet(run.Flags())
	root.RunE = run.RunE
	return root
}
