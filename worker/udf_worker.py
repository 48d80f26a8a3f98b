"""Runs Geneva Python UDFs over Lance datasets for the catalog service.

A long-lived process the service starts (src/engine/python-udf/) with the pinned Python of
scripts/install-udf-worker.sh (geneva, pylance, pyarrow). The service never loads a pickle
itself: it sends this process a dataset handle and the path of a UDF envelope, and this process
loads the UDF, computes it over the rows and commits the outputs.

Protocol: line_protocol.py (one JSON request per line on stdin, one JSON answer per line on
stdout, one request at a time). Nothing else is ever written to stdout: whatever the UDF (or a
library) prints, from Python or native code, goes to stderr, which the service logs. stdin is
closed to user code too.

Requests:
  {"id": 1, "op": "ping"}
      -> {"id": 1, "ok": true, "pid": <int>, "versions": {"geneva": ..., "lance": ..., "pyarrow": ...}}
  {"id": 2, "op": "fill", "resolver": "http://127.0.0.1:<port>", "table_id": ["<handle>"],
   "column": "<top-level column>", "udf_path": "_udfs/<sha256>", "input_columns": [...] | null,
   "filter": "<Lance SQL, _rowid allowed>", "batch_rows": <rows per UDF call when the UDF names none; optional>,
   "branch": "<branch>" | null (a branch other than main: the rows are read from it and the commit goes on it)}
      Opens the dataset through the resolver (a Lance Namespace REST endpoint that answers
      describe and, for tables with managed versioning, the version calls), loads the Geneva UDF
      envelope at `<dataset>/<udf_path>` (DockerUDFSpecV1: JSON with a cloudpickled geneva UDF),
      calls it over the rows matching `filter` at the latest version as Geneva's applier does
      (`udf(record_batch, use_applier=True)`), writes each output into `column` of the same row
      (fragment.update_columns on `_rowid`: rows keep their ids, other rows their values) and
      commits once (a Lance Update; through the namespace when the table's versions are managed),
      also when no row matches.
      -> {"id": 2, "ok": true, "rows": <rows written>, "version": <committed version>}
  {"id": 3, "op": "materialize", "resolver": "http://127.0.0.1:<port>", "source_id": ["<handle>"],
   "source_version": <int>, "view_id": ["<handle>"], "filter": "<Lance SQL>" | null,
   "columns": [["<view column>", "<SQL over the source>"], ...], "limit": <int> | null, "offset": <int> | null,
   "udfs": [{"column": "<view column>", "udf_path": "_udfs/<sha256>", "input_columns": [...] | null}],
   "schema_metadata": {...}, "field_metadata": {"<view column>": {...}}, "max_rows_per_file": <int> | null,
   "batch_rows": <optional>}
      Recomputes a materialized view (kind query) from its source: scans the source at
      `source_version` (rows matching `filter`, then `offset` and `limit`, with `_rowid`), and makes
      one view row per source row: `__source_row_id` = the source `_rowid` as int64, `__is_set` =
      true, each of `columns` evaluated over the source row, each UDF (its envelope read from the
      view's directory) called over its input columns of the source row as Geneva's applier does,
      any other view column null. The rows replace the view's in one commit (a Lance Overwrite
      made from the view's latest version, through the namespace when its versions are managed),
      keeping the view's schema with `schema_metadata` as its schema metadata and
      `field_metadata` merged into the named fields' metadata.
      With "chunker": {"udf_path": "_udfs/<sha256>", "input_columns": [...], "inherited": [...]}
      and "output_limit": <int> | null, the view is of kind chunker (and has no "udfs"): the
      ChunkerSpec JSON at `udf_path` in the view's directory holds a cloudpickled Geneva Chunker;
      `columns` are what is read of each source row; the chunker gets `input_columns` of them
      with `__source_row_id` (execute_on_record_batch_iter, as Geneva's refresh calls it) and
      each row it yields is a view row: `__source_row_id`, `__child_index`, its outputs, and the
      `inherited` columns of its source row; at most `output_limit` view rows are kept.
      With "udtf": {"udf_path": "_udfs/<sha256>", "source_query": "<GenevaQuery JSON>",
      "partition_by": "<column>" | null}, the view is of kind udtf: the UDTFSpec JSON at `udf_path`
      holds a cloudpickled Geneva UDTF, handed a Geneva query builder over the source at
      `source_version` (the GenevaQuery; once per distinct value of `partition_by` among its rows,
      that value added to its filter); the batches it yields are the view's rows.
      -> {"id": 3, "ok": true, "rows": <rows written>, "version": <committed version>, "fragments": <fragments written>}
  {"id": 4, "op": "shutdown"}
      -> {"id": 4, "ok": true}, then the process exits. End of input does the same silently.

With UDF_WORKER_RAY_ADDRESS set (udf_execution ray), `fill` sends each batch to the Ray cluster
at that address as a task that calls the UDF, and writes the results as above; the cluster's
Python needs the same geneva, pyarrow and pylance.

Failures: {"id": ..., "ok": false, "kind": K, "message": "...", "traceback": "..." (optional)}
with K one of
  "udf"           the UDF could not be loaded, raised, or returned something unusable (wrong
                  length, a type that does not cast to the column's, nulls in a non-nullable
                  column); not worth a retry
  "conflict"      the commit lost a race with another writer; a retry reads the new version
  "invalid_input" the request is wrong (a malformed filter, a bad field)
  "not_found"     with "what": "dataset" | "column": the dataset or a column is not there
  "internal"      anything else (the message says what; the service classifies it further)
A request that is not JSON, or lacks an `id`, is answered with id null and kind "invalid_input".
"""

