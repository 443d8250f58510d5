#!/usr/bin/env bash
# Runs each fuzz target for a bounded time (FUZZTIME, default 10s). New
# crashers land in the package's testdata/fuzz/<Target>/ and must be committed
# as regression inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
fail=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($FUZZTIME)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
      echo "fuzz: $pkg $target FAILED" >&2
      fail=1
    fi
  done
done
exit $fail
