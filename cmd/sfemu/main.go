// Command sfemu runs the search-fabric emulator with its embedded Mini-CDC
// adapter.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help") {
		fmt.Println("usage: sfemu run   (embedded upstream + demo workload + emulator)")
		return
	}
	fmt.Println("sfemu run: plan")
	fmt.Println("  1. start the embedded TiKV-style cluster (fakeupstream) with a real clock")
	fmt.Println("  2. create the demo schema and start the demo workload")
	fmt.Println("  3. start the Mini-CDC adapter from the emulator's stored progress")
	fmt.Println("  4. serve the emulator's HTTP API on 127.0.0.1:8080 and gRPC on 127.0.0.1:9090")
	fmt.Println("the runtime is not wired yet; this build only prints its plan")
}
