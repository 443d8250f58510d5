#!/usr/bin/env bash
# Runs every Go benchmark once and prints a table: package, benchmark,
# ns/op, B/op, allocs/op and any custom metric (rows/s, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-1s}
mkdir -p .bench
out=.bench/bench-$(date +%Y%m%d-%H%M%S).txt
echo "running benchmarks (benchtime=$BENCHTIME); raw output in $out" >&2
go test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" ./... 2>&1 | tee "$out" >&2
echo
awk '
/^pkg: / { pkg=$2; sub(/^github.com\/searchfabric\/sfemu\//, "", pkg) }
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name)
  line=sprintf("%-28s %-52s", pkg, name)
  for (i=3; i<NF; i+=2) line=line sprintf(" %14s %-10s", $i, $(i+1))
  print line
}' "$out"
