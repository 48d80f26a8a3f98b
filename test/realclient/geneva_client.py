"""Geneva 0.17 in remote mode against the service (run by geneva.test.ts with .venv-udf's Python).

GENEVA_URL is the service. GENEVA_PHASE picks what runs:
- "backfill": Python UDF columns on a 100,000-row table, backfilled blocking and async, a `where`
  backfill, a column rebound to another UDF, a failing UDF; values checked row by row.
- "matview": a query materialized view with a UDF column, created, refreshed (blocking, then async
  after the source changed) and read back row by row; one created with with_no_data=False; a
  failing UDF in a view; chunker views (create_udtf_view with a @chunker) refreshed and checked
  against what the chunker yields locally, with output_limit, and a failing chunker; udtf views
  (create_udtf_view with a @udtf, partitioned and not) checked against the UDTF run locally.
- "off": the same calls against a service without udf_execution get the 406 that says how to enable it.
- "kill-start" / "kill-finish": a backfill started, then (after the test SIGKILLed the service
  half-way and started it again) followed to its end through Geneva's job table and checked.
  GENEVA_STATE is a file the two phases share.
"""

import json
import os
import sys
from typing import Iterator, NamedTuple

import geneva
import geneva.cloudpickle as gcp
import pyarrow as pa
import pytest
from geneva import udf
from geneva.transformer import chunker, udtf

# The UDFs below are pickled by value: the service's worker cannot import this test module.
gcp.register_pickle_by_value(sys.modules[__name__])

URL = os.environ["GENEVA_URL"]
PHASE = os.environ.get("GENEVA_PHASE", "backfill")
ROWS = 100_000


@udf(data_type=pa.int64())
def times_two(a: int) -> int:
    return a * 2


@udf(data_type=pa.string())
def label(a: pa.Array, b: pa.Array) -> pa.Array:
    return pa.array([f"{x}-{y}" for x, y in zip(a.to_pylist(), b.to_pylist())], pa.string())


@udf(data_type=pa.float64())
def halve(a: int) -> float:
    return a / 2


@udf(data_type=pa.int64())
def halve_as_int(a: int) -> int:
    return a // 2


@udf(data_type=pa.int64())
def fails_on_777(a: int) -> int:
    if a == 777:
        raise ValueError("row 777 is cursed")
    return a


class Piece(NamedTuple):
    label: str
    k: int


def split_row(a: int) -> Iterator[Piece]:
    # a % 4 view rows for row a: none to three.
    for k in range(a % 4):
        yield Piece(label=f"{a}/{k}", k=k)


pieces = chunker(split_row)
pieces_keeping_a = chunker(inherit_input_columns=True)(split_row)


@chunker
def chunks_fail_on_777(a: int) -> Iterator[Piece]:
    if a == 777:
        raise ValueError("row 777 cannot be chunked")
    yield Piece(label=str(a), k=0)


B_SUMS = pa.schema([pa.field("b", pa.int64()), pa.field("n", pa.int64()), pa.field("total", pa.int64())])


def sums_of_a_by_b(source):
    # One row per value of b among the rows it is given: how many, and the sum of their a.
    t = source.to_arrow()
    groups = {}
    for a, b in zip(t["a"].to_pylist(), t["b"].to_pylist()):
        groups.setdefault(b, []).append(a)
    keys = sorted(groups)
    yield pa.RecordBatch.from_pydict({"b": keys, "n": [len(groups[k]) for k in keys], "total": [sum(groups[k]) for k in keys]}, schema=B_SUMS)


sums_by_b = udtf(sums_of_a_by_b, output_schema=B_SUMS, input_columns=["a", "b"])
sums_per_b = udtf(sums_of_a_by_b, output_schema=B_SUMS, input_columns=["a", "b"], partition_by="b")


@udtf(output_schema=B_SUMS, input_columns=["a"])
def udtf_fails(source):
    raise ValueError("this UDTF always fails")
    yield


def connect():
    return geneva.connect("db://tests", host_override=URL, api_key="unused", region="us-east-1")


def numbers(n=ROWS):
    return pa.table({"a": pa.array(range(n), pa.int64()), "b": pa.array([i % 7 for i in range(n)], pa.int64())})


def column(db, table, name):
    # Every row, read through Lance from where the service keeps the table (to_arrow() is a query with a default limit).
    t = db.open_table(table).to_lance().to_table(columns=["a", name]).sort_by("a")
    return t["a"].to_pylist(), t[name].to_pylist()


