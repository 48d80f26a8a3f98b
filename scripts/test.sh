#!/usr/bin/env bash
# The whole test suite: installs what the tiers need (Node packages, Debian's radosgw for the S3
# tier, a Python venv with pylance for the real-client tier), then runs every tier under vitest.
#   npm test                       everything
#   npm test -- test/http          only some files (arguments go to vitest)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules/@lancedb/lancedb ] || npm install --no-audit --no-fund
bash scripts/install-s3-test-deps.sh
[ -x scripts/install-python-test-deps.sh ] && bash scripts/install-python-test-deps.sh
npx tsc -p tsconfig.json --noEmit
# The layers import one way: no module may reach itself through its imports.
npx tsx scripts/import-cycles.ts src
exec npx vitest run "$@"
