"""The pylance engine worker of the catalog service: builds the index types @lancedb/lancedb
cannot, and maintains tables (compaction, index upkeep, version cleanup), which the Node binding
runs only all at once (`optimize()`) and whose cleanup refuses tagged old versions.

A long-lived process the service starts (src/engine/pylance/) with the pinned Python of
scripts/install-index-worker.sh (pylance, pyarrow, lance-namespace). It runs no user code: it
opens a dataset through the service's resolver, does one thing, and commits it.

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
  {"id": 3, "op": "inspect", "resolver", "table_id", "target_rows_per_fragment": <int>}
      -> {"id": 3, "ok": true, "version", "fragments", "small_fragments", "rows", "deleted_rows",
          "indices": [{"name", "unindexed_rows"}], "versions": [{"version", "timestamp_millis"}]}
  {"id": 4, "op": "compact", "resolver", "table_id", "target_rows_per_fragment": <int> | null,
   "materialize_deletions_threshold": <0..1> | null, "ray_address": "<host:port>" | null,
   "distribute_above_rows": <int> | null}
      Lance's compact_files (a Rewrite: rebased over appends, and over deletes and updates of rows
      it did not rewrite; a conflict otherwise). With ray_address (this worker's Python then has
      ray), a plan of at least distribute_above_rows rows is rewritten in Ray tasks, one per
      compaction task, and committed once here.
      -> {"id": 4, "ok": true, "version": <int> | null (nothing to do), "fragments_before",
          "fragments_after", "rows_rewritten", "bytes_rewritten", "ray_tasks"}
  {"id": 5, "op": "optimize_indices", "resolver", "table_id"}
      -> {"id": 5, "ok": true, "version": <int> | null, "indices_updated", "rows_indexed"}
  {"id": 6, "op": "cleanup", "resolver", "table_id", "older_than_millis": <int>, "keep": [<int>]}
      Removes main's versions committed before older_than_millis but the latest, those in `keep`,
      tagged ones and branches' bases (Lance keeps these two itself too), and the files only they
      reference. Branches' own histories (tree/<b>/) are left alone.
      -> {"id": 6, "ok": true, "versions_removed", "bytes_removed", "removed": [<version>]}
  {"id": 7, "op": "shutdown"}

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

    def inspect(self, request):
        target = _positive(request, "target_rows_per_fragment") or DEFAULT_TARGET_ROWS
        ds = _open(_namespace(_field(request, "resolver", str)), _field(request, "table_id", list))
        fragments = [f.metadata for f in ds.get_fragments()]
        rows = sum(f.num_rows for f in fragments)
        return {
            "version": ds.version,
            "fragments": len(fragments),
            "small_fragments": sum(1 for f in fragments if f.num_rows < target),
            "rows": rows,
            "deleted_rows": sum(f.num_deletions for f in fragments),
            "indices": [{"name": name, "unindexed_rows": unindexed} for name, unindexed in _unindexed(ds, fragments).items()],
            # Lance reads every version's manifest for them: only when asked (a cleanup's policy).
            "versions": [{"version": v["version"], "timestamp_millis": _millis(v["timestamp"])} for v in ds.versions()]
            if request.get("with_versions", True)
            else [],
        }

    def compact(self, request):
        options = {}
        target = _positive(request, "target_rows_per_fragment")
        if target is not None:
            options["target_rows_per_fragment"] = target
        threshold = request.get("materialize_deletions_threshold")
        if threshold is not None:
            if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
                raise Failure("invalid_input", "materialize_deletions_threshold must be a number from 0 to 1")
            options["materialize_deletions_threshold"] = float(threshold)
        ray_address = request.get("ray_address")
        resolver = _field(request, "resolver", str)
        table_id = _field(request, "table_id", list)
        ds = _open(_namespace(resolver), table_id)
        before = {f.id: f for f in (f.metadata for f in ds.get_fragments())}
        read_version = ds.version
        tasks = 0
        if ray_address:
            metrics, tasks = _committing(lambda: _compact_on_ray(ds, _namespace(resolver), table_id, options, ray_address, request.get("distribute_above_rows") or 0))
        else:
            metrics = _committing(lambda: ds.optimize.compact_files(**options))
        if metrics is None or (metrics.fragments_removed == 0 and metrics.fragments_added == 0):
            return {"version": None, "fragments_before": len(before), "fragments_after": len(before), "rows_rewritten": 0, "bytes_rewritten": 0, "ray_tasks": 0}
        after = {f.id for f in (f.metadata for f in ds.get_fragments())}
        # The fragments the rewrite replaced (those of appends rebased under it stay in both sets).
        rewritten = [f for fid, f in before.items() if fid not in after]
        return {
            "version": ds.version if ds.version != read_version else None,
            "fragments_before": len(before),
            "fragments_after": len(after),
            "rows_rewritten": sum(f.physical_rows for f in rewritten),
            "bytes_rewritten": sum(d.file_size_bytes or 0 for f in rewritten for d in f.files),
            "ray_tasks": tasks,
        }

    def optimize_indices(self, request):
        ds = _open(_namespace(_field(request, "resolver", str)), _field(request, "table_id", list))
        before = _unindexed(ds)
        behind = {name: n for name, n in before.items() if n > 0}
        if not behind:
            return {"version": None, "indices_updated": 0, "rows_indexed": 0}
        _committing(lambda: ds.optimize.optimize_indices(index_names=list(behind)))
        after = _unindexed(ds)
        return {
            "version": ds.version,
            "indices_updated": len(behind),
            "rows_indexed": sum(max(0, n - after.get(name, 0)) for name, n in behind.items()),
        }

    def cleanup(self, request):
        older_than = _field(request, "older_than_millis", int)
        keep = set(_field(request, "keep", list))
        ds = _open(_namespace(_field(request, "resolver", str)), _field(request, "table_id", list))
        latest = ds.version
        # Lance keeps tagged versions (error_if_tagged_old_versions=False) and branches' bases itself;
        # named here too, so that what goes is decided in one place.
        keep |= {t["version"] for t in ds.tags.list().values() if t.get("branch") in (None, "main")}
        keep |= {b["parent_version"] for b in ds.branches.list().values() if b.get("parent_branch") in (None, "main")}
        # Only versions older than the one opened: a writer may have committed newer ones since,
        # and the latest of all is never removed, whatever the cutoff.
        doomed = [v["version"] for v in ds.versions() if v["version"] < latest and v["version"] not in keep and _millis(v["timestamp"]) < older_than]
        if not doomed:
            return {"versions_removed": 0, "bytes_removed": 0, "removed": []}
        stats = ds.cleanup_old_versions(versions=doomed, error_if_tagged_old_versions=False)
        remaining = {v["version"] for v in ds.versions()}
        return {"versions_removed": stats.old_versions, "bytes_removed": stats.bytes_removed, "removed": [v for v in doomed if v not in remaining]}


_ray_rewrite = None


def _rewrite(task, uri, storage_options):
    """One compaction task, on a Ray worker: rewrites its fragments from the version planned (no commit)."""
    import lance as lance_on_worker

    return task.execute(lance_on_worker.dataset(uri, version=task.read_version, storage_options=storage_options or None))


def _compact_on_ray(ds, ns, table_id, options, ray_address, distribute_above_rows):
    """lance-ray's compact_files in shape: the plan here, each task's rewrite a Ray task (reading and
    writing the store with the options the namespace describes), then one commit here, through the
    namespace. A plan smaller than distribute_above_rows rows runs here, in this process. Returns
    (metrics or None when there is nothing to do, Ray tasks run)."""
    global _ray_rewrite
    from lance.optimize import Compaction, CompactionOptions

    plan = Compaction.plan(ds, CompactionOptions(**options))
    if plan.num_tasks() == 0:
        return None, 0
    rows = sum(f.physical_rows for task in plan.tasks for f in task.fragments)
    if rows < distribute_above_rows:
        return ds.optimize.compact_files(**options), 0
    import ray
    from lance_namespace import DescribeTableRequest

    described = ns.describe_table(DescribeTableRequest(id=table_id))
    if _ray_rewrite is None:
        ray.init(address=ray_address, logging_level="ERROR", log_to_driver=False, ignore_reinit_error=True)
        _ray_rewrite = ray.remote(max_retries=1)(_rewrite)
    uri = described.location
    pending = [_ray_rewrite.remote(task, uri, described.storage_options) for task in plan.tasks]
    rewrites = ray.get(pending)
    return Compaction.commit(ds, rewrites), len(pending)


# Lance's default target_rows_per_fragment.
DEFAULT_TARGET_ROWS = 1024 * 1024


def _positive(request, name):
    value = request.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise Failure("invalid_input", f"{name} must be a positive integer")
    return value


def _millis(timestamp):
    """A version's commit time as pylance gives it (a naive datetime in local time) in ms since the epoch."""
    return int(timestamp.timestamp() * 1000)


def _unindexed(ds, fragments=None):
    """Per index (vector, scalar and FTS alike; system indices aside): live rows of the latest
    version in fragments none of its segments covers. From the manifest alone: index_stats would
    load each index (a vector index's centroids too)."""
    if fragments is None:
        fragments = [f.metadata for f in ds.get_fragments()]
    out = {}
    for index in ds.describe_indices():
        if index.name.startswith("__"):
            continue
        covered = set().union(*(segment.fragment_ids for segment in index.segments))
        out[index.name] = sum(f.num_rows for f in fragments if f.id not in covered)
    return out


def _committing(commit):
    """Runs a maintenance commit; a race Lance could not rebase over is a conflict."""
    try:
        return commit()
    except Exception as e:  # noqa: BLE001
        if CONFLICT.search(str(e)):
            raise Failure("conflict", str(e)) from e
        raise


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
    handlers = {
        "ping": worker.ping,
        "create_index": worker.create_index,
        "inspect": worker.inspect,
        "compact": worker.compact,
        "optimize_indices": worker.optimize_indices,
        "cleanup": worker.cleanup,
    }
    line_protocol.serve(_requests, _respond, handlers)


if __name__ == "__main__":
    main()
