#!/usr/bin/env bash
# Installs Debian's Ceph radosgw (a real S3 server with atomic If-None-Match puts and STS) for the S3 test tier.
# Idempotent: does nothing when the binaries are already there.
set -euo pipefail
if command -v radosgw >/dev/null && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null \
   && command -v uuidgen >/dev/null && command -v radosgw-admin >/dev/null; then
  exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
echo "installing radosgw, ceph-mon, ceph-osd from Debian (one time)" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends radosgw ceph-mon ceph-osd uuid-runtime >/dev/null