import line_protocol

# Before anything else is imported: nothing a UDF or a native library prints may reach stdout.
_requests, _respond = line_protocol.take_stdio()

import copy  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402

import lance  # noqa: E402
import lance_namespace  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

import geneva  # noqa: E402,F401  (the pickles reference geneva's modules)
from geneva.packager import ChunkerSpec, DockerUDFPackager, UDFSpec, UDTFSpec, unmarshal_chunker, unmarshal_udtf  # noqa: E402
from geneva.query import GenevaQuery, GenevaQueryBuilder  # noqa: E402
from geneva.transformer import UDF, UDTF, Chunker, UDFArgType  # noqa: E402

DEFAULT_BATCH_ROWS = 8192
# udf_execution ray: the UDF runs as Ray tasks on the cluster at this address (one task per batch),
# this process only reads the rows and writes the results; unset, it runs the UDF itself.
RAY_ADDRESS = os.environ.get("UDF_WORKER_RAY_ADDRESS") or None
# Lance's messages for a commit that lost a race (also when the namespace's create said 409).
CONFLICT = re.compile(r"commit conflict|conflicting|preempted|concurrent|ConcurrentModification|version .* already exists", re.I)
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class Failure(Exception):
    def __init__(self, kind, message, *, what=None, with_traceback=False):
        super().__init__(message)
        self.kind = kind
        self.what = what
        self.traceback = traceback.format_exc() if with_traceback else None

    def __reduce__(self):
        # Picklable as it is (a Ray task's failure comes back to this process so).
        return (_failure, (self.kind, str(self), self.what, self.traceback))


def _failure(kind, message, what, tb):
    f = Failure(kind, message, what=what)
    f.traceback = tb
    return f


