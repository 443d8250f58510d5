// Command sfemu-upstream runs the embedded upstream — the fake TiKV-style
// cluster with its PD/TiKV/CDC gRPC servers and a MySQL-protocol front —
// and prints the environment the opt-in real-cluster suites read:
//
//	SFEMU_TIDB_PD=127.0.0.1:PORT SFEMU_TIDB_DSN='root@tcp(127.0.0.1:PORT)/?interpolateParams=true'
//
// With a command after "--" it runs that command with the two variables
// set and exits with its status, so one line runs the suites:
//
//	go run ./fakeupstream/mysqlfront/cmd/sfemu-upstream -- go test -count=1 -run RealCluster ./upstream/pd ./adapter
//
// Without a command it serves until interrupted; any MySQL client can then
// connect (mysql -h 127.0.0.1 -P PORT -u root).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/searchfabric/sfemu/fakeupstream/mysqlfront"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("sfemu-upstream", flag.ContinueOnError)
	mysqlAddr := fs.String("mysql-addr", "127.0.0.1:0", "address of the MySQL front (port 0 picks one; TiDB's is 4000)")
	seed := fs.Int64("seed", 1, "seed of the cluster's random choices")
	lockTTL := fs.Duration("lock-ttl", 0, "TTL of the locks transactions write (0: the cluster's 3s); raise it for transactions that take longer from BEGIN to COMMIT, which the fake does not heartbeat")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	up, err := mysqlfront.StartEmbedded(ctx, mysqlfront.EmbeddedConfig{Seed: *seed, MySQLAddr: *mysqlAddr, LockTTL: *lockTTL})
	if err != nil {
		log.Printf("sfemu-upstream: %v", err)
		return 1
	}
	defer up.Close()
	fmt.Println(up.Env())
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		<-ctx.Done()
		return 0
	}
	cmd := exec.CommandContext(ctx, cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "SFEMU_TIDB_PD="+up.PDAddr(), "SFEMU_TIDB_DSN="+up.DSN())
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		log.Printf("sfemu-upstream: %s: %v", cmdArgs[0], err)
		return 1
	}
	return 0
}
