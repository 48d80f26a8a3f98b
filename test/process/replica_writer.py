"""One pylance writer of test/process/replicas.test.ts.

Run as `python replica_writer.py '<config JSON>'`. It connects to the namespace (the test's
spreader, in front of several service replicas), prints a `ready` line, then appends its rows to a
managed-versioning table in phases (config "phases": appends per phase), waiting for one line on
stdin (the test's go) before each phase; one lance.write_dataset(mode="append") per append. Unlike pylance_client.py's append-worker it keeps
going after a failed append (a replica may die with the commit in flight), reporting each append
as its own line: {"kind": "append", "first", "count", "version"} or {..., "error"}. Then `done`.
"""

import json
import sys

import lance
import lance_namespace
import pyarrow as pa

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string())])


def emit(message: dict) -> None:
    print(json.dumps(message), flush=True)


def main(config: dict) -> None:
    ns = lance_namespace.connect("rest", {"uri": config["url"]})
    emit({"kind": "ready"})
    count = config["rows_per_append"]
    first = config["first_id"]
    for appends in config["phases"]:
        if not sys.stdin.readline():
            raise SystemExit("stdin closed before the go of a phase")
        for _ in range(appends):
            append(ns, config, first, count)
            first += count
    emit({"kind": "done"})


def append(ns, config: dict, first: int, count: int) -> None:
    data = pa.table(
        {"id": pa.array(range(first, first + count), pa.int64()), "writer": pa.array([config["writer"]] * count, pa.string())},
        schema=SCHEMA,
    )
    try:
        ds = lance.write_dataset(data, namespace_client=ns, table_id=config["table_id"], mode="append")
        emit({"kind": "append", "first": first, "count": count, "version": ds.version})
    except Exception as e:  # reported; the test decides from the table what the append did
        emit({"kind": "append", "first": first, "count": count, "error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except BaseException as e:
        emit({"kind": "error", "message": f"{type(e).__name__}: {e}"})
        raise