class Worker:
    def __init__(self):
        self.namespaces = {}
        # Loaded UDFs and chunkers by kind and the sha256 of their envelope, checked against the bytes read each time:
        # an envelope is named by its hash, so one loaded for one dataset is the same for any other.
        self.udfs = {}
        self.packager = DockerUDFPackager()

    def namespace(self, uri):
        ns = self.namespaces.get(uri)
        if ns is None:
            ns = self.namespaces[uri] = lance_namespace.connect("rest", {"uri": uri})
        return ns

    def ping(self, _request):
        return {"pid": os.getpid(), "versions": {"geneva": _version("geneva"), "lance": lance.__version__, "pyarrow": pa.__version__}}

    def fill(self, request):
        resolver = _field(request, "resolver", str)
        table_id = _field(request, "table_id", list)
        column = _field(request, "column", str)
        udf_path = _field(request, "udf_path", str)
        row_filter = _field(request, "filter", str)
        input_columns = None if request.get("input_columns") is None else _names(request, "input_columns")
        batch_rows = request.get("batch_rows")
        if batch_rows is not None and not (isinstance(batch_rows, int) and batch_rows > 0):
            raise Failure("invalid_input", "batch_rows must be a positive integer")

        branch = request.get("branch")
        if branch is not None and not isinstance(branch, str):
            raise Failure("invalid_input", "branch must be a string")

        ns = self.namespace(resolver)
        ds, described = _open_table(ns, table_id, None)
        # A branch's dataset keeps the table's root (its envelopes in _udfs/), and Lance commits
        # what is made from it on the branch (a managed table's, through the namespace, with the branch).
        if branch is not None:
            ds = ds.checkout_version((branch, None))
        field = _top_level_field(ds.schema, column)
        udf = self.load_udf(ds, udf_path)
        inputs = _inputs(udf, input_columns, ds.schema, column)

        per_fragment = {}
        rows = 0
        batches = (b for b in _scan(ds, inputs, row_filter, udf.batch_size or batch_rows or DEFAULT_BATCH_ROWS) if b.num_rows > 0)
        # Geneva's applier hands the UDF the read columns and `_rowaddr`.
        computed = _on_ray(udf, batches, field) if RAY_ADDRESS else ((b, _call(udf, b.drop_columns(["_rowid"]), field)) for b in batches)
        for batch, values in computed:
            fragments = batch.column("_rowaddr").to_numpy() >> np.uint64(32)
            row_ids = batch.column("_rowid")
            for fragment_id in np.unique(fragments):
                take = pa.array(np.flatnonzero(fragments == fragment_id))
                per_fragment.setdefault(int(fragment_id), []).append((row_ids.take(take), values.take(take)))
            rows += batch.num_rows

        updated, fields_modified = [], set()
        for fragment_id, parts in per_fragment.items():
            data = pa.table({"_rowid": pa.concat_arrays([p[0] for p in parts]), column: pa.concat_arrays([p[1] for p in parts])}, schema=pa.schema([pa.field("_rowid", pa.uint64()), field]))
            metadata, modified = ds.get_fragment(fragment_id).update_columns(data, left_on="_rowid")
            updated.append(metadata)
            fields_modified.update(modified)
        # One commit made from the version read: Lance rebases it over commits since then that do
        # not touch the rewritten fragments' rows (an append) and refuses the others (a conflict),
        # so the fill lands whole or not at all, and no other writer's rows are lost.
        operation = lance.LanceOperation.Update(updated_fragments=updated, fields_modified=sorted(fields_modified))
        committed = _commit(ns, table_id, ds, described, operation)
        return {"rows": rows, "version": committed.version}

    def load_udf(self, ds, udf_path):
        """The UDF at `udf_path`, a copy of the cached one: a request sets its input columns on it
        (as Geneva's backfill does), which must not carry over to the next request."""
        return copy.copy(self._load(ds, udf_path, "UDF", lambda name, payload: self.packager.unmarshal(UDFSpec(name=name, backend="DockerUDFSpecV1", udf_payload=payload)), UDF))

    def load_chunker(self, ds, path):
        """A chunker view's Chunker, from the ChunkerSpec JSON at `path` (geneva/packager marshal_chunker)."""
        return self._load(ds, path, "chunker", lambda _name, payload: unmarshal_chunker(ChunkerSpec.from_json(payload.decode("utf-8"))), Chunker)

    def load_udtf(self, ds, path):
        """A udtf view's UDTF, from the UDTFSpec JSON at `path` (geneva/packager marshal_udtf)."""
        return self._load(ds, path, "UDTF", lambda _name, payload: unmarshal_udtf(UDTFSpec.from_json(payload.decode("utf-8"))), UDTF)

    def _load(self, ds, path, what, unmarshal, kind):
        """The `kind` unpickled from the envelope at `path` in the dataset's directory, cached by its sha256."""
        sha, payload = self._envelope(ds, path, what)
        # Cached by kind too: the same envelope asked for as another kind is refused below, not served from the cache.
        key = (what, sha)
        if sha is not None and key in self.udfs:
            return self.udfs[key]
        try:
            loaded = unmarshal(sha or path, payload)
        except Exception as e:  # noqa: BLE001
            raise Failure("udf", f"could not load the {what} at {path}: {type(e).__name__}: {e}", with_traceback=True) from e
        if not isinstance(loaded, kind):
            raise Failure("udf", f"could not load the {what} at {path}: a module it needs is not installed in the worker's Python")
        if sha is not None:
            self.udfs[key] = loaded
        return loaded

    def _envelope(self, ds, path, what):
        """The bytes at `path` in the dataset's directory, checked against the sha256 its name says; (sha or None, bytes)."""
        sha = path.rsplit("/", 1)[-1]
        try:
            payload = _download(ds, path)
        except Exception as e:  # noqa: BLE001
            raise Failure("udf", f"could not read the {what} at {path}: {e}") from e
        if SHA256.match(sha) is None:
            return None, payload
        digest = hashlib.sha256(payload).hexdigest()
        if digest != sha:
            raise Failure("udf", f"the {what} at {path} is not the envelope its name says (sha256 {digest})")
        return sha, payload

    def materialize(self, request):
        resolver = _field(request, "resolver", str)
        source_id = _field(request, "source_id", list)
        view_id = _field(request, "view_id", list)
        source_version = _field(request, "source_version", int)
        row_filter = _optional(request, "filter", str)
        columns = _field(request, "columns", list)
        if not all(isinstance(c, list) and len(c) == 2 and all(isinstance(p, str) for p in c) for c in columns):
            raise Failure("invalid_input", "columns must be a list of [view column, SQL] pairs")
        limit = _optional(request, "limit", int)
        offset = _optional(request, "offset", int)
        udf_requests = _field(request, "udfs", list)
        schema_metadata = _field(request, "schema_metadata", dict)
        field_metadata = _optional(request, "field_metadata", dict) or {}
        max_rows_per_file = _optional(request, "max_rows_per_file", int)
        batch_rows = _optional(request, "batch_rows", int) or DEFAULT_BATCH_ROWS
        chunker_request = _optional(request, "chunker", dict)
        udtf_request = _optional(request, "udtf", dict)
        output_limit = _optional(request, "output_limit", int)
        if (chunker_request is not None or udtf_request is not None) and udf_requests:
            raise Failure("invalid_input", "a chunker or udtf view has no UDF columns")

        ns = self.namespace(resolver)
        source, _ = _open_table(ns, source_id, source_version)
        view, view_described = _open_table(ns, view_id, None)
        # The view keeps its schema (and the field ids Lance gave it); only the metadata changes.
        fields = []
        for f in view.schema:
            extra = field_metadata.get(f.name)
            fields.append(f.with_metadata({**(f.metadata or {}), **{k.encode(): str(v).encode() for k, v in extra.items()}}) if extra else f)
        schema = pa.schema(fields, metadata={str(k): str(v) for k, v in schema_metadata.items()})
        if udtf_request is not None:
            return self.run_udtf(ns, resolver, (source_id, source, source_version), (view_id, view, view_described), schema, udtf_request, max_rows_per_file)

        # What is read of the source, each under an alias of its own: the projected expressions, and
        # the UDFs' inputs (which the projection may not include, or may name differently).
        scan = {}
        projected = {}
        for i, (name, sql) in enumerate(columns):
            if chunker_request is None:
                _top_level_field(schema, name)
            projected[name] = f"__mv_c{i}"
            scan[f"__mv_c{i}"] = sql
        udfs = []
        read_aliases = {}
        for entry in udf_requests:
            if not isinstance(entry, dict):
                raise Failure("invalid_input", "udfs must be a list of objects")
            column = _field(entry, "column", str)
            field = _top_level_field(schema, column)
            udf = self.load_udf(view, _field(entry, "udf_path", str))
            inputs = _view_udf_inputs(udf, _optional(entry, "input_columns", list), source.schema)
            for name in inputs:
                if name not in read_aliases:
                    read_aliases[name] = f"__mv_u{len(read_aliases)}"
                    scan[read_aliases[name]] = _sql_column(name)
            udfs.append((column, field, udf, inputs))
        udf_columns = {u[0]: u for u in udfs}
        expand = None
        if chunker_request is not None:
            chunker = self.load_chunker(view, _field(chunker_request, "udf_path", str))
            expand = _chunk_rows(chunker, schema, projected, _names(chunker_request, "input_columns"), _names(chunker_request, "inherited"), batch_rows)
        # One scan feeds every UDF: its batches are as small as the smallest batch a UDF names.
        batch_rows = min([u[2].batch_size for u in udfs if u[2].batch_size] or [batch_rows])
        if not scan and source.schema.names:
            # Lance refuses a scan of nothing but row ids: one stored column goes along.
            scan["__mv_anchor"] = _sql_column(source.schema.names[0])

        rows = 0

        def view_batches():
            nonlocal rows
            for batch in _scan_source(source, scan, row_filter, limit, offset, batch_rows):
                if batch.num_rows == 0:
                    continue
                if expand is not None:
                    for out in expand(batch):
                        if output_limit is not None and rows + out.num_rows > output_limit:
                            out = out.slice(0, output_limit - rows)
                        if out.num_rows > 0:
                            rows += out.num_rows
                            yield out
                        if output_limit is not None and rows >= output_limit:
                            return
                    continue
                arrays = []
                for f in schema:
                    if f.name == "__source_row_id":
                        value = batch.column("_rowid").cast(pa.int64())
                    elif f.name == "__is_set":
                        value = pa.array(np.ones(batch.num_rows, dtype=bool), pa.bool_())
                    elif f.name in projected:
                        value = _cast_column(batch.column(projected[f.name]), f)
                    elif f.name in udf_columns:
                        _, field, udf, inputs = udf_columns[f.name]
                        args = pa.RecordBatch.from_arrays([batch.column(read_aliases[n]) for n in inputs], names=inputs)
                        value = _call(udf, args, field)
                    else:
                        value = pa.nulls(batch.num_rows, f.type)
                    arrays.append(value)
                rows += batch.num_rows
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)

        version, fragments = _overwrite(ns, view_id, view, view_described, schema, view_batches(), max_rows_per_file)
        return {"rows": rows, "version": version, "fragments": fragments}

    def run_udtf(self, ns, resolver, source_at, view_at, schema, request, max_rows_per_file):
        """A udtf view recomputed: the UDTF handed a Geneva query builder over the source at `source_version` (once per partition value)."""
        udtf = self.load_udtf(view_at[1], _field(request, "udf_path", str))
        partition_by = _optional(request, "partition_by", str)
        try:
            query = GenevaQuery.model_validate_json(_field(request, "source_query", str))
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001
            raise Failure("invalid_input", f"source_query is not a GenevaQuery: {e}") from e
        source_id, source, source_version = source_at
        view_id, view, view_described = view_at
        table = _geneva_table(resolver, source_id, source_version)
        base_filter = query.base.filter if isinstance(query.base.filter, str) and query.base.filter.strip() else None
        filters = [base_filter]
        if partition_by is not None:
            # As Geneva's refresh: the UDTF runs once per distinct value of the partition column among the query's rows.
            _top_level_field(source.schema, partition_by)
            values = source.to_table(columns=[partition_by], filter=base_filter).column(partition_by).unique().to_pylist()
            filters = [" AND ".join(f"({f})" for f in (base_filter, _sql_equals(partition_by, v)) if f) for v in sorted(values, key=lambda v: (v is None, v))]
        rows = 0

        def view_batches():
            nonlocal rows
            for row_filter in filters:
                builder = GenevaQueryBuilder.from_query_object(table, query)
                if row_filter is not None:
                    builder = builder.where(row_filter)
                for batch in _guarded(udtf.execute(builder), f"UDTF {udtf.name}"):
                    if isinstance(batch, pa.Table):
                        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else None
                    if batch is None or batch.num_rows == 0:
                        continue
                    try:
                        arrays = [batch.column(f.name).cast(f.type) if batch.schema.get_field_index(f.name) >= 0 else pa.nulls(batch.num_rows, f.type) for f in schema]
                    except Exception as e:  # noqa: BLE001
                        raise Failure("udf", f"UDTF {udtf.name} yielded rows that do not fit the view: {type(e).__name__}: {e}", with_traceback=True) from e
                    rows += batch.num_rows
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)

        version, fragments = _overwrite(ns, view_id, view, view_described, schema, view_batches(), max_rows_per_file)
        return {"rows": rows, "version": version, "fragments": fragments}


