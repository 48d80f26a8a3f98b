"""Builds Lance indices with pylance for the catalog service: the types @lancedb/lancedb cannot.

A long-lived process the service starts (src/engine/pylance/) with the pinned Python of
scripts/install-index-worker.sh (pylance, pyarrow, lance-namespace). It runs no user code: it
opens a dataset through the service's resolver, builds one index, and commits it.

Protocol: line_protocol.py.

Requests:
  {"id": 1, "op": "ping"}
      -> {"id": 1, "ok": true, "pid": <int>, "versions": {"lance": ..., "pyarrow": ...}}
  {"id": 2, "op": "create_index", "resolver": "http://127.0.0.1:<port>", "table_id": ["<handle>"],
   "column": "<column>", "index_type": "IVF_SQ" | "IVF_HNSW_FLAT" | "NGRAM" | "ZONEMAP" | "BLOOMFILTER" | "RTREE",
   "name": "<index name>", "distance_type": "l2" | "cosine" | "dot" | "hamming" | null,
   "num_partitions", "target_partition_size", "num_bits", "sample_rate", "max_iterations", "m",
   "ef_construction": <positive int> | null (the vector types' build parameters; others ignore them),
   "branch": "<branch>" | null (a branch other than main: the index is built on it and committed to it)}
      Opens the dataset through the resolver (a Lance Namespace REST endpoint that answers describe
      and, for a table with managed versioning, the version calls: Lance then commits through the
      namespace, which is the service's commit path), refuses a taken name, checks that an RTREE's
      column is a geometry (a GeoArrow extension type), builds the index over the latest version and
      commits it (a Lance CreateIndex: rows appended meanwhile stay, as rows the index does not cover).
      -> {"id": 2, "ok": true, "name": "<index name>", "version": <committed version>}
  {"id": 3, "op": "shutdown"}

Failures: kind one of
  "exists"        an index of that name exists
  "invalid_input" the request, or the column's type, does not fit the index type
  "not_found"     with "what": "dataset" | "column"
  "conflict"      every commit of BUILD_ATTEMPTS builds lost a race Lance could not rebase over
  "internal"      anything else (the message says what; the service classifies it further)
"""

import line_protocol

_requests, _respond = line_protocol.take_stdio()

import functools  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402

import lance  # noqa: E402
import lance_namespace  # noqa: E402
import pyarrow as pa  # noqa: E402

VECTOR_TYPES = {"IVF_SQ", "IVF_HNSW_FLAT"}
# Builds of one request; inside each, Lance itself rebases and retries a lost commit (up to 20 times).
BUILD_ATTEMPTS = 3
SCALAR_TYPES = {"NGRAM", "ZONEMAP", "BLOOMFILTER", "RTREE"}
# The spec's build parameters as pylance's create_index takes them (kmeans iterations are `max_iters` there).
VECTOR_PARAMS = {
    "num_partitions": "num_partitions",
    "target_partition_size": "target_partition_size",
    "num_bits": "num_bits",
    "sample_rate": "sample_rate",
    "max_iterations": "max_iters",
    "m": "m",
    "ef_construction": "ef_construction",
}
# Lance's messages for a commit that lost a race (also when the namespace's create said 409).
CONFLICT = re.compile(r"commit conflict|conflicting|preempted|concurrent|ConcurrentModification|version .* already exists", re.I)
# Lance's words for a request it cannot build (wrong parameters for the data).
INVALID = re.compile(r"invalid (user )?input|InvalidInput|can not train|cannot train|not enough|must be", re.I)
NOT_FOUND = re.compile(r"not found|does not exist|No such file", re.I)


class Failure(Exception):
    def __init__(self, kind, message, *, what=None):
        super().__init__(message)
        self.kind = kind
        self.what = what
        self.traceback = None


@functools.cache
def _namespace(uri):
    """The REST namespace client of the resolver at `uri` (one for the worker's life: the resolver's address does not change)."""
    return lance_namespace.connect("rest", {"uri": uri})


_field = line_protocol.field


