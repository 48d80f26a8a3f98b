#!/usr/bin/env bash
# Creates <repo>/.venv with the pinned Python packages the real-client tests use (pylance's REST
# namespace client, the lance-namespace interface and its generated client, LanceDB, Daft with its
# Lance reader, pyarrow, pytest) and the fuzzing of the served OpenAPI document (schemathesis).
# pyarrow stays below 26 because daft 0.7 requires it.
# Idempotent: when the venv's stamp file matches the pins below, it does nothing.
# PYTHON picks the interpreter that creates the venv (default python3).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"
STAMP="$VENV/.python-test-deps.stamp"
PYTHON="${PYTHON:-python3}"

# The exact pins, one a line; the stamp holds the same text once they are installed.
REQUIREMENTS="pylance==14.0.2
lance-namespace==0.13.0
pyarrow==25.0.1
pytest==9.2.0
schemathesis==4.32.5
lancedb==0.40.0
daft==0.7.26
daft-lance==0.6.0"

# Fast path: the venv works and was last set up with exactly these pins.
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$REQUIREMENTS" ] && "$VENV/bin/python" -c '' 2>/dev/null; then
  exit 0
fi

if ! "$VENV/bin/python" -c '' 2>/dev/null; then
  echo "creating the Python test venv at $VENV" >&2
  "$PYTHON" -m venv --clear "$VENV"
fi

rm -f "$STAMP"
REQ_FILE="$(mktemp)"
trap 'rm -f "$REQ_FILE"' EXIT
printf '%s\n' "$REQUIREMENTS" >"$REQ_FILE"
echo "installing Python test dependencies into $VENV (one time)" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ_FILE" >&2

# Check that what is installed is exactly what was pinned before writing the stamp.
"$VENV/bin/python" - "$REQ_FILE" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

bad = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have != want:
        bad.append(f"{name}: want {want}, have {have}")
if bad:
    sys.exit("pinned Python test dependencies did not install as pinned: " + "; ".join(bad))
PY

printf '%s' "$REQUIREMENTS" >"$STAMP"