def _guarded(items, what):
    """The items of a generator of user code; whatever it raises is a Failure of kind udf naming `what`."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except Exception as e:  # noqa: BLE001
            raise Failure("udf", f"{what} raised {type(e).__name__}: {e}", with_traceback=True) from e
        yield item


def _overwrite(ns, view_id, view, described, schema, batches, max_rows_per_file):
    """Replaces the view's rows with `batches` in one Overwrite commit (keeping `schema`); (version, fragments written)."""
    failed = {}

    def kept():
        try:
            yield from batches
        except Failure as f:
            # Raised through Lance's writer, which keeps only its text: the kind is kept here.
            failed["failure"] = f
            raise

    reader = pa.RecordBatchReader.from_batches(schema, kept())
    try:
        options = {"max_rows_per_file": max_rows_per_file} if max_rows_per_file else {}
        fragments = lance.fragment.write_fragments(reader, view, schema=schema, mode="overwrite", **options)
    except Exception as e:  # noqa: BLE001
        if "failure" in failed:
            raise failed["failure"] from e
        raise
    committed = _commit(ns, view_id, view, described, lance.LanceOperation.Overwrite(schema, fragments))
    return committed.version, len(fragments)


def _geneva_table(resolver, table_id, version):
    """
    The source as a Geneva Table at `version`, for a UDTF's query builder: Geneva in remote mode
    against the resolver, which answers for the source's handle as a table of its root (with the
    storage options the service gives the workers for it).
    """
    try:
        db = geneva.connect("db://udf-worker", host_override=resolver, api_key="unused", region="local")
        table = db.open_table(table_id[-1])
        table.checkout(version)
    except Exception as e:  # noqa: BLE001
        raise Failure("internal", f"cannot open the source (version {version}) for the UDTF: {type(e).__name__}: {e}") from e
    return table


