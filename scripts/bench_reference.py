"""The Python side of scripts/bench.ts: the reference server and the pylance clients.

Run by scripts/bench.ts with the test venv's interpreter (pylance pinned in
scripts/install-python-test-deps.sh), the command as the argument and its JSON configuration as the first line of stdin:

  serve  {"properties": {...}}   starts lance.namespace.RestAdapter("dir", properties) on
                                 127.0.0.1 (ephemeral port), prints {"port": N}, and serves until
                                 the rest of stdin closes.
  fill   {"root", "storage_options", "rows": [...]}
                                 appends rows (object_id, object_type, location, metadata) to the
                                 reference's __manifest table in one write: the catalog the
                                 reference would hold after creating those objects one at a time,
                                 built in seconds instead of minutes.
  write  {"url" | "uri", "table_id", "rows", "appends", "append_rows", "storage_options", "create"}
                                 creates (if "create") a table of `rows` rows and/or appends
                                 `appends` times, through pylance's namespace integration when
                                 "url" is given (lance.write_dataset(namespace_client=..., table_id=...),
                                 what a client does) or straight to "uri" (plain Lance, no
                                 namespace). Prints {"append_ms": [...], "version": v, "uri": ...}.
                                 With "barrier", prints {"ready": true} once connected and
                                 waits for a line on stdin before its appends (so that several
                                 writers start together), and adds "started"/"ended" (epoch s).
  tables {"url", "table_ids", "rows", "threads"}
                                 creates each table of `table_ids` with `rows` rows through
                                 pylance's namespace integration, `threads` at a time.
  interleave {"targets": [{"name", "url" | "uri", "table_id", "storage_options"}], "appends", "block", "first_id"}
                                 appends one row `appends` times to each target (as "write" does),
                                 in blocks of `block` appends per target taken in turn, each block
                                 starting with the next target and every other one in reverse
                                 order: a machine whose speed drifts slows every target alike,
                                 whatever its place. Prints {"append_ms": {name: [...]},
                                 "block_ms": {name: [ms of each block]}}.
  calls  {"url", "steps": [{"method", "path", "body", "timed"}], "count", "first"}
                                 the Python client of a row, as pylance users call the REST API
                                 (requests, one keep-alive session): `count` iterations, each
                                 making the steps in order ("{i}" in a path or a body's strings
                                 becomes the iteration's number, from "first"); the time of an iteration is
                                 the sum of its "timed" steps. Prints {"ms": [...]}, or
                                 {"error": "..."} at the first answer that is not 2xx.
  commits {"uri", "count", "storage_options"}
                                 adds `count` versions to an existing dataset with the cheapest
                                 real Lance commit (a config change), to build long histories.
  null   {"root", "durable"}    serves the least a namespace can do for pylance's managed commits
                                 on a local root (describe: managed; version/list: the latest, from
                                 memory; version/create: a hard link of the staged manifest to its
                                 V2 name, no checks; with "durable" the staged file is fsynced
                                 before the link and the directory after it, else nothing is) on
                                 127.0.0.1, prints {"port": N} and serves until stdin closes: the
                                 floor of the protocol itself, and of a server that keeps commits.
"""

import json
import sys
import time

import pyarrow as pa

DIM = 16


def data(first: int, count: int) -> pa.Table:
    """id int64, value float64, name utf8, vec FixedSizeList(16, float32): the shape bench-data.ts uses."""
    import numpy as np

    ids = np.arange(first, first + count, dtype=np.int64)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(np.random.rand(count * DIM).astype(np.float32)), DIM)
    return pa.table(
        {
            "id": pa.array(ids),
            "value": pa.array(ids * 0.5),
            "name": pa.array([f"name-{i}" for i in ids.tolist()], pa.string()),
            "vec": vec,
        }
    )


def serve(config: dict) -> None:
    import lance.namespace

    adapter = lance.namespace.RestAdapter("dir", config["properties"], host="127.0.0.1", port=0)
    adapter.start()
    print(json.dumps({"port": adapter.port}), flush=True)
    try:
        sys.stdin.read()  # until the bench closes our stdin (or dies)
    finally:
        adapter.stop()


