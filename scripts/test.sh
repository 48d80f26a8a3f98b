#!/usr/bin/env bash
# The whole test suite: checks formatting and lint rules, installs what the tiers need (Node
# packages, Node 24 itself among them, Debian's radosgw for the S3 tier, Debian's chromium for the
# console's browser tests, a Python venv with the real clients, another with geneva for the UDF
# worker, one with pylance for the index worker, one with PySpark and lance-spark's jars), then runs every tier under vitest on Node 24.
#   npm test                       everything
#   npm test -- test/http          only some files (arguments go to vitest)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/node ] && [ -d node_modules/@lancedb/lancedb ] || npm install --no-audit --no-fund
# The suite runs on the project's Node (24 LTS, the devDependency `node`), whatever the system's is:
# npm puts node_modules/.bin first on PATH for `npm test`; this does the same when run directly.
export PATH="$PWD/node_modules/.bin:$PATH"
case "$(node -v)" in
  v2[2-9].*|v[3-9][0-9].*) echo "tests run on Node $(node -v)" ;;
  *) echo "Node $(node -v) is too old: the service needs Node 22 or newer (npm install brings Node 24)" >&2; exit 1 ;;
esac
# Formatting, import order and lint rules (biome.jsonc), before the long installs: a second, and the
# first thing to fail. `npm run format` fixes the first two.
npm run lint --silent
bash scripts/install-s3-test-deps.sh
bash scripts/install-browser-test-deps.sh
[ -x scripts/install-python-test-deps.sh ] && bash scripts/install-python-test-deps.sh
# The UDF worker's Python (geneva), which the Python UDF and Geneva tests need.
bash scripts/install-udf-worker.sh
# The index worker's Python (pylance), which builds the index types @lancedb/lancedb cannot.
bash scripts/install-index-worker.sh
# PySpark and lance-spark's jars (Java 17 and Maven from Debian when missing), for the Spark client test.
bash scripts/install-spark-test-deps.sh
npx tsc -p tsconfig.json --noEmit
npx tsc -p ui/tsconfig.json --noEmit
# The layers import one way: no module may reach itself through its imports.
npx tsx scripts/import-cycles.ts src
exec npx vitest run "$@"
