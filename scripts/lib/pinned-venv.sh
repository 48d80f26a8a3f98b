# Sourced by the scripts that install a pinned Python venv (install-python-test-deps.sh,
# install-udf-worker.sh). ensure_pinned_venv VENV REQUIREMENTS LABEL creates VENV if needed and
# installs exactly REQUIREMENTS (one `name==version` a line) into it. Idempotent: a stamp file in
# the venv holds the pins it was last set up with, and matching pins make it return at once.
# PYTHON picks the interpreter that creates the venv (default python3).

ensure_pinned_venv() {
  local venv="$1" requirements="$2" label="$3"
  local stamp="$venv/.pinned-requirements.stamp"
  local python="${PYTHON:-python3}"

  # Fast path: the venv works and was last set up with exactly these pins.
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$requirements" ] && "$venv/bin/python" -c '' 2>/dev/null; then
    return 0
  fi
  if ! "$venv/bin/python" -c '' 2>/dev/null; then
    echo "creating the $label venv at $venv" >&2
    "$python" -m venv --clear "$venv"
  fi

  rm -f "$stamp"
  local req_file
  req_file="$(mktemp)"
  printf '%s\n' "$requirements" >"$req_file"
  echo "installing the $label into $venv (one time)" >&2
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req_file" >&2; then
    rm -f "$req_file"
    return 1
  fi

  # Check that what is installed is exactly what was pinned before writing the stamp.
  if ! "$venv/bin/python" - "$req_file" "$label" <<'PY'
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
    sys.exit(f"the pinned {sys.argv[2]} did not install as pinned: " + "; ".join(bad))
PY
  then
    rm -f "$req_file"
    return 1
  fi
  rm -f "$req_file"
  printf '%s' "$requirements" >"$stamp"
}
