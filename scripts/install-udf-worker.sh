#!/usr/bin/env bash
# Creates <repo>/.venv-udf: the Python that runs Geneva UDFs for the service when `udf_execution`
# is enabled (src/engine/python-udf/, worker/udf_worker.py), and that the Geneva client tests run
# Geneva itself with. Pinned: geneva (its UDFs unpickle only where geneva is importable), the
# pylance that reads and writes the tables, pyarrow, and the lancedb / lance-namespace the
# Geneva client connects with; pytest for the client tests. Ray comes with geneva.
# Idempotent (scripts/lib/pinned-venv.sh): when the venv was set up with the pins below, it does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LANCE_NS_UDF_VENV:-$REPO/.venv-udf}"

REQUIREMENTS="geneva==0.17.0
pylance==14.0.2
pyarrow==25.0.1
lancedb==0.40.0
lance-namespace==0.13.0
pytest==9.2.0"

# shellcheck source=lib/pinned-venv.sh
source "$REPO/scripts/lib/pinned-venv.sh"
ensure_pinned_venv "$VENV" "$REQUIREMENTS" "UDF worker's Python packages"