@pytest.mark.skipif(PHASE != "backfill", reason="phase")
def test_blocking_backfill_of_a_scalar_udf():
    db = connect()
    t = db.create_table("blocking", numbers())
    t.add_columns({"d": times_two})
    field = db.open_table("blocking").schema.field("d")
    meta = {k.decode(): v.decode() for k, v in (field.metadata or {}).items()}
    assert meta["virtual_column"] == "true"
    assert meta["virtual_column.udf_backend"] == "DockerUDFSpecV1"
    assert meta["virtual_column.udf"].startswith("_udfs/")
    assert json.loads(meta["virtual_column.udf_inputs"]) == ["a"]
    result = t.backfill("d", checkpoint_size=25_000)
    assert result.status == "DONE"
    a, d = column(db, "blocking", "d")
    assert len(a) == ROWS
    assert d == [x * 2 for x in a]


@pytest.mark.skipif(PHASE != "backfill", reason="phase")
def test_async_backfill_of_a_batch_udf():
    db = connect()
    t = db.create_table("async_batch", numbers())
    t.add_columns({"l": label})
    job = t.backfill_async("l")
    job.result(timeout=600)
    a, l = column(db, "async_batch", "l")
    assert len(a) == ROWS
    assert l == [f"{x}-{x % 7}" for x in a]
    # Geneva's job table has the job, done, with its progress.
    record = db.get_job(job.job_id)
    status = record.status.value if hasattr(record.status, "value") else str(record.status)
    assert status == "DONE"
    assert any(m.name == "rows_checkpointed" and m.n == ROWS for m in record.metrics)


@pytest.mark.skipif(PHASE != "backfill", reason="phase")
def test_where_backfill_leaves_unselected_rows_alone():
    db = connect()
    t = db.create_table("where_rows", numbers(20_000))
    t.add_columns({"h": halve})
    t.backfill("h", where="b = 3")
    a, h = column(db, "where_rows", "h")
    assert len(a) == 20_000
    assert h == [x / 2 if x % 7 == 3 else None for x in a]