class Worker:
    def ping(self, _request):
        return {"pid": os.getpid(), "versions": {"lance": lance.__version__, "pyarrow": pa.__version__}}

    def create_index(self, request):
        resolver = _field(request, "resolver", str)
        table_id = _field(request, "table_id", list)
        column = _field(request, "column", str)
        index_type = _field(request, "index_type", str)
        name = _field(request, "name", str)
        if index_type not in VECTOR_TYPES | SCALAR_TYPES:
            raise Failure("invalid_input", f"this worker builds {', '.join(sorted(VECTOR_TYPES | SCALAR_TYPES))}, not {index_type}")
        params = {}
        for key, param in VECTOR_PARAMS.items():
            value = request.get(key)
            if value is not None:
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise Failure("invalid_input", f"{key} must be a positive integer")
                params[param] = value
        distance = request.get("distance_type")
        if distance is not None and distance not in ("l2", "cosine", "dot", "hamming"):
            raise Failure("invalid_input", f"unknown distance_type {distance!r}")

        branch = request.get("branch")
        if branch is not None and not isinstance(branch, str):
            raise Failure("invalid_input", "branch must be a string")
        # A build whose commit lost every one of Lance's rebase attempts (appends landing back to back
        # on a loaded machine) is built again from the new latest version, a bounded number of times:
        # a conflict reaches the client only when the table never stood still long enough for a commit.
        for attempt in range(1, BUILD_ATTEMPTS + 1):
            try:
                return self._build(resolver, table_id, branch, column, index_type, name, distance, params)
            except Failure as failure:
                if failure.kind != "conflict" or attempt == BUILD_ATTEMPTS:
                    raise

    def _build(self, resolver, table_id, branch, column, index_type, name, distance, params):
        """One build over the latest version, committed (Lance rebases it over appends up to its own retry limit)."""
        ds = _open(_namespace(resolver), table_id, branch)
        if any(index.name == name for index in ds.describe_indices()):
            raise Failure("exists", f"an index named {name!r} already exists")
        field = _field_of(ds, column)
        try:
            if index_type in VECTOR_TYPES:
                ds.create_index(column, index_type, name=name, metric=distance or "l2", replace=False, **params)
            else:
                if index_type == "RTREE":
                    _require_geometry(column, field)
                # replace=False: a build that finds the name taken when it commits fails instead of replacing it.
                ds.create_scalar_index(column, index_type, name=name, replace=False)
        except Failure:
            raise
        except (TypeError, ValueError, OverflowError, NotImplementedError) as e:
            # pylance's own checks of the column's type and the parameters.
            raise _classified(e) or Failure("invalid_input", str(e)) from e
        except Exception as e:  # noqa: BLE001
            failure = _classified(e)
            if failure is None:
                raise
            raise failure from e
        return {"name": name, "version": ds.version}


def _classified(e):
    """A build failure as the Failure Lance's words say it is, or None when they do not tell."""
    message = str(e)
    if CONFLICT.search(message):
        return Failure("conflict", message)
    if re.search(r"index .*already exists|already exists.*index", message, re.I):
        return Failure("exists", message)
    if INVALID.search(message):
        return Failure("invalid_input", message)
    return None


def _open(ns, table_id, branch=None):
    """The dataset behind a resolver handle, at its latest version (of `branch` when given)."""
    try:
        ds = lance.dataset(namespace_client=ns, table_id=table_id)
        return ds if branch is None else ds.checkout_version((branch, None))
    except Exception as e:  # noqa: BLE001
        if NOT_FOUND.search(str(e)):
            raise Failure("not_found", f"no dataset: {e}", what="dataset") from e
        raise


def _field_of(ds, column):
    """The column's Arrow field (a nested one by its dotted path), or not_found."""
    field = ds.lance_schema.field_case_insensitive(column)
    if field is None:
        raise Failure("not_found", f"column {column} not found", what="column")
    return field.to_arrow()


def _require_geometry(column, field):
    """An RTREE indexes geometries: the column must carry a GeoArrow extension type (geoarrow.point, .wkb, ...)."""
    extension = (field.metadata or {}).get(b"ARROW:extension:name", b"").decode("utf-8", "replace")
    if not extension.startswith("geoarrow."):
        raise Failure(
            "invalid_input",
            f"an RTREE index needs a geometry column (a GeoArrow extension type such as geoarrow.point or geoarrow.wkb); {column} is {field.type}"
            + (f" ({extension})" if extension else ""),
        )


def main():
    worker = Worker()
    line_protocol.serve(_requests, _respond, {"ping": worker.ping, "create_index": worker.create_index})


if __name__ == "__main__":
    main()
