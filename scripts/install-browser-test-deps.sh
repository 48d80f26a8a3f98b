#!/usr/bin/env bash
# Installs Debian's chromium for the console's browser tests (test/browser, driven by playwright-core).
# Idempotent: does nothing when the binary is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
echo "installing chromium from Debian (one time)" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
