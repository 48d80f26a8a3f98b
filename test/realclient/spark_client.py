"""Spark SQL through lance-spark against the service's REST namespace (test/realclient/spark.test.ts).

Spark 3.5 in local mode, bound to 127.0.0.1, with the catalog `lance` =
org.lance.spark.LanceNamespaceSparkCatalog (impl `rest`, uri LANCE_NS_URL) and lance-spark's jars
from LANCE_SPARK_JARS (scripts/install-spark-test-deps.sh fetches them). Runs the statements given
as a JSON list in argv[1], each to completion whatever the others did, and prints one JSON line: for
each statement its rows, or its error (the Java exception's message, which carries the service's
answer)."""

import glob
import json
import os
import shutil
import sys
import tempfile

from pyspark.sql import SparkSession


def error_of(e: Exception) -> str:
    """The first lines of a Spark or Java exception's message that say what went wrong."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    said = [line for line in lines if "Caused by" in line or "Exception" in line or "Error" in line or "error" in line][:6]
    return " | ".join(said or lines[:3])


def main() -> None:
    statements = json.loads(sys.argv[1])
    jars = sorted(glob.glob(os.path.join(os.environ["LANCE_SPARK_JARS"], "*.jar")))
    scratch = tempfile.mkdtemp(prefix="lance-ns-spark-")
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("lance-namespace-service-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.local.dir", scratch)
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.catalog.lance", "org.lance.spark.LanceNamespaceSparkCatalog")
        .config("spark.sql.catalog.lance.impl", "rest")
        .config("spark.sql.catalog.lance.uri", os.environ["LANCE_NS_URL"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    try:
        for statement in statements:
            try:
                rows = [list(row) for row in spark.sql(statement).collect()]
                results.append({"sql": statement, "rows": rows})
            except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
                results.append({"sql": statement, "error": error_of(e)})
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