def _sql_equals(column, value):
    """`column = value` in Lance SQL, for a partition value."""
    name = _sql_column(column)
    if value is None:
        return f"{name} IS NULL"
    if isinstance(value, bool):
        return f"{name} = {'TRUE' if value else 'FALSE'}"
    if isinstance(value, (int, float)):
        return f"{name} = {value!r}"
    if isinstance(value, str):
        return f"{name} = '" + value.replace("'", "''") + "'"
    raise Failure("invalid_input", f"partition_by {column}: values of type {type(value).__name__} are not supported")


def _names(request, name):
    value = request.get(name)
    if not (isinstance(value, list) and all(isinstance(c, str) for c in value)):
        raise Failure("invalid_input", f"{name} must be a list of column names")
    return value


def _chunk_rows(chunker, schema, projected, inputs, inherited, batch_rows):
    """
    The view rows of a chunker view for one batch of source rows, as Geneva's ChunkerExpandActor
    makes them: the chunker gets its inputs and `__source_row_id` and yields `__source_row_id`,
    `__child_index` and its outputs; the inherited columns are taken from each view row's source row.
    """
    for name in [*inputs, *inherited]:
        if name not in projected:
            raise Failure("invalid_input", f"the chunker's column {name} is not among the columns read")
    for name in inherited:
        _top_level_field(schema, name)
    outputs = [f.name for f in chunker.output_schema]
    for name in outputs:
        _top_level_field(schema, name)

    def expand(batch):
        ids = batch.column("_rowid").cast(pa.int64())
        args = pa.RecordBatch.from_arrays([batch.column(projected[n]) for n in inputs] + [ids], names=[*inputs, "__source_row_id"])
        for expanded in _guarded(chunker.execute_on_record_batch_iter(args, max_rows=batch_rows), f"chunker {chunker.name}"):
            if expanded.num_rows == 0:
                continue
            try:
                source_ids = expanded.column("__source_row_id").cast(pa.int64())
                positions = pc.index_in(source_ids, value_set=ids)
                if positions.null_count > 0:
                    raise ValueError("it yielded rows for a __source_row_id it was not given")
                arrays = []
                for f in schema:
                    if f.name in ("__source_row_id", "__child_index"):
                        value = expanded.column(f.name).cast(f.type)
                    elif f.name in outputs:
                        value = expanded.column(f.name).cast(f.type)
                    elif f.name in inherited:
                        value = _cast_column(batch.column(projected[f.name]).take(positions), f)
                    else:
                        value = pa.nulls(expanded.num_rows, f.type)
                    arrays.append(value)
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
            except Failure:
                raise
            except Exception as e:  # noqa: BLE001
                raise Failure("udf", f"chunker {chunker.name} yielded rows that do not fit the view: {type(e).__name__}: {e}", with_traceback=True) from e

    return expand


