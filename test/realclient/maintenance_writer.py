"""One writer of test/realclient/maintenance-writers.test.ts: pylance or LanceDB (Python) through the service.

Run as `python maintenance_writer.py '<config JSON>'` with config {"url", "namespace": [...], "table",
"client": "pylance" | "lancedb", "own": [ids of the table's rows this writer owns], "first_id"}.
It prints a `ready` line, waits for a line on stdin (the go), then, until no row it owns is left,
repeats: append 5 rows (ids from first_id on, n = 0), add 1 to n of one row it owns, delete
another row it owns; each op acknowledged or failed reports a line:
{"kind": "append", "ids": [...]} | {"kind": "update", "id"} | {"kind": "delete", "id"} with
"error" when it failed (Lance's retries ran out: the op did not happen). Then `done`.
"""

import json
import sys

import pyarrow as pa

SCHEMA = pa.schema([("id", pa.int64()), ("n", pa.int32())])


def emit(message: dict) -> None:
    print(json.dumps(message), flush=True)


class Pylance:
    def __init__(self, config):
        import lance
        import lance_namespace

        self.lance = lance
        self.ns = lance_namespace.connect("rest", {"uri": config["url"]})
        self.table_id = [*config["namespace"], config["table"]]

    def dataset(self):
        return self.lance.dataset(namespace_client=self.ns, table_id=self.table_id)

    def append(self, data):
        self.lance.write_dataset(data, namespace_client=self.ns, table_id=self.table_id, mode="append")

    def update(self, where):
        self.dataset().update({"n": "n + 1"}, where=where)

    def delete(self, where):
        self.dataset().delete(where)


class Lancedb:
    def __init__(self, config):
        import lancedb

        self.db = lancedb.connect_namespace("rest", {"uri": config["url"]})
        self.name = config["table"]
        self.namespace = config["namespace"]

    def table(self):
        return self.db.open_table(self.name, namespace_path=self.namespace)

    def append(self, data):
        self.table().add(data)

    def update(self, where):
        self.table().update(where=where, values_sql={"n": "n + 1"})

    def delete(self, where):
        self.table().delete(where)


def main(config: dict) -> None:
    client = Pylance(config) if config["client"] == "pylance" else Lancedb(config)
    own = list(config["own"])
    next_id = config["first_id"]
    emit({"kind": "ready"})
    if not sys.stdin.readline():
        raise SystemExit("stdin closed before the go")
    step = 0
    while own:
        ids = list(range(next_id, next_id + 5))
        next_id += 5
        data = pa.table({"id": pa.array(ids, pa.int64()), "n": pa.array([0] * 5, pa.int32())}, schema=SCHEMA)
        attempt({"kind": "append", "ids": ids}, lambda: client.append(data))
        updated = own[step % len(own)]
        attempt({"kind": "update", "id": updated}, lambda: client.update(f"id = {updated}"))
        deleted = own.pop()
        attempt({"kind": "delete", "id": deleted}, lambda: client.delete(f"id = {deleted}"))
        step += 1
    emit({"kind": "done"})


def attempt(report: dict, op) -> None:
    try:
        op()
        emit(report)
    except Exception as e:  # reported; the test decides from what was acknowledged
        emit({**report, "error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except BaseException as e:
        emit({"kind": "error", "message": f"{type(e).__name__}: {e}"})
        raise
