#!/usr/bin/env bash
# Creates <repo>/.venv-spark for the Spark real-client test (test/realclient/spark.test.ts): PySpark
# from PyPI (Spark 3.5 itself, in local mode) and, in .venv-spark/lance-spark-jars/, the jars of
# lance-spark (org.lance:lance-spark-3.5_2.12 from Maven Central) with the dependencies it needs
# beside Spark's own, fetched once by Maven so that a test run resolves nothing. Spark runs on the
# machine's Java 17 (Debian's, installed with Maven when missing).
# Idempotent: with the venv set up with the pins below and the jars fetched, it does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LANCE_NS_SPARK_VENV:-$REPO/.venv-spark}"

# PySpark matches the Spark that lance-spark 0.4.0 is built against (3.5.5).
REQUIREMENTS="pyspark==3.5.5"
LANCE_SPARK="org.lance:lance-spark-3.5_2.12:0.4.0"

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing Java 17 and Maven from Debian (one time)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless maven >/dev/null
fi

# shellcheck source=lib/pinned-venv.sh
source "$REPO/scripts/lib/pinned-venv.sh"
ensure_pinned_venv "$VENV" "$REQUIREMENTS" "Spark test dependencies"

JARS="$VENV/lance-spark-jars"
STAMP="$JARS/.fetched.stamp"
[ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$LANCE_SPARK" ] && exit 0

IFS=: read -r GROUP ARTIFACT VERSION <<<"$LANCE_SPARK"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# A pom that depends on lance-spark alone: Maven copies it and its runtime dependencies (Spark's
# own, `provided` there, stay out), from Maven Central only. lance-spark's parent pom pins Arrow to
# the version its Spark 3.5 build uses (15.0.2, which works beside Spark's own Arrow; lance-core's
# 18.3 does not), so it is imported to resolve as lance-spark's build does.
cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lance-namespace-service</groupId>
  <artifactId>spark-test-deps</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency><groupId>$GROUP</groupId><artifactId>lance-spark-root</artifactId><version>$VERSION</version><type>pom</type><scope>import</scope></dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency><groupId>$GROUP</groupId><artifactId>$ARTIFACT</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
POM
echo "fetching $LANCE_SPARK and its dependencies from Maven Central into $JARS (one time)" >&2
rm -rf "$JARS"
mvn -B -q -f "$WORK/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$JARS" >&2
[ -f "$JARS/$ARTIFACT-$VERSION.jar" ] || { echo "Maven did not fetch $LANCE_SPARK" >&2; exit 1; }
printf '%s' "$LANCE_SPARK" >"$STAMP"