@pytest.mark.skipif(PHASE != "backfill", reason="phase")
def test_alter_columns_rebinds_the_udf():
    db = connect()
    t = db.create_table("rebound", numbers(10_000))
    t.add_columns({"r": times_two})
    t.backfill("r")
    t.alter_columns({"path": "r", "udf": halve_as_int})
    t.backfill("r")
    a, r = column(db, "rebound", "r")
    assert r == [x // 2 for x in a]


@pytest.mark.skipif(PHASE != "backfill", reason="phase")
def test_a_failing_udf_shows_geneva_the_error():
    db = connect()
    t = db.create_table("failing", numbers(5_000))
    t.add_columns({"f": fails_on_777})
    with pytest.raises(RuntimeError, match="row 777 is cursed"):
        t.backfill("f")


def view_rows(db, name):
    # Every row of the view, read through Lance, by the source's `a`.
    return db.open_table(name).to_lance().to_table().sort_by("a")


def source_row_ids(db, name):
    t = db.open_table(name).to_lance().to_table(columns=["a"], with_row_id=True)
    return dict(zip(t["a"].to_pylist(), t["_rowid"].to_pylist()))


def check_view(db, view, source, ids):
    t = view_rows(db, view)
    assert t.schema.names == ["__source_row_id", "__is_set", "a", "b", "d"]
    assert t["a"].to_pylist() == ids
    assert t["b"].to_pylist() == [i % 7 for i in ids]
    assert t["d"].to_pylist() == [i * 2 for i in ids]
    assert t["__is_set"].to_pylist() == [True] * len(ids)
    rowid = source_row_ids(db, source)
    assert t["__source_row_id"].to_pylist() == [rowid[i] for i in ids]


@pytest.mark.skipif(PHASE != "matview", reason="phase")
def test_query_materialized_view_refreshed_blocking_then_async():
    db = connect()
    n = 20_000
    src = db.create_table("mv_src", numbers(n))
    view = db.create_materialized_view("mv", src.search().where("b = 3").select({"a": "a", "b": "b", "d": times_two}))
    assert view.schema.names == ["__source_row_id", "__is_set", "a", "b", "d"]
    result = view.refresh()
    assert result.status == "DONE"
    ids = [i for i in range(n) if i % 7 == 3]
    assert result.rows_refreshed == len(ids)
    check_view(db, "mv", "mv_src", ids)
    # Geneva's own query over the view.
    found = db.open_table("mv").search().where("a < 100").select(["a", "d"]).to_arrow().sort_by("a")
    assert found["a"].to_pylist() == [i for i in ids if i < 100]
    assert found["d"].to_pylist() == [i * 2 for i in ids if i < 100]
    # The source changes: rows appended and deleted; an async refresh recomputes the view.
    src.add(numbers(n + 14).slice(n))
    src.delete("a < 1000")
    job = db.open_table("mv").refresh_async()
    job.result(timeout=600)
    check_view(db, "mv", "mv_src", [i for i in range(n + 14) if i % 7 == 3 and i >= 1000])


@pytest.mark.skipif(PHASE != "matview", reason="phase")
def test_a_view_created_with_data_is_refreshed_by_the_service():
    from geneva.jobs.remote import RemoteJob

    db = connect()
    src = db.create_table("mv_src2", numbers(5_000))
    db.create_materialized_view("mv_now", src.search().where("a < 100").select({"a": "a", "b": "b", "d": times_two}), with_no_data=False)
    jobs = db.list_jobs(table_name="mv_now")
    assert len(jobs) == 1
    record = RemoteJob.from_job(db, jobs[0].job_id).result(timeout=600)
    status = record.status.value if hasattr(record.status, "value") else str(record.status)
    assert status == "DONE"
    check_view(db, "mv_now", "mv_src2", list(range(100)))


@pytest.mark.skipif(PHASE != "matview", reason="phase")
def test_a_failing_udf_in_a_view_shows_geneva_the_error():
    db = connect()
    src = db.create_table("mv_src3", numbers(2_000))
    view = db.create_materialized_view("mv_failing", src.search().select({"a": "a", "f": fails_on_777}))
    with pytest.raises(RuntimeError, match="row 777 is cursed"):
        view.refresh()


def expected_chunks(db, source, where, chunk, inherited):
    """What `chunk` yields for the source rows matching `where`, run here as Geneva's refresh runs it, with the inherited columns."""
    t = db.open_table(source).to_lance().to_table(columns=["a", "b"], filter=where, with_row_id=True)
    ids = t["_rowid"].cast(pa.int64())
    out = chunk.execute_on_record_batch(pa.RecordBatch.from_arrays([t["a"].combine_chunks(), ids.combine_chunks()], names=["a", "__source_row_id"]))
    by_id = {rid: {c: t[c][i].as_py() for c in inherited} for i, rid in enumerate(ids.to_pylist())}
    rows = [{**r, **by_id[r["__source_row_id"]]} for r in out.to_pylist()]
    return sorted(rows, key=lambda r: (r["__source_row_id"], r["__child_index"]))


def chunk_rows(db, name):
    return sorted(db.open_table(name).to_lance().to_table().to_pylist(), key=lambda r: (r["__source_row_id"], r["__child_index"]))


@pytest.mark.skipif(PHASE != "matview", reason="phase")
def test_chunker_view_refreshed_blocking_with_output_limit_then_async():
    db = connect()
    src = db.create_table("chunk_src", numbers(3_000))
    view = db.create_udtf_view("chunks", src.search().where("a < 1000").select(["a", "b"]), pieces)
    # The chunker's input `a` is not inherited (Geneva's default); `b` is.
    assert view.schema.names == ["__source_row_id", "__child_index", "b", "label", "k"]
    result = view.refresh()
    assert result.status == "DONE"
    expected = expected_chunks(db, "chunk_src", "a < 1000", pieces, ["b"])
    assert len(expected) == sum(i % 4 for i in range(1000))
    assert result.rows_refreshed == len(expected)
    assert chunk_rows(db, "chunks") == expected
    # output_limit (which Geneva only sends for a view whose metadata says chunker): the first rows.
    db.open_table("chunks").refresh(output_limit=10)
    assert chunk_rows(db, "chunks") == expected[:10]
    # The source changes; an async refresh recomputes the view.
    src.add(numbers(3_005).slice(3_000))
    src.delete("a < 100")
    db.open_table("chunks").refresh_async().result(timeout=600)
    assert chunk_rows(db, "chunks") == expected_chunks(db, "chunk_src", "a < 1000", pieces, ["b"])
    # inherit_input_columns=True keeps the input in the view.
    kept = db.create_udtf_view("chunks_a", src.search().where("a < 50"), pieces_keeping_a, with_no_data=False)
    assert kept.schema.names == ["__source_row_id", "__child_index", "a", "b", "label", "k"]
    from geneva.jobs.remote import RemoteJob

    jobs = db.list_jobs(table_name="chunks_a")
    assert len(jobs) == 1
    RemoteJob.from_job(db, jobs[0].job_id).result(timeout=600)
    assert chunk_rows(db, "chunks_a") == expected_chunks(db, "chunk_src", "a < 50", pieces_keeping_a, ["a", "b"])


@pytest.mark.skipif(PHASE != "matview", reason="phase")
def test_a_failing_chunker_shows_geneva_the_error():
    db = connect()
    src = db.create_table("chunk_src2", numbers(1_000))
    view = db.create_udtf_view("chunks_failing", src.search(), chunks_fail_on_777)
    with pytest.raises(RuntimeError, match="row 777 cannot be chunked"):
        view.refresh()


def sums_expected(n, keep):
    groups = {}
    for a in range(n):
        if keep(a):
            groups.setdefault(a % 7, []).append(a)
    return [{"b": k, "n": len(groups[k]), "total": sum(groups[k])} for k in sorted(groups)]


@pytest.mark.skipif(PHASE != "matview", reason="phase")
def test_udtf_views_refreshed_whole_and_per_partition():
    db = connect()
    src = db.create_table("udtf_src", numbers(5_000))
    view = db.create_udtf_view("sums", src.search().where("a < 4000"), sums_by_b)
    assert view.schema.names == ["b", "n", "total"]
    result = view.refresh()
    assert result.status == "DONE"
    assert sorted(db.open_table("sums").to_lance().to_table().to_pylist(), key=lambda r: r["b"]) == sums_expected(5_000, lambda a: a < 4000)
    # Partitioned by b: the UDTF runs once per value of b, and the rows are the same.
    db.create_udtf_view("sums_per_b", src.search().where("a >= 1000"), sums_per_b)
    src.delete("a % 2 = 0")
    db.open_table("sums_per_b").refresh_async().result(timeout=600)
    assert sorted(db.open_table("sums_per_b").to_lance().to_table().to_pylist(), key=lambda r: r["b"]) == sums_expected(5_000, lambda a: a >= 1000 and a % 2 == 1)
    failing = db.create_udtf_view("sums_failing", src.search(), udtf_fails)
    with pytest.raises(RuntimeError, match="this UDTF always fails"):
        failing.refresh()


@pytest.mark.skipif(PHASE != "off", reason="phase")
def test_without_udf_execution_the_calls_get_a_406_saying_how_to_enable_it():
    db = connect()
    t = db.create_table("no_udfs", numbers(100))
    with pytest.raises(Exception, match="udf_execution local or ray") as refused:
        t.add_columns({"d": times_two})
    assert "Unsupported" in type(refused.value).__name__ or "406" in str(refused.value) or "Unsupported" in str(refused.value)
    with pytest.raises(Exception, match="udf_execution local or ray"):
        db.create_materialized_view("no_udfs_view", t.search().select({"a": "a", "d": times_two}))
    with pytest.raises(Exception, match="udf_execution local or ray"):
        db.create_udtf_view("no_udfs_chunks", t.search(), pieces)
    with pytest.raises(Exception, match="udf_execution local or ray"):
        db.create_udtf_view("no_udfs_sums", t.search(), sums_by_b)


@pytest.mark.skipif(PHASE != "kill-start", reason="phase")
def test_start_a_backfill_to_be_killed():
    db = connect()
    t = db.create_table("killed", numbers())
    t.add_columns({"d": times_two})
    job = t.backfill_async("d", checkpoint_size=10_000)
    with open(os.environ["GENEVA_STATE"], "w") as f:
        json.dump({"job_id": job.job_id}, f)


@pytest.mark.skipif(PHASE != "kill-finish", reason="phase")
def test_the_killed_backfill_finishes_after_the_restart():
    from geneva.jobs.remote import RemoteJob

    db = connect()
    with open(os.environ["GENEVA_STATE"]) as f:
        job_id = json.load(f)["job_id"]
    record = RemoteJob.from_job(db, job_id).result(timeout=600)
    status = record.status.value if hasattr(record.status, "value") else str(record.status)
    assert status == "DONE"
    a, d = column(db, "killed", "d")
    assert len(a) == ROWS
    assert d == [x * 2 for x in a]
