// Command sfemu runs the search-fabric emulator with its embedded Mini-CDC
// adapter. `sfemu run` (the default) starts an embedded TiKV-style cluster
// with its PD and TiKV gRPC servers on loopback, a demo schema and
// workload, mirrors its tables into emulator collections through the
// Mini-CDC runtime (reading the cluster over gRPC, as it reads a real
// one), and serves the emulator's HTTP and gRPC APIs on loopback.
// `sfemu run --pd ... --tables ...` mirrors tables of a real TiDB cluster.
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

Without a subcommand it runs "sfemu run": an embedded demo cluster, read
over its own PD and TiKV gRPC servers on loopback. "sfemu run --pd <addrs>
--tables db.t1,db.t2" mirrors tables of a real TiDB cluster instead. See
"sfemu run --help".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	run := newRunCmd()
	root.AddCommand(run, newSQLCmd(), newStatusCmd(), newVerifyCmd())
	// `sfemu` alone behaves like `sfemu run` (with run's flags).
	root.Flags().AddFlagSet(run.Flags())
	root.RunE = run.RunE
	return root
}