def _optional(request, name, kind):
    value = request.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is int):
        raise Failure("invalid_input", f"{name} must be a {kind.__name__} or null")
    return value


def _open_table(ns, table_id, version):
    """The dataset behind a resolver handle (at `version`, else the latest) and what the resolver said of it."""
    described = ns.describe_table(lance_namespace.DescribeTableRequest(id=table_id))
    try:
        ds = lance.dataset(namespace_client=ns, table_id=table_id, version=version)
    except Exception as e:  # noqa: BLE001
        if re.search(r"not found|does not exist|No such file", str(e), re.I):
            raise Failure("not_found", f"no dataset{'' if version is None else f' version {version}'} at {described.location}: {e}", what="dataset") from e
        raise
    return ds, described


def _commit(ns, table_id, ds, described, operation):
    """One commit made from the version read; through the namespace when the table's versions are managed."""
    try:
        if described.managed_versioning is True:
            return lance.LanceDataset.commit(ds, operation, read_version=ds.version, namespace_client=ns, table_id=table_id, namespace_client_managed_versioning=True)
        return lance.LanceDataset.commit(ds, operation, read_version=ds.version, storage_options=described.storage_options)
    except Exception as e:  # noqa: BLE001
        if CONFLICT.search(str(e)):
            raise Failure("conflict", str(e)) from e
        raise