def null(config: dict) -> None:
    import os
    import re
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    root = config["root"]
    durable = bool(config.get("durable"))
    latest: dict = {}

    def fsync(path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def final(location: str, version: int) -> str:
        return f"{location}/_versions/{(2**64 - 1) - version:020d}.manifest"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.serve()

        def do_POST(self):
            self.serve()

        def serve(self):
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            m = re.match(r"^/v1/table/([^/]+)/([a-z/]+)", self.path)
            if not m:
                return self.answer(404, {"code": 4, "error": self.path})
            table, op = m.group(1), m.group(2)
            location = os.path.join(root, table + ".lance")
            if op in ("describe", "declare"):
                return self.answer(200, {"location": location, "storage_options": {}, "managed_versioning": True})
            if op == "version/list":
                v = latest.get(table)
                return self.answer(200, {"versions": [] if v is None else [{"version": v, "manifest_path": final(location, v).lstrip("/")}]})
            if op == "version/describe":
                v = body.get("version") or latest.get(table)
                return self.answer(200, {"version": {"version": v, "manifest_path": final(location, v).lstrip("/")}})
            if op == "version/create":
                v = body["version"]
                staged = "/" + body["manifest_path"].lstrip("/")
                os.makedirs(os.path.join(location, "_versions"), exist_ok=True)
                if durable:
                    fsync(staged)
                try:
                    os.link(staged, final(location, v))
                except FileExistsError:
                    return self.answer(409, {"code": 14, "error": f"version {v} is taken"})
                if durable:
                    fsync(os.path.join(location, "_versions"))
                os.unlink(staged)
                latest[table] = v
                return self.answer(200, {"version": {"version": v, "manifest_path": final(location, v).lstrip("/")}})
            return self.answer(404, {"code": 4, "error": op})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    sys.stdin.read()
    server.shutdown()


def fill(config: dict) -> None:
    import lance

    uri = config["root"].rstrip("/") + "/__manifest"
    options = config.get("storage_options") or None
    schema = lance.dataset(uri, storage_options=options).schema
    rows = config["rows"]
    columns = {
        "object_id": [r["object_id"] for r in rows],
        "object_type": [r["object_type"] for r in rows],
        "location": [r.get("location") for r in rows],
        "metadata": [r.get("metadata") for r in rows],
    }
    arrays = [pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(len(rows), f.type) for f in schema]
    lance.write_dataset(pa.Table.from_arrays(arrays, schema=schema), uri, mode="append", storage_options=options)
    print(json.dumps({"rows": len(rows)}), flush=True)


def write(config: dict) -> None:
    import lance

    options = config.get("storage_options") or None
    if config.get("url"):
        import lance_namespace

        ns = lance_namespace.connect("rest", {"uri": config["url"]})
        target = {"namespace_client": ns, "table_id": config["table_id"]}
    else:
        target = {"uri": config["uri"]}

    def put(table: pa.Table, mode: str):
        if "uri" in target:
            return lance.write_dataset(table, target["uri"], mode=mode, storage_options=options)
        return lance.write_dataset(table, mode=mode, storage_options=options, **target)

    ds = None
    if config.get("create"):
        ds = put(data(0, config["rows"]), "create")
    first = config.get("first_id", config["rows"])
    step = config.get("append_rows", 1)
    append_ms = []
    if config.get("barrier"):
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
    began = time.time()
    for i in range(config.get("appends", 0)):
        started = time.perf_counter()
        ds = put(data(first + i * step, step), "append")
        append_ms.append((time.perf_counter() - started) * 1000)
    ended = time.time()
    answer = {"append_ms": append_ms, "version": ds.version if ds else None, "uri": ds.uri if ds else None, "started": began, "ended": ended}
    print(json.dumps(answer), flush=True)


def tables(config: dict) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import lance
    import lance_namespace

    ns = lance_namespace.connect("rest", {"uri": config["url"]})
    options = config.get("storage_options") or None

    def create(table_id: list) -> None:
        lance.write_dataset(data(0, config["rows"]), mode="create", storage_options=options, namespace_client=ns, table_id=table_id)

    with ThreadPoolExecutor(config.get("threads", 4)) as pool:
        list(pool.map(create, config["table_ids"]))
    print(json.dumps({"tables": len(config["table_ids"])}), flush=True)


def interleave(config: dict) -> None:
    import lance

    targets = config["targets"]
    clients = {}

    def writer(target: dict):
        options = target.get("storage_options") or None
        if "url" not in target:
            return lambda table: lance.write_dataset(table, target["uri"], mode="append", storage_options=options)
        import lance_namespace

        ns = clients.setdefault(target["url"], lance_namespace.connect("rest", {"uri": target["url"]}))
        return lambda table: lance.write_dataset(table, mode="append", storage_options=options, namespace_client=ns, table_id=target["table_id"])

    put = [writer(t) for t in targets]
    appends, block = config["appends"], config["block"]
    first = config.get("first_id", 0)
    append_ms = {t["name"]: [] for t in targets}
    block_ms = {t["name"]: [] for t in targets}
    for b in range(0, appends, block):
        # Each block starts with another target and every other block takes them in reverse, so
        # that each target follows each of its neighbours as often as it precedes it (what one
        # leaves behind, dirty pages or work after its answers, slows the next).
        start = (b // block) % len(targets)
        step = 1 if (b // block) % 2 == 0 else -1
        for k in range(len(targets)):
            t = (start + step * k) % len(targets)
            name = targets[t]["name"]
            spent = 0.0
            for i in range(b, min(b + block, appends)):
                started = time.perf_counter()
                put[t](data(first + t * appends + i, 1))
                ms = (time.perf_counter() - started) * 1000
                append_ms[name].append(ms)
                spent += ms
            block_ms[name].append(spent)
    print(json.dumps({"append_ms": append_ms, "block_ms": block_ms}), flush=True)


def calls(config: dict) -> None:
    import requests

    session = requests.Session()
    session.trust_env = False  # loopback: no proxy from the environment
    base = config["url"].rstrip("/")
    steps = config["steps"]
    first = config.get("first", 0)
    out = []
    for i in range(config["count"]):
        n = str(first + i)
        spent = 0.0
        for step in steps:
            path = step["path"].replace("{i}", n)
            body = step.get("body")
            payload = None if body is None else json.loads(json.dumps(body).replace("{i}", n))
            started = time.perf_counter()
            answer = session.request(step["method"], base + path, json=payload)
            answer.content  # the whole body, as a client reads it
            if step.get("timed", True):
                spent += (time.perf_counter() - started) * 1000
            if not answer.ok:
                print(json.dumps({"error": f"HTTP {answer.status_code}: {answer.text[:200]}"}), flush=True)
                return
        out.append(spent)
    print(json.dumps({"ms": out}), flush=True)


def commits(config: dict) -> None:
    import lance

    ds = lance.dataset(config["uri"], storage_options=config.get("storage_options") or None)
    for i in range(config["count"]):
        ds.update_config({"bench.commit": str(i)})
    print(json.dumps({"version": ds.version}), flush=True)


if __name__ == "__main__":
    {"serve": serve, "null": null, "fill": fill, "write": write, "tables": tables, "interleave": interleave, "calls": calls, "commits": commits}[sys.argv[1]](json.loads(sys.stdin.readline()))
