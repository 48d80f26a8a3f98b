"""Geneva 0.17 in remote mode against the service (run by geneva.test.ts with .venv-udf's Python).

GENEVA_URL is the service. GENEVA_PHASE picks what runs:
- "backfill": Python UDF columns on a 100,000-row table, backfilled blocking and async, a `where`
  backfill, a column rebound to another UDF, a failing UDF; values checked row by row.
- "off": the same calls against a service without udf_execution get the 406 that says how to enable it.
- "kill-start" / "kill-finish": a backfill started, then (after the test SIGKILLed the service
  half-way and started it again) followed to its end through Geneva's job table and checked.
  GENEVA_STATE is a file the two phases share.
"""

import json
import os
import sys

import geneva
import geneva.cloudpickle as gcp
import pyarrow as pa
import pytest
from geneva import udf

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


@pytest.mark.skipif(PHASE != "off", reason="phase")
def test_without_udf_execution_the_calls_get_a_406_saying_how_to_enable_it():
    db = connect()
    t = db.create_table("no_udfs", numbers(100))
    with pytest.raises(Exception, match="udf_execution local or ray") as refused:
        t.add_columns({"d": times_two})
    assert "Unsupported" in type(refused.value).__name__ or "406" in str(refused.value) or "Unsupported" in str(refused.value)


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