def _sql_column(name):
    """A source column (dotted path for a nested one) as Lance SQL."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def _view_udf_inputs(udf, input_columns, schema):
    """The source columns a view's UDF reads: the given ones, else the UDF's own; a RecordBatch UDF gets the whole source row."""
    if udf.arg_type == UDFArgType.RECORD_BATCH and not input_columns:
        return list(schema.names)
    inputs = input_columns if input_columns is not None else udf.input_columns
    if not inputs or not all(isinstance(c, str) for c in inputs):
        raise Failure("invalid_input", f"UDF {udf.name} has no input columns")
    for name in inputs:
        if schema.get_field_index(name.split(".", 1)[0]) < 0:
            raise Failure("not_found", f"input column {name} of UDF {udf.name} not found in the source", what="column")
    if udf.input_columns != inputs and udf.arg_type != UDFArgType.RECORD_BATCH:
        udf.input_columns = list(inputs)
    return list(inputs)


def _scan_source(ds, columns, row_filter, limit, offset, batch_rows):
    """The source rows of a view, in batches, with `_rowid`."""
    scan = lambda: ds.scanner(columns=columns, filter=row_filter, limit=limit, offset=offset, with_row_id=True, batch_size=batch_rows)  # noqa: E731
    return _batches(scan, f"cannot read the view's source rows (filter {row_filter!r})")


def _cast_column(values, field):
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type == field.type:
        return values
    try:
        return values.cast(field.type)
    except Exception as e:  # noqa: BLE001
        raise Failure("invalid_input", f"the view column {field.name} is {field.type}, but its expression gives {values.type}: {e}") from e


def _version(module):
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001
        return None


_field = line_protocol.field


def _top_level_field(schema, column):
    index = schema.get_field_index(column)
    if index < 0:
        raise Failure("not_found", f"column {column} not found", what="column")
    return schema.field(index)


def _inputs(udf, input_columns, schema, column):
    """The columns read for the UDF: the given ones, else the UDF's own; all but the output for a RecordBatch UDF."""
    if udf.arg_type == UDFArgType.RECORD_BATCH:
        # Geneva stores a RecordBatch UDF's inputs as [] over the namespace API: it gets the whole
        # row but the column it fills.
        if input_columns:
            raise Failure("invalid_input", f"UDF {udf.name} takes a RecordBatch and declares no input columns, but {input_columns} were given")
        return [name for name in schema.names if name != column]
    inputs = input_columns if input_columns is not None else udf.input_columns
    if not inputs:
        raise Failure("invalid_input", f"UDF {udf.name} has no input columns")
    if column in inputs:
        raise Failure("invalid_input", f"UDF {udf.name} may not read the column it fills ({column})")
    for name in inputs:
        root = name.split(".", 1)[0]
        if schema.get_field_index(root) < 0:
            raise Failure("not_found", f"input column {name} of UDF {udf.name} not found", what="column")
    if udf.input_columns != inputs:
        # As Geneva's backfill does with the column's recorded inputs (add_columns({"c": (udf, [...])})).
        udf.input_columns = list(inputs)
    return list(inputs)


