#!/usr/bin/env bash
# Creates <repo>/.venv-index: the Python of the index worker (worker/index_worker.py), which builds
# the index types @lancedb/lancedb cannot (IVF_SQ, IVF_HNSW_FLAT, NGRAM, ZONEMAP, BLOOMFILTER, RTREE)
# with pylance. It runs no user code. Pinned: pylance, the pyarrow it reads with, and the
# lance-namespace client it opens tables through.
# Idempotent (scripts/lib/pinned-venv.sh): when the venv was set up with the pins below, it does nothing.
#   --optional   (npm install, npm start) without a Python 3.10 or newer, say what is missing and
#                succeed: the service then answers those index types with a 406 that says how to enable them.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LANCE_NS_INDEX_VENV:-$REPO/.venv-index}"

REQUIREMENTS="pylance==14.0.2
pyarrow==25.0.1
lance-namespace==0.13.0"

optional=false
[ "${1:-}" = "--optional" ] && optional=true

if $optional; then
  python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
    echo "index worker: no Python 3.10+ with venv as '$python'; IVF_SQ, IVF_HNSW_FLAT, NGRAM, ZONEMAP, BLOOMFILTER and RTREE indexes will answer 406 until 'bash scripts/install-index-worker.sh' has run" >&2
    exit 0
  fi
fi

# shellcheck source=lib/pinned-venv.sh
source "$REPO/scripts/lib/pinned-venv.sh"
if ! ensure_pinned_venv "$VENV" "$REQUIREMENTS" "index worker's Python packages"; then
  $optional || exit 1
  echo "index worker: installing its Python packages failed; those index types answer 406 until 'bash scripts/install-index-worker.sh' succeeds" >&2
fi
