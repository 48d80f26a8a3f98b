#!/usr/bin/env bash
# Creates <repo>/.venv with the pinned Python packages the real-client tests use (pylance's REST
# namespace client, the lance-namespace interface and its generated client, LanceDB, Daft with its
# Lance reader, pyarrow, pytest) and the fuzzing of the served OpenAPI document (schemathesis).
# pyarrow stays below 26 because daft 0.7 requires it.
# Idempotent (scripts/lib/pinned-venv.sh): when the venv was set up with the pins below, it does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"

# The exact pins, one a line; the stamp holds the same text once they are installed.
REQUIREMENTS="pylance==14.0.2
lance-namespace==0.13.0
pyarrow==25.0.1
pytest==9.2.0
schemathesis==4.32.5
lancedb==0.40.0
daft==0.7.26
daft-lance==0.6.0"

# shellcheck source=lib/pinned-venv.sh
source "$REPO/scripts/lib/pinned-venv.sh"
ensure_pinned_venv "$VENV" "$REQUIREMENTS" "Python test dependencies"
