#!/usr/bin/env bash
# Runs the opt-in real-cluster suites against the embedded upstream (its
# PD/TiKV gRPC servers and MySQL front, started by sfemu-upstream, which sets
# SFEMU_TIDB_PD and SFEMU_TIDB_DSN for the command it runs). A suite that
# skipped here would prove nothing, so a skip fails the run.
set -euo pipefail
GO=${GO:-go}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$GO" run ./fakeupstream/mysqlfront/cmd/sfemu-upstream -- \
	"$GO" test -count=1 -run RealCluster -v ./upstream/pd ./adapter 2>&1 | tee "$out"
if grep -q -- '--- SKIP' "$out"; then
	echo "realcluster-selftest: a real-cluster test skipped although the embedded upstream was given" >&2
	exit 1
fi
if ! grep -q -- '--- PASS: TestRealCluster' "$out"; then
	echo "realcluster-selftest: no real-cluster test ran" >&2
	exit 1
fi
