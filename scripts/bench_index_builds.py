"""pylance building an index directly: the floor scripts/bench-index-builds.ts compares the service with.

Run with the index worker's Python (.venv-index). One JSON request per line on stdin:
  {"uri": ..., "storage_options": {...}, "column": ..., "index_type": ..., "name": ..., "params": {...}}
and one JSON line on stdout for each: {"ms": <the open and the build, in ms>}, after which the
index is dropped again (not timed). The interpreter's start and imports are paid once, before the
first request, as the service's index worker pays them once.
"""

import json
import sys
import time

import lance

VECTOR = {"IVF_SQ", "IVF_HNSW_FLAT"}

for line in sys.stdin:
    request = json.loads(line)
    started = time.perf_counter()
    ds = lance.dataset(request["uri"], storage_options=request["storage_options"] or None)
    if request["index_type"] in VECTOR:
        ds.create_index(request["column"], request["index_type"], name=request["name"], replace=False, **request["params"])
    else:
        ds.create_scalar_index(request["column"], request["index_type"], name=request["name"], replace=False)
    elapsed = (time.perf_counter() - started) * 1000
    ds.drop_index(request["name"])
    sys.stdout.write(json.dumps({"ms": elapsed}) + "\n")
    sys.stdout.flush()
