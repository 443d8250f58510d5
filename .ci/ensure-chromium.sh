#!/usr/bin/env bash
# The status page's browser test (cmd/sfemu TestStatusPageInBrowser) drives
# Debian's chromium. make test calls this first so a fresh machine needs no
# manual step; it installs only when chromium is missing.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  echo "make test: installing Debian's chromium for the status page's browser test"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