def _scan(ds, columns, row_filter, batch_rows):
    """The rows to fill, in batches."""
    scan = lambda: ds.scanner(columns=columns, filter=row_filter, with_row_id=True, with_row_address=True, batch_size=batch_rows)  # noqa: E731
    return _batches(scan, f"cannot read the rows matching {row_filter!r}")


def _batches(scanner, failure):
    """The batches of `scanner()`. Lance reports a request it cannot plan (a malformed filter) as ValueError: invalid input."""
    try:
        batches = iter(scanner().to_batches())
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            yield batch
    except ValueError as e:
        raise Failure("invalid_input", f"{failure}: {e}") from e


def _call(udf, batch, field):
    """The UDF over one batch as Geneva's applier calls it, as an Array of the column's type."""
    try:
        result = udf(batch, use_applier=True)
    except Exception as e:  # noqa: BLE001
        raise Failure("udf", f"UDF {udf.name} raised {type(e).__name__}: {e}", with_traceback=True) from e
    try:
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        if not isinstance(result, pa.Array):
            result = pa.array(result, type=field.type)
        if result.type != field.type:
            result = result.cast(field.type)
    except Exception as e:  # noqa: BLE001
        raise Failure("udf", f"UDF {udf.name} returned values that are not {field.type} (the type of column {field.name}): {e}", with_traceback=True) from e
    if len(result) != batch.num_rows:
        raise Failure("udf", f"UDF {udf.name} returned {len(result)} values for {batch.num_rows} rows")
    if not field.nullable and result.null_count > 0:
        raise Failure("udf", f"UDF {udf.name} returned nulls for the non-nullable column {field.name}")
    return result


_ray_call = None


def _on_ray(udf, batches, field):
    """(batch, values) for each batch, the UDF called as Ray tasks on the cluster, all batches at once."""
    global _ray_call
    import ray

    if _ray_call is None:
        # Ray's own output must not reach the protocol: it goes to stderr like everything else.
        ray.init(address=RAY_ADDRESS, logging_level="ERROR", log_to_driver=False, ignore_reinit_error=True)
        _ray_call = ray.remote(max_retries=1)(_call)
    batches = list(batches)
    shared = ray.put(udf)
    pending = [_ray_call.remote(shared, b.drop_columns(["_rowid"]), field) for b in batches]
    try:
        results = ray.get(pending)
    except Exception as e:  # noqa: BLE001
        cause = getattr(e, "cause", None)
        if isinstance(cause, Failure):
            raise cause from e
        raise Failure("internal", f"the Ray cluster at {RAY_ADDRESS} did not run the UDF: {type(e).__name__}: {e}") from e
    return zip(batches, results)


def _download(ds, path):
    session = ds.new_file_session()
    with tempfile.TemporaryDirectory(prefix="udf-") as tmp:
        local = os.path.join(tmp, "envelope")
        session.download_file(path, local)
        with open(local, "rb") as f:
            return f.read()


def main():
    worker = Worker()
    line_protocol.serve(_requests, _respond, {"ping": worker.ping, "fill": worker.fill, "materialize": worker.materialize})


if __name__ == "__main__":
    main()
