"""The generated Python client (lance_namespace_urllib3_client 0.13.0) against the service.

Standalone pytest file; the service URL comes from LANCE_NS_URL (test/realclient/generated-client.test.ts
starts the service on a fresh local root and runs this file). Each operation the service implements
is called through the client the OpenAPI generator made from the Lance Namespace spec:
- a successful call, whose response the client deserializes into its model (key fields checked);
- each error the operation can give, which the client must raise as its typed exception for the
  HTTP status (NotFoundException, ConflictException, BadRequestException; a plain ApiException for
  406, for which the client has no subclass) with the spec's error code in the body.
`@covers(...)` records which operation ids each test exercises; test_every_operation_is_covered
compares them with the operations the service's /openapi.json lists and the seed document names.
test_openapi_agrees_with_client_models checks the service's response schemas against the client's
models field by field (a field the model lacks, a type it would reject, a required field the
service may omit).

Every test uses namespaces of its own, so the tests are independent of each other and of order.
"""

import base64
import datetime
import inspect
import json
import os
import re
import shutil
import tempfile
import time
import typing
import uuid
from urllib.parse import quote

import lance
import pyarrow as pa
import pytest
import urllib3
from pydantic import BaseModel

import lance_namespace_urllib3_client as client
from lance_namespace_urllib3_client import models as m
from lance_namespace_urllib3_client.exceptions import (
    ApiException,
    BadRequestException,
    ConflictException,
    ForbiddenException,
    NotFoundException,
    UnauthorizedException,
)

VECTOR_TYPE = pa.list_(pa.float32(), 4)
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("vec", VECTOR_TYPE)])

# Operation id -> the tests that exercise it (filled at import by @covers).
COVERED: dict[str, list[str]] = {}

# The 19 operations of the seed document (/work/shared/seed), by the spec's operation ids.
SEED_OPERATIONS = {
    "DescribeTableIndexStats",
    "CreateTableVersion",
    "DescribeTable",
    "AnalyzeTableQueryPlan",
    "BatchCreateTableVersions",
    "AlterTableBackfillColumns",
    "AlterTransaction",
    "GetTableStats",
    "AlterTableAlterColumns",
    "DescribeTableVersion",
    "UpdateTable",
    "DescribeNamespace",
    "RegisterTable",
    "NamespaceExists",
    "DeleteFromTable",
    "DescribeTransaction",
    "AlterTableDropColumns",
    "UpdateTableTag",
    "ListTableVersions",
}


def covers(*operation_ids: str):
    def mark(test):
        for op in operation_ids:
            COVERED.setdefault(op, []).append(test.__name__)
        return test

    return mark


# ---------------------------------------------------------------------------------------------
# Fixtures and helpers


def server_url() -> str:
    url = os.environ.get("LANCE_NS_URL")
    if not url:
        pytest.fail("LANCE_NS_URL is not set: run this file through test/realclient/generated-client.test.ts")
    return url


@pytest.fixture(scope="module")
def api():
    with client.ApiClient(client.Configuration(host=server_url())) as api_client:
        yield api_client


@pytest.fixture(scope="module")
def namespaces(api):
    return client.NamespaceApi(api)


@pytest.fixture(scope="module")
def tables(api):
    return client.TableApi(api)


@pytest.fixture(scope="module")
def tags(api):
    return client.TagApi(api)


@pytest.fixture(scope="module")
def indices(api):
    return client.IndexApi(api)


@pytest.fixture(scope="module")
def transactions(api):
    return client.TransactionApi(api)


@pytest.fixture(scope="module")
def http():
    return urllib3.PoolManager()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def tid(*parts: str) -> str:
    """The path id of a namespace or table: its parts joined by the default delimiter."""
    return "$".join(parts)


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"row-{i}" for i in ids], pa.string()),
            "vec": pa.array([[i + 0.5, i * 0.25, -i * 1.0, (i % 7) * 1.0] for i in ids], VECTOR_TYPE),
        },
        schema=SCHEMA,
    )


def ipc_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def error_of(exc: ApiException) -> m.ErrorResponse:
    """The error body as the client's ErrorResponse. The client deserializes it itself for the
    statuses its operation lists (exc.data); for others (409 and 406 on most operations) it keeps
    only the text, which must then parse into the same model."""
    if exc.data is not None:
        assert isinstance(exc.data, m.ErrorResponse), f"error body deserialized as {type(exc.data).__name__}"
        return exc.data
    assert exc.body, "error response without a body"
    return m.ErrorResponse.from_json(exc.body)


def expect_error(call, exc_type: type, status: int, code: int) -> m.ErrorResponse:
    """`call` raises exactly the client's `exc_type` with this HTTP status and spec error code."""
    with pytest.raises(ApiException) as info:
        call()
    exc = info.value
    body = exc.body
    assert type(exc) is exc_type, f"raised {type(exc).__name__} (status {exc.status}), expected {exc_type.__name__}: {body}"
    assert exc.status == status, body
    err = error_of(exc)
    assert err.code == code, f"code {err.code}, expected {code}: {body}"
    assert err.error, f"error without a message: {body}"
    return err


def new_namespace(namespaces, prefix: str = "ns") -> str:
    name = unique(prefix)
    namespaces.create_namespace(tid(name), m.CreateNamespaceRequest())
    return name


def create_table(tables, ns: str, name: str, data: pa.Table) -> m.CreateTableResponse:
    return tables.create_table(tid(ns, name), ipc_stream(data))


def table_dir(tables, ns: str, name: str) -> str:
    """The table's directory on the local root, from its described location."""
    location = tables.describe_table(tid(ns, name), m.DescribeTableRequest()).location
    return location[len("file://") :] if location.startswith("file://") else location


def latest_version(tables, ns: str, name: str) -> int:
    listed = tables.list_table_versions(tid(ns, name), descending=True, limit=1)
    return listed.versions[0].version


def stage_next_manifest(tables, ns: str, name: str, ahead: int = 1) -> tuple[int, str]:
    """Stages, in the table's _versions/, a Lance manifest of the next version (or `ahead` versions
    on) as a Lance client would before calling CreateTableVersion; returns (version, manifest path
    relative to the table).

    Made by schema-metadata commits on a copy of the table (so no data file is added and the copy's
    new manifest is valid for the original), then copied under a staged name `<final>-<uuid>`."""
    directory = table_dir(tables, ns, name)
    version = latest_version(tables, ns, name) + ahead
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "t.lance")
        shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("_catalog", ".lance-*"))
        dataset = lance.dataset(copy)
        for _ in range(ahead):
            before = set(os.listdir(os.path.join(copy, "_versions")))
            dataset.update_schema_metadata({"staged": uuid.uuid4().hex})
            made = [f for f in set(os.listdir(os.path.join(copy, "_versions"))) - before if f.endswith(".manifest")]
            assert len(made) == 1, made
        assert dataset.version == version
        staged = f"_versions/{made[0]}-{uuid.uuid4()}"
        shutil.copyfile(os.path.join(copy, "_versions", made[0]), os.path.join(directory, staged))
    return version, staged


def read_arrow_file(data: bytes | bytearray) -> pa.Table:
    return pa.ipc.open_file(pa.BufferReader(bytes(data))).read_all()


# ---------------------------------------------------------------------------------------------
# Namespaces


# The client lists with GET (list_namespaces, list_tables, list_all_tables); the service's POST forms
# of these are called in test_routes_without_a_client_method.


@covers("CreateNamespace", "DescribeNamespace", "NamespaceExists", "ListNamespacesGet", "DropNamespace")
def test_namespace_lifecycle(namespaces):
    parent = unique("ns")
    created = namespaces.create_namespace(tid(parent), m.CreateNamespaceRequest(properties={"owner": "etl"}))
    assert isinstance(created, m.CreateNamespaceResponse)
    assert created.properties == {"owner": "etl"}
    namespaces.create_namespace(tid(parent, "child"), m.CreateNamespaceRequest())

    described = namespaces.describe_namespace(tid(parent), m.DescribeNamespaceRequest())
    assert isinstance(described, m.DescribeNamespaceResponse)
    assert described.properties == {"owner": "etl"}
    assert described.context is None
    # A context sent comes back in the answer's context field.
    traced = namespaces.describe_namespace(tid(parent), m.DescribeNamespaceRequest(context={"trace": "t-1"}))
    assert traced.context == {"trace": "t-1"}
    assert traced.properties == {"owner": "etl"}

    assert namespaces.namespace_exists(tid(parent), m.NamespaceExistsRequest()) is None

    listed = namespaces.list_namespaces(tid(parent))
    assert isinstance(listed, m.ListNamespacesResponse)
    assert listed.namespaces == ["child"]
    root = namespaces.list_namespaces("$")
    assert parent in root.namespaces

    dropped = namespaces.drop_namespace(tid(parent), m.DropNamespaceRequest(behavior="Cascade"))
    assert isinstance(dropped, m.DropNamespaceResponse)
    expect_error(lambda: namespaces.namespace_exists(tid(parent), m.NamespaceExistsRequest()), NotFoundException, 404, 1)


@covers("CreateNamespace", "DescribeNamespace", "NamespaceExists", "ListNamespacesGet", "DropNamespace", "ListTablesGet")
def test_namespace_errors(namespaces, tables):
    ns = new_namespace(namespaces)
    missing = unique("missing")
    # 409 code 2: exists.
    expect_error(lambda: namespaces.create_namespace(tid(ns), m.CreateNamespaceRequest()), ConflictException, 409, 2)
    # 404 code 1: the parent does not exist.
    expect_error(lambda: namespaces.create_namespace(tid(missing, "c"), m.CreateNamespaceRequest()), NotFoundException, 404, 1)
    # 400 code 13: an invalid name, and an unknown mode.
    expect_error(lambda: namespaces.create_namespace(".hidden", m.CreateNamespaceRequest()), BadRequestException, 400, 13)
    expect_error(lambda: namespaces.create_namespace(tid(unique("ns")), m.CreateNamespaceRequest(mode="sometimes")), BadRequestException, 400, 13)
    # 404 code 1 for every operation on a namespace that does not exist.
    expect_error(lambda: namespaces.describe_namespace(tid(missing), m.DescribeNamespaceRequest()), NotFoundException, 404, 1)
    expect_error(lambda: namespaces.namespace_exists(tid(missing), m.NamespaceExistsRequest()), NotFoundException, 404, 1)
    expect_error(lambda: namespaces.list_namespaces(tid(missing)), NotFoundException, 404, 1)
    expect_error(lambda: namespaces.list_tables(tid(missing)), NotFoundException, 404, 1)
    expect_error(lambda: namespaces.drop_namespace(tid(missing), m.DropNamespaceRequest()), NotFoundException, 404, 1)
    # ... unless told to skip.
    assert isinstance(namespaces.drop_namespace(tid(missing), m.DropNamespaceRequest(mode="Skip")), m.DropNamespaceResponse)
    # 409 code 3: not empty (Restrict is the default behaviour).
    namespaces.create_namespace(tid(ns, "child"), m.CreateNamespaceRequest())
    expect_error(lambda: namespaces.drop_namespace(tid(ns), m.DropNamespaceRequest()), ConflictException, 409, 3)
    # 400 code 13: a limit below zero.
    expect_error(lambda: namespaces.list_namespaces(tid(ns), limit=-1), BadRequestException, 400, 13)


# ---------------------------------------------------------------------------------------------
# Tables: declare, create, describe, list, exists, drop, deregister, register, rename


@covers("DeclareTable", "DescribeTable", "TableExists", "ListTablesGet")
def test_declare_and_describe_declared(namespaces, tables):
    ns = new_namespace(namespaces)
    declared = tables.declare_table(tid(ns, "t"), m.DeclareTableRequest(properties={"k": "v"}))
    assert isinstance(declared, m.DeclareTableResponse)
    assert declared.location and declared.location.endswith("t.lance")
    assert declared.managed_versioning is False
    assert declared.properties == {"k": "v"}

    described = tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(), check_declared=True)
    assert isinstance(described, m.DescribeTableResponse)
    assert described.is_only_declared is True
    assert described.location == declared.location
    assert tables.table_exists(tid(ns, "t"), m.TableExistsRequest()) is None

    assert tables.list_tables(tid(ns)).tables == ["t"]
    assert tables.list_tables(tid(ns), include_declared=False).tables == []

    # 409 code 5: declared again; 404 code 1: no such namespace.
    expect_error(lambda: tables.declare_table(tid(ns, "t"), m.DeclareTableRequest()), ConflictException, 409, 5)
    expect_error(lambda: tables.declare_table(tid(unique("missing"), "t"), m.DeclareTableRequest()), NotFoundException, 404, 1)
    # 409 code 19: detailed metadata of a table without data.
    expect_error(lambda: tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(load_detailed_metadata=True)), ConflictException, 409, 19)


@covers("CreateTable", "DescribeTable", "TableExists", "ListTablesGet", "ListAllTablesGet")
def test_create_table_from_arrow_and_describe(namespaces, tables):
    ns = new_namespace(namespaces)
    created = tables.create_table(tid(ns, "t"), ipc_stream(rows(0, 5)), properties=json.dumps({"team": "eng"}))
    assert isinstance(created, m.CreateTableResponse)
    assert created.version == 1
    assert created.location and created.location.endswith("t.lance")
    assert created.properties == {"team": "eng"}

    described = tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(), load_detailed_metadata=True, with_table_uri=True, check_declared=True)
    assert described.table == "t"
    assert described.namespace == [ns]
    assert described.version == 1
    assert described.table_uri
    assert described.is_only_declared is False
    assert isinstance(described.var_schema, m.JsonArrowSchema)
    assert [f.name for f in described.var_schema.fields] == ["id", "name", "vec"]
    assert described.var_schema.fields[0].type.type == "int64"
    assert isinstance(described.stats, m.TableBasicStats)
    assert described.stats.num_fragments == 1
    assert described.stats.num_deleted_rows == 0
    assert described.properties == {"team": "eng"}

    # An empty stream makes an empty table.
    empty = tables.create_table(tid(ns, "empty"), ipc_stream(rows(0, 0)))
    assert empty.version == 1

    assert tables.list_tables(tid(ns)).tables == ["empty", "t"]
    page = tables.list_tables(tid(ns), limit=1)
    assert page.tables == ["empty"] and page.page_token
    assert tables.list_tables(tid(ns), limit=1, page_token=page.page_token).tables == ["t"]

    everything = tables.list_all_tables()
    assert isinstance(everything, m.ListTablesResponse)
    assert tid(ns, "t") in everything.tables


@covers("CreateTable", "DescribeTable", "TableExists")
def test_create_and_describe_errors(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 3))
    # 409 code 5: exists; 404 code 1: no namespace; 400 code 13: not an Arrow stream.
    expect_error(lambda: create_table(tables, ns, "t", rows(0, 1)), ConflictException, 409, 5)
    expect_error(lambda: create_table(tables, unique("missing"), "t", rows(0, 1)), NotFoundException, 404, 1)
    expect_error(lambda: tables.create_table(tid(ns, "junk"), b"not arrow"), BadRequestException, 400, 13)
    # 404 code 4: no such table; 404 code 11: no such version.
    expect_error(lambda: tables.describe_table(tid(ns, "nope"), m.DescribeTableRequest()), NotFoundException, 404, 4)
    expect_error(lambda: tables.table_exists(tid(ns, "nope"), m.TableExistsRequest()), NotFoundException, 404, 4)
    expect_error(lambda: tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(version=99, load_detailed_metadata=True)), NotFoundException, 404, 11)
    # 400 code 13: a body id that disagrees with the path.
    expect_error(lambda: tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(id=[ns, "other"])), BadRequestException, 400, 13)


@covers("DropTable", "DeregisterTable", "RegisterTable", "RenameTable")
def test_drop_deregister_register_rename(namespaces, tables):
    ns = new_namespace(namespaces)
    for name in ("a", "b", "c"):
        create_table(tables, ns, name, rows(0, 2))

    dropped = tables.drop_table(tid(ns, "a"))
    assert isinstance(dropped, m.DropTableResponse)
    assert dropped.id == [ns, "a"]
    expect_error(lambda: tables.drop_table(tid(ns, "a")), NotFoundException, 404, 4)

    location_b = tables.describe_table(tid(ns, "b"), m.DescribeTableRequest()).location
    deregistered = tables.deregister_table(tid(ns, "b"), m.DeregisterTableRequest())
    assert isinstance(deregistered, m.DeregisterTableResponse)
    assert deregistered.location == location_b
    expect_error(lambda: tables.deregister_table(tid(ns, "b"), m.DeregisterTableRequest()), NotFoundException, 404, 4)

    # Register the deregistered table's data under another name (location relative to the namespace).
    registered = tables.register_table(tid(ns, "b2"), m.RegisterTableRequest(location="b.lance", properties={"from": "b"}))
    assert isinstance(registered, m.RegisterTableResponse)
    assert registered.location and registered.location.endswith("b.lance")
    assert registered.properties == {"from": "b"}
    assert tables.count_table_rows(tid(ns, "b2"), m.CountTableRowsRequest()) == 2
    # 409 code 5: the name is taken; 400 code 13: a location outside the root; 404 code 1: no namespace.
    expect_error(lambda: tables.register_table(tid(ns, "c"), m.RegisterTableRequest(location="b.lance")), ConflictException, 409, 5)
    expect_error(lambda: tables.register_table(tid(ns, "x"), m.RegisterTableRequest(location="/definitely/not/the/root/x.lance")), BadRequestException, 400, 13)
    expect_error(lambda: tables.register_table(tid(unique("missing"), "x"), m.RegisterTableRequest(location="b.lance")), NotFoundException, 404, 1)

    renamed = tables.rename_table(tid(ns, "c"), m.RenameTableRequest(new_table_name="c2"))
    assert isinstance(renamed, m.RenameTableResponse)
    assert tables.count_table_rows(tid(ns, "c2"), m.CountTableRowsRequest()) == 2
    # 404 code 4: no such table; 409 code 5: the target exists.
    expect_error(lambda: tables.rename_table(tid(ns, "c"), m.RenameTableRequest(new_table_name="c3")), NotFoundException, 404, 4)
    expect_error(lambda: tables.rename_table(tid(ns, "c2"), m.RenameTableRequest(new_table_name="b2")), ConflictException, 409, 5)


# ---------------------------------------------------------------------------------------------
# Rows: insert, merge-insert, update, delete, count, restore (Arrow IPC bodies)


@covers("InsertIntoTable", "CountTableRows")
def test_insert_and_count(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 3))
    inserted = tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(3, 4)))
    assert isinstance(inserted, m.InsertIntoTableResponse)
    assert inserted.version == 2
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 7
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest(version=1)) == 3
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest(predicate="id >= 5")) == 2

    overwritten = tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(100, 2)), mode="Overwrite")
    assert overwritten.version == 3
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 2

    # Insert fills a declared table.
    tables.declare_table(tid(ns, "declared"), m.DeclareTableRequest())
    assert tables.insert_into_table(tid(ns, "declared"), ipc_stream(rows(0, 2))).version == 1

    # 404 code 4: no table (also when its namespace does not exist: like the reference server, only
    # the operations that create a table answer code 1); 400 code 13: not Arrow; 404 code 11: no version.
    expect_error(lambda: tables.insert_into_table(tid(ns, "nope"), ipc_stream(rows(0, 1))), NotFoundException, 404, 4)
    expect_error(lambda: tables.insert_into_table(tid(unique("missing"), "t"), ipc_stream(rows(0, 1))), NotFoundException, 404, 4)
    expect_error(lambda: tables.insert_into_table(tid(ns, "t"), b"\x00\x01"), BadRequestException, 400, 13)
    expect_error(lambda: tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest(version=99)), NotFoundException, 404, 11)
    expect_error(lambda: tables.count_table_rows(tid(ns, "nope"), m.CountTableRowsRequest()), NotFoundException, 404, 4)


@covers("InsertIntoTable")
def test_insert_with_another_schema_is_refused(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 3))
    # The engine (LanceDB) casts a batch to the table's schema and names what does not fit as invalid
    # input: 400 code 13 (the spec also allows 20, TableSchemaValidationError, for this operation).
    extra_column = pa.table({"id": pa.array([1], pa.int64()), "name": pa.array(["a"]), "extra": pa.array([1], pa.int32())})
    expect_error(lambda: tables.insert_into_table(tid(ns, "t"), ipc_stream(extra_column)), BadRequestException, 400, 13)
    wrong_type = pa.table({"id": pa.array(["a"], pa.string())})
    expect_error(lambda: tables.insert_into_table(tid(ns, "t"), ipc_stream(wrong_type)), BadRequestException, 400, 13)
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 3


@covers("MergeInsertIntoTable")
def test_merge_insert(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 4))
    source = rows(2, 4)  # ids 2, 3 match; 4, 5 are new
    merged = tables.merge_insert_into_table(
        tid(ns, "t"), ["id"], ipc_stream(source), when_matched_update_all=True, when_not_matched_insert_all=True
    )
    assert isinstance(merged, m.MergeInsertIntoTableResponse)
    assert merged.num_updated_rows == 2
    assert merged.num_inserted_rows == 2
    assert merged.version == 2
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 6
    # 404 code 12: the key column does not exist; 404 code 4: no table.
    expect_error(
        lambda: tables.merge_insert_into_table(tid(ns, "t"), ["nope"], ipc_stream(source), when_not_matched_insert_all=True),
        NotFoundException,
        404,
        12,
    )
    expect_error(
        lambda: tables.merge_insert_into_table(tid(ns, "nope"), ["id"], ipc_stream(source), when_not_matched_insert_all=True),
        NotFoundException,
        404,
        4,
    )


@covers("UpdateTable", "DeleteFromTable", "RestoreTable")
def test_update_delete_restore(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 10))
    updated = tables.update_table(tid(ns, "t"), m.UpdateTableRequest(updates=[["name", "'changed'"]], predicate="id < 3", properties={"touched": "yes"}))
    assert isinstance(updated, m.UpdateTableResponse)
    assert updated.updated_rows == 3
    assert updated.version == 2
    assert updated.properties == {"touched": "yes"}
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest(predicate="name = 'changed'")) == 3

    deleted = tables.delete_from_table(tid(ns, "t"), m.DeleteFromTableRequest(predicate="id >= 8"))
    assert isinstance(deleted, m.DeleteFromTableResponse)
    assert deleted.version == 3
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 8

    restored = tables.restore_table(tid(ns, "t"), m.RestoreTableRequest(version=1))
    assert isinstance(restored, m.RestoreTableResponse)
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 10
    assert latest_version(tables, ns, "t") == 4

    # 404 code 12: unknown column; 400 code 13: bad SQL; 404 code 4: no table; 404 code 11: no version.
    expect_error(lambda: tables.update_table(tid(ns, "t"), m.UpdateTableRequest(updates=[["nope", "1"]])), NotFoundException, 404, 12)
    expect_error(lambda: tables.update_table(tid(ns, "t"), m.UpdateTableRequest(updates=[["id", "id +"]])), BadRequestException, 400, 13)
    expect_error(lambda: tables.update_table(tid(ns, "nope"), m.UpdateTableRequest(updates=[["id", "1"]])), NotFoundException, 404, 4)
    expect_error(lambda: tables.delete_from_table(tid(ns, "t"), m.DeleteFromTableRequest(predicate="id >>> 3")), BadRequestException, 400, 13)
    expect_error(lambda: tables.delete_from_table(tid(ns, "nope"), m.DeleteFromTableRequest(predicate="true")), NotFoundException, 404, 4)
    expect_error(lambda: tables.restore_table(tid(ns, "t"), m.RestoreTableRequest(version=99)), NotFoundException, 404, 11)
    expect_error(lambda: tables.restore_table(tid(ns, "nope"), m.RestoreTableRequest(version=1)), NotFoundException, 404, 4)
    # 409 code 19: data operations on a table that has no data yet.
    tables.declare_table(tid(ns, "declared"), m.DeclareTableRequest())
    expect_error(lambda: tables.update_table(tid(ns, "declared"), m.UpdateTableRequest(updates=[["id", "1"]])), ConflictException, 409, 19)
    expect_error(lambda: tables.delete_from_table(tid(ns, "declared"), m.DeleteFromTableRequest(predicate="true")), ConflictException, 409, 19)


# ---------------------------------------------------------------------------------------------
# Queries and plans (QueryTable answers an Arrow IPC file)


def vector_query(**fields) -> m.QueryTableRequest:
    fields.setdefault("k", 3)
    fields.setdefault("vector", m.QueryTableRequestVector(single_vector=[0.5, 0.0, 0.0, 0.0]))
    return m.QueryTableRequest(**fields)


@covers("QueryTable", "ExplainTableQueryPlan", "AnalyzeTableQueryPlan")
def test_query_explain_analyze(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 20))
    tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(20, 5)))

    answer = tables.query_table(tid(ns, "t"), vector_query(columns=m.QueryTableRequestColumns(column_names=["id", "name"])))
    assert isinstance(answer, (bytes, bytearray))
    result = read_arrow_file(answer)
    assert result.column("id").to_pylist() == [0, 1, 2]
    assert "name" in result.column_names

    filtered = read_arrow_file(
        tables.query_table(tid(ns, "t"), vector_query(k=100, filter="id >= 20", vector=m.QueryTableRequestVector(single_vector=[])))
    )
    assert sorted(filtered.column("id").to_pylist()) == [20, 21, 22, 23, 24]
    old = read_arrow_file(tables.query_table(tid(ns, "t"), vector_query(k=100, version=1, vector=m.QueryTableRequestVector(single_vector=[]))))
    assert old.num_rows == 20

    explained = tables.explain_table_query_plan(tid(ns, "t"), m.ExplainTableQueryPlanRequest(query=vector_query(), verbose=True))
    assert isinstance(explained, str) and explained
    analyzed = tables.analyze_table_query_plan(tid(ns, "t"), m.AnalyzeTableQueryPlanRequest(k=3, vector=m.QueryTableRequestVector(single_vector=[0.5, 0, 0, 0])))
    assert isinstance(analyzed, str) and analyzed

    # 404 code 12: unknown column; 404 code 4: no table; 404 code 11: no version; 400 code 13: bad filter.
    expect_error(lambda: tables.query_table(tid(ns, "t"), vector_query(columns=m.QueryTableRequestColumns(column_names=["nope"]))), NotFoundException, 404, 12)
    expect_error(lambda: tables.query_table(tid(ns, "nope"), vector_query()), NotFoundException, 404, 4)
    expect_error(lambda: tables.query_table(tid(ns, "t"), vector_query(version=99)), NotFoundException, 404, 11)
    expect_error(lambda: tables.query_table(tid(ns, "t"), vector_query(filter="id >>> 1")), BadRequestException, 400, 13)
    expect_error(lambda: tables.explain_table_query_plan(tid(ns, "nope"), m.ExplainTableQueryPlanRequest(query=vector_query())), NotFoundException, 404, 4)
    expect_error(
        lambda: tables.analyze_table_query_plan(tid(ns, "nope"), m.AnalyzeTableQueryPlanRequest(k=3, vector=m.QueryTableRequestVector(single_vector=[0.5, 0, 0, 0]))),
        NotFoundException,
        404,
        4,
    )


# ---------------------------------------------------------------------------------------------
# Columns and schema


@covers("AlterTableAddColumns", "AlterTableAlterColumns", "AlterTableDropColumns", "UpdateFieldMetadata", "UpdateTableSchemaMetadata")
def test_columns_and_metadata(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 5))

    added = tables.alter_table_add_columns(tid(ns, "t"), m.AlterTableAddColumnsRequest(new_columns=[m.AddColumnsEntry(name="double_id", expression="id * 2")]))
    assert isinstance(added, m.AlterTableAddColumnsResponse)
    assert added.version == 2

    altered = tables.alter_table_alter_columns(tid(ns, "t"), m.AlterTableAlterColumnsRequest(alterations=[m.AlterColumnsEntry(path="double_id", rename="twice")]))
    assert isinstance(altered, m.AlterTableAlterColumnsResponse)
    assert altered.version == 3

    field_metadata = tables.update_field_metadata(
        tid(ns, "t"), m.UpdateFieldMetadataRequest(updates=[m.UpdateFieldMetadataEntry(path="twice", metadata={"unit": "count"})])
    )
    assert isinstance(field_metadata, m.UpdateFieldMetadataResponse)
    assert field_metadata.version == 4
    assert field_metadata.fields and field_metadata.fields.get("twice", {}).get("unit") == "count"

    # The REST form of this operation takes and answers the bare map (the spec's REST NAMESPACE ONLY note).
    schema_metadata = tables.update_table_schema_metadata(tid(ns, "t"), {"owner": "etl"})
    assert isinstance(schema_metadata, dict)
    assert schema_metadata.get("owner") == "etl"

    dropped = tables.alter_table_drop_columns(tid(ns, "t"), m.AlterTableDropColumnsRequest(columns=["twice"]))
    assert isinstance(dropped, m.AlterTableDropColumnsResponse)
    assert dropped.version == 6

    described = tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(load_detailed_metadata=True))
    assert [f.name for f in described.var_schema.fields] == ["id", "name", "vec"]
    assert described.var_schema.metadata and described.var_schema.metadata.get("owner") == "etl"

    # 404 code 12: unknown column (alter, drop, field metadata); 400 code 13: bad expression;
    # 404 code 4: no table.
    expect_error(
        lambda: tables.alter_table_alter_columns(tid(ns, "t"), m.AlterTableAlterColumnsRequest(alterations=[m.AlterColumnsEntry(path="nope", rename="x")])),
        NotFoundException,
        404,
        12,
    )
    expect_error(lambda: tables.alter_table_drop_columns(tid(ns, "t"), m.AlterTableDropColumnsRequest(columns=["nope"])), NotFoundException, 404, 12)
    expect_error(
        lambda: tables.update_field_metadata(tid(ns, "t"), m.UpdateFieldMetadataRequest(updates=[m.UpdateFieldMetadataEntry(path="nope", metadata={"a": "b"})])),
        NotFoundException,
        404,
        12,
    )
    expect_error(
        lambda: tables.alter_table_add_columns(tid(ns, "t"), m.AlterTableAddColumnsRequest(new_columns=[m.AddColumnsEntry(name="bad", expression="id +")])),
        BadRequestException,
        400,
        13,
    )
    expect_error(
        lambda: tables.alter_table_add_columns(tid(ns, "nope"), m.AlterTableAddColumnsRequest(new_columns=[m.AddColumnsEntry(name="x", expression="1")])),
        NotFoundException,
        404,
        4,
    )
    expect_error(lambda: tables.update_table_schema_metadata(tid(ns, "nope"), {"a": "b"}), NotFoundException, 404, 4)


@covers("AlterTableBackfillColumns", "DescribeTransaction", "AlterTableAddColumns")
def test_backfill_job(namespaces, tables, transactions):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 50))
    tables.alter_table_add_columns(tid(ns, "t"), m.AlterTableAddColumnsRequest(new_columns=[m.AddColumnsEntry(name="v", computed="id * 10")]))

    job = tables.alter_table_backfill_columns(tid(ns, "t"), m.AlterTableBackfillColumnsRequest(column="v"))
    assert isinstance(job, m.AlterTableBackfillColumnsResponse)
    assert job.job_id

    # The job runs in the background; its transaction record says when it is done.
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        described = transactions.describe_transaction(job.job_id, m.DescribeTransactionRequest())
        assert isinstance(described, m.DescribeTransactionResponse)
        status = described.status
        if status not in ("Queued", "Running"):
            break
        time.sleep(0.05)
    assert status == "Succeeded", described
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest(predicate="v = id * 10")) == 50

    # 404 code 12: no such column; 400 code 13: a column without an expression; 404 code 4: no table.
    expect_error(lambda: tables.alter_table_backfill_columns(tid(ns, "t"), m.AlterTableBackfillColumnsRequest(column="nope")), NotFoundException, 404, 12)
    expect_error(lambda: tables.alter_table_backfill_columns(tid(ns, "t"), m.AlterTableBackfillColumnsRequest(column="name")), BadRequestException, 400, 13)
    expect_error(lambda: tables.alter_table_backfill_columns(tid(ns, "nope"), m.AlterTableBackfillColumnsRequest(column="v")), NotFoundException, 404, 4)


# ---------------------------------------------------------------------------------------------
# Materialized views (kind query, as Geneva sends them)


def view_query(source: str, **base) -> str:
    """A GenevaQuery JSON of a view over a table of the root namespace."""
    return json.dumps({"base": {"filter": None, "columns": None, "limit": None, "offset": None, **base}, "column_udfs": None, "source_table": source})


@covers("CreateMaterializedView", "RefreshMaterializedView")
def test_materialized_views(namespaces, tables, transactions, api):
    views = client.MaterializedViewApi(api)
    source = unique("mvsrc")
    tables.create_table(tid(source), ipc_stream(rows(0, 40)))
    ns = new_namespace(namespaces)
    schema = pa.schema([("__source_row_id", pa.int64()), ("__is_set", pa.bool_()), ("id", pa.int64()), ("name", pa.string())])
    output_schema = base64.b64encode(schema.serialize().to_pybytes()).decode()

    created = views.create_materialized_view(
        tid(ns, "v"), m.CreateMaterializedViewRequest(kind="query", source_query=view_query(source, filter="id >= 30", columns=["id", "name"]), output_schema=output_schema, with_no_data=False)
    )
    assert isinstance(created, m.CreateMaterializedViewResponse)
    assert created.version == 1
    assert created.job_id
    refreshed = views.refresh_materialized_view(tid(ns, "v"), refresh_materialized_view_request=m.RefreshMaterializedViewRequest(src_version=1))
    assert isinstance(refreshed, m.RefreshMaterializedViewResponse)
    for job_id in (created.job_id, refreshed.job_id):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = transactions.describe_transaction(job_id, m.DescribeTransactionRequest())
            if described.status not in ("Queued", "Running"):
                break
            time.sleep(0.05)
        assert described.status == "Succeeded", described
    view = lance.dataset(table_dir(tables, ns, "v")).to_table().sort_by("id")
    assert view["id"].to_pylist() == list(range(30, 40))
    assert view["__source_row_id"].to_pylist() == list(range(30, 40))

    # 400 code 13: not a schema; 404 code 4: no source; 409 code 5: the view exists; 406 code 0: a kind not supported; 400: not a view.
    bad = m.CreateMaterializedViewRequest(kind="query", source_query=view_query(source, columns=["id", "name"]), output_schema="bm90IGFycm93")
    expect_error(lambda: views.create_materialized_view(tid(ns, "w"), bad), BadRequestException, 400, 13)
    missing = m.CreateMaterializedViewRequest(kind="query", source_query=view_query("nope", columns=["id", "name"]), output_schema=output_schema)
    expect_error(lambda: views.create_materialized_view(tid(ns, "w"), missing), NotFoundException, 404, 4)
    again = m.CreateMaterializedViewRequest(kind="query", source_query=view_query(source, columns=["id", "name"]), output_schema=output_schema)
    expect_error(lambda: views.create_materialized_view(tid(ns, "v"), again), ConflictException, 409, 5)
    chunker = m.CreateMaterializedViewRequest(kind="chunker", source_query=view_query(source), output_schema=output_schema)
    expect_error(lambda: views.create_materialized_view(tid(ns, "w"), chunker), ApiException, 406, 0)
    expect_error(lambda: views.refresh_materialized_view(tid(source), refresh_materialized_view_request=m.RefreshMaterializedViewRequest()), BadRequestException, 400, 13)
    expect_error(lambda: views.refresh_materialized_view(tid(ns, "nope"), refresh_materialized_view_request=m.RefreshMaterializedViewRequest()), NotFoundException, 404, 4)


# ---------------------------------------------------------------------------------------------
# Stats and indices


@covers("GetTableStats", "CreateTableIndex", "CreateTableScalarIndex", "ListTableIndices", "DescribeTableIndexStats", "DropTableIndex")
def test_stats_and_indices(namespaces, tables, indices):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 64))

    stats = tables.get_table_stats(tid(ns, "t"), m.GetTableStatsRequest())
    assert isinstance(stats, m.GetTableStatsResponse)
    assert stats.num_rows == 64
    assert stats.num_indices == 0
    assert isinstance(stats.fragment_stats, m.FragmentStats)
    assert stats.fragment_stats.num_fragments == 1
    assert stats.total_bytes > 0

    scalar = indices.create_table_scalar_index(tid(ns, "t"), m.CreateTableIndexRequest(column="id", index_type="BTREE", name="id_idx"))
    assert isinstance(scalar, m.CreateTableScalarIndexResponse)
    vector = indices.create_table_index(
        tid(ns, "t"), m.CreateTableIndexRequest(column="vec", index_type="IVF_FLAT", name="vec_idx", num_partitions=2, distance_type="l2")
    )
    assert isinstance(vector, m.CreateTableIndexResponse)

    listed = indices.list_table_indices(tid(ns, "t"), m.ListTableIndicesRequest())
    assert isinstance(listed, m.ListTableIndicesResponse)
    by_name = {i.index_name: i for i in listed.indexes}
    assert set(by_name) == {"id_idx", "vec_idx"}
    assert isinstance(by_name["id_idx"], m.IndexContent)
    assert by_name["id_idx"].columns == ["id"]
    assert {i.status for i in listed.indexes} == {"SUCCEEDED"}

    index_stats = indices.describe_table_index_stats(tid(ns, "t"), "vec_idx", m.DescribeTableIndexStatsRequest())
    assert isinstance(index_stats, m.DescribeTableIndexStatsResponse)
    assert index_stats.num_indexed_rows == 64
    assert index_stats.num_unindexed_rows == 0
    assert index_stats.index_type
    assert tables.get_table_stats(tid(ns, "t"), m.GetTableStatsRequest()).num_indices == 2

    # The types pylance builds (the index worker): each listed and described with its type.
    built = {
        "vec_sq": ("create_table_index", m.CreateTableIndexRequest(column="vec", index_type="IVF_SQ", name="vec_sq", num_partitions=2)),
        "vec_hnsw": ("create_table_index", m.CreateTableIndexRequest(column="vec", index_type="IVF_HNSW_FLAT", name="vec_hnsw", num_partitions=1)),
        "name_ngram": ("create_table_scalar_index", m.CreateTableIndexRequest(column="name", index_type="NGRAM", name="name_ngram")),
        "id_zonemap": ("create_table_scalar_index", m.CreateTableIndexRequest(column="id", index_type="ZONEMAP", name="id_zonemap")),
        "name_bloom": ("create_table_scalar_index", m.CreateTableIndexRequest(column="name", index_type="BLOOMFILTER", name="name_bloom")),
    }
    for op, request in built.values():
        getattr(indices, op)(tid(ns, "t"), request)
    types = {i.index_name: i.index_type for i in indices.list_table_indices(tid(ns, "t"), m.ListTableIndicesRequest()).indexes}
    assert types == {
        "id_idx": "BTREE",
        "vec_idx": "IVF_FLAT",
        "vec_sq": "IVF_SQ",
        "vec_hnsw": "IVF_HNSW_FLAT",
        "name_ngram": "NGRAM",
        "id_zonemap": "ZONEMAP",
        "name_bloom": "BLOOMFILTER",
    }
    for name in built:
        described = indices.describe_table_index_stats(tid(ns, "t"), name, m.DescribeTableIndexStatsRequest())
        assert isinstance(described, m.DescribeTableIndexStatsResponse)
        assert (described.index_type, described.num_indexed_rows, described.num_unindexed_rows) == (types[name], 64, 0)
    assert tables.get_table_stats(tid(ns, "t"), m.GetTableStatsRequest()).num_indices == 2 + len(built)
    for name in built:
        indices.drop_table_index(tid(ns, "t"), name)

    dropped = indices.drop_table_index(tid(ns, "t"), "id_idx")
    assert isinstance(dropped, m.DropTableIndexResponse)
    assert [i.index_name for i in indices.list_table_indices(tid(ns, "t"), m.ListTableIndicesRequest()).indexes] == ["vec_idx"]

    # 404 code 6: no such index; 404 code 12: no such column; 409 code 7: the name is taken;
    # 400 code 13: unknown index type, an RTREE on a column that is not a geometry; 404 code 4: no table.
    expect_error(lambda: indices.describe_table_index_stats(tid(ns, "t"), "nope", m.DescribeTableIndexStatsRequest()), NotFoundException, 404, 6)
    expect_error(lambda: indices.drop_table_index(tid(ns, "t"), "nope"), NotFoundException, 404, 6)
    expect_error(
        lambda: indices.create_table_scalar_index(tid(ns, "t"), m.CreateTableIndexRequest(column="nope", index_type="BTREE")), NotFoundException, 404, 12
    )
    expect_error(
        lambda: indices.create_table_index(tid(ns, "t"), m.CreateTableIndexRequest(column="vec", index_type="IVF_FLAT", name="vec_idx", num_partitions=2)),
        ConflictException,
        409,
        7,
    )
    expect_error(lambda: indices.create_table_index(tid(ns, "t"), m.CreateTableIndexRequest(column="id", index_type="NOT_AN_INDEX")), BadRequestException, 400, 13)
    expect_error(lambda: indices.create_table_scalar_index(tid(ns, "t"), m.CreateTableIndexRequest(column="name", index_type="RTREE")), BadRequestException, 400, 13)
    expect_error(lambda: tables.get_table_stats(tid(ns, "nope"), m.GetTableStatsRequest()), NotFoundException, 404, 4)
    expect_error(lambda: indices.list_table_indices(tid(ns, "nope"), m.ListTableIndicesRequest()), NotFoundException, 404, 4)


# ---------------------------------------------------------------------------------------------
# Tags


@covers("CreateTableTag", "UpdateTableTag", "DeleteTableTag", "ListTableTags", "GetTableTagVersion", "DescribeTable")
def test_tags(namespaces, tables, tags):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 2))
    tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(2, 2)))

    created = tags.create_table_tag(tid(ns, "t"), m.CreateTableTagRequest(tag="first", version=1))
    assert isinstance(created, m.CreateTableTagResponse)
    version = tags.get_table_tag_version(tid(ns, "t"), m.GetTableTagVersionRequest(tag="first"))
    assert isinstance(version, m.GetTableTagVersionResponse)
    assert version.version == 1
    assert tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(tag="first", load_detailed_metadata=True)).version == 1

    updated = tags.update_table_tag(tid(ns, "t"), m.UpdateTableTagRequest(tag="first", version=2))
    assert isinstance(updated, m.UpdateTableTagResponse)
    assert tags.get_table_tag_version(tid(ns, "t"), m.GetTableTagVersionRequest(tag="first")).version == 2

    listed = tags.list_table_tags(tid(ns, "t"))
    assert isinstance(listed, m.ListTableTagsResponse)
    assert set(listed.tags) == {"first"}
    assert isinstance(listed.tags["first"], m.TagContents)
    assert listed.tags["first"].version == 2

    deleted = tags.delete_table_tag(tid(ns, "t"), m.DeleteTableTagRequest(tag="first"))
    assert isinstance(deleted, m.DeleteTableTagResponse)
    assert tags.list_table_tags(tid(ns, "t")).tags == {}

    # 404 code 8: no such tag; 409 code 9: the tag exists; 404 code 11: no such version;
    # 400 code 13: an invalid tag name; 404 code 4: no table.
    tags.create_table_tag(tid(ns, "t"), m.CreateTableTagRequest(tag="again", version=1))
    expect_error(lambda: tags.get_table_tag_version(tid(ns, "t"), m.GetTableTagVersionRequest(tag="nope")), NotFoundException, 404, 8)
    expect_error(lambda: tags.update_table_tag(tid(ns, "t"), m.UpdateTableTagRequest(tag="nope", version=1)), NotFoundException, 404, 8)
    expect_error(lambda: tags.delete_table_tag(tid(ns, "t"), m.DeleteTableTagRequest(tag="nope")), NotFoundException, 404, 8)
    expect_error(lambda: tags.create_table_tag(tid(ns, "t"), m.CreateTableTagRequest(tag="again", version=1)), ConflictException, 409, 9)
    expect_error(lambda: tags.create_table_tag(tid(ns, "t"), m.CreateTableTagRequest(tag="late", version=99)), NotFoundException, 404, 11)
    expect_error(lambda: tags.update_table_tag(tid(ns, "t"), m.UpdateTableTagRequest(tag="again", version=99)), NotFoundException, 404, 11)
    expect_error(lambda: tags.create_table_tag(tid(ns, "t"), m.CreateTableTagRequest(tag="x" * 201, version=1)), BadRequestException, 400, 13)
    expect_error(lambda: tags.list_table_tags(tid(ns, "nope")), NotFoundException, 404, 4)
    expect_error(lambda: tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(tag="nope", load_detailed_metadata=True)), NotFoundException, 404, 8)


# ---------------------------------------------------------------------------------------------
# Versions and transactions


@covers("ListTableVersions", "DescribeTableVersion", "CreateTableVersion", "BatchDeleteTableVersions")
def test_versions(namespaces, tables):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 2))
    tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(2, 2)))
    tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(4, 2)))

    listed = tables.list_table_versions(tid(ns, "t"))
    assert isinstance(listed, m.ListTableVersionsResponse)
    assert sorted(v.version for v in listed.versions) == [1, 2, 3]
    assert all(isinstance(v, m.TableVersion) and v.manifest_path and v.timestamp_millis for v in listed.versions)
    newest = tables.list_table_versions(tid(ns, "t"), descending=True, limit=1)
    assert [v.version for v in newest.versions] == [3] and newest.page_token
    page = tables.list_table_versions(tid(ns, "t"), descending=True, limit=1, page_token=newest.page_token)
    assert [v.version for v in page.versions] == [2]

    described = tables.describe_table_version(tid(ns, "t"), m.DescribeTableVersionRequest(version=2))
    assert isinstance(described, m.DescribeTableVersionResponse)
    assert described.version.version == 2
    assert described.version.manifest_size and described.version.manifest_size > 0

    version, staged = stage_next_manifest(tables, ns, "t")
    created = tables.create_table_version(tid(ns, "t"), m.CreateTableVersionRequest(version=version, manifest_path=staged, metadata={"by": "generated-client"}))
    assert isinstance(created, m.CreateTableVersionResponse)
    assert created.version.version == 4
    assert created.version.metadata == {"by": "generated-client"}
    assert tables.describe_table(tid(ns, "t"), m.DescribeTableRequest(load_detailed_metadata=True)).version == 4
    assert tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest()) == 6

    # end_version is exclusive (spec VersionRange).
    deleted = tables.batch_delete_table_versions(tid(ns, "t"), m.BatchDeleteTableVersionsRequest(ranges=[m.VersionRange(start_version=1, end_version=3)]))
    assert isinstance(deleted, m.BatchDeleteTableVersionsResponse)
    assert deleted.deleted_count == 2
    assert sorted(v.version for v in tables.list_table_versions(tid(ns, "t")).versions) == [3, 4]

    # 404 code 11: no such version; 409 code 14: another manifest for a version already taken (two
    # writers staged the same next version), and a version that is not the next; 400 code 13: a
    # manifest of another version, or not a staged manifest; 404 code 4: no table.
    expect_error(lambda: tables.describe_table_version(tid(ns, "t"), m.DescribeTableVersionRequest(version=99)), NotFoundException, 404, 11)
    version, staged = stage_next_manifest(tables, ns, "t")
    _, rival = stage_next_manifest(tables, ns, "t")
    assert tables.create_table_version(tid(ns, "t"), m.CreateTableVersionRequest(version=version, manifest_path=staged)).version.version == version
    expect_error(lambda: tables.create_table_version(tid(ns, "t"), m.CreateTableVersionRequest(version=version, manifest_path=rival)), ConflictException, 409, 14)
    skipping, staged = stage_next_manifest(tables, ns, "t", ahead=2)
    expect_error(lambda: tables.create_table_version(tid(ns, "t"), m.CreateTableVersionRequest(version=skipping, manifest_path=staged)), ConflictException, 409, 14)
    expect_error(
        lambda: tables.create_table_version(tid(ns, "t"), m.CreateTableVersionRequest(version=skipping - 1, manifest_path=staged)), BadRequestException, 400, 13
    )
    expect_error(
        lambda: tables.create_table_version(tid(ns, "t"), m.CreateTableVersionRequest(version=skipping - 1, manifest_path="data/nothing.lance")),
        BadRequestException,
        400,
        13,
    )
    expect_error(lambda: tables.list_table_versions(tid(ns, "nope")), NotFoundException, 404, 4)
    expect_error(lambda: tables.describe_table_version(tid(ns, "nope"), m.DescribeTableVersionRequest(version=1)), NotFoundException, 404, 4)
    expect_error(lambda: tables.create_table_version(tid(ns, "nope"), m.CreateTableVersionRequest(version=1, manifest_path=staged)), NotFoundException, 404, 4)
    expect_error(
        lambda: tables.batch_delete_table_versions(tid(ns, "nope"), m.BatchDeleteTableVersionsRequest(ranges=[m.VersionRange(start_version=1, end_version=1)])),
        NotFoundException,
        404,
        4,
    )


@covers("BatchCreateTableVersions", "BatchCommitTables", "DescribeTransaction", "AlterTransaction")
def test_batches_and_transactions(namespaces, tables, transactions):
    ns = new_namespace(namespaces)
    for name in ("a", "b", "gone"):
        create_table(tables, ns, name, rows(0, 2))

    version_a, staged_a = stage_next_manifest(tables, ns, "a")
    version_b, staged_b = stage_next_manifest(tables, ns, "b")
    batch = tables.batch_create_table_versions(
        m.BatchCreateTableVersionsRequest(
            entries=[
                m.CreateTableVersionEntry(id=[ns, "a"], version=version_a, manifest_path=staged_a),
                m.CreateTableVersionEntry(id=[ns, "b"], version=version_b, manifest_path=staged_b),
            ]
        )
    )
    assert isinstance(batch, m.BatchCreateTableVersionsResponse)
    assert [v.version for v in batch.versions] == [2, 2]
    assert batch.transaction_id
    described = transactions.describe_transaction(batch.transaction_id, m.DescribeTransactionRequest())
    assert isinstance(described, m.DescribeTransactionResponse)
    assert described.status == "Succeeded"

    version_a, staged_a = stage_next_manifest(tables, ns, "a")
    committed = transactions.batch_commit_tables(
        m.BatchCommitTablesRequest(
            operations=[
                m.CommitTableOperation(declare_table=m.DeclareTableRequest(id=[ns, "declared"])),
                m.CommitTableOperation(create_table_version=m.CreateTableVersionRequest(id=[ns, "a"], version=version_a, manifest_path=staged_a)),
                m.CommitTableOperation(
                    delete_table_versions=m.BatchDeleteTableVersionsRequest(id=[ns, "b"], ranges=[m.VersionRange(start_version=1, end_version=2)])
                ),
                m.CommitTableOperation(deregister_table=m.DeregisterTableRequest(id=[ns, "gone"])),
            ]
        )
    )
    assert isinstance(committed, m.BatchCommitTablesResponse)
    assert committed.transaction_id
    assert len(committed.results) == 4
    assert all(isinstance(r, m.CommitTableResult) for r in committed.results)
    assert committed.results[0].declare_table.location.endswith("declared.lance")
    assert committed.results[1].create_table_version.version.version == 3
    assert committed.results[2].delete_table_versions.deleted_count == 1
    assert committed.results[3].deregister_table.id == [ns, "gone"]
    assert sorted(tables.list_tables(tid(ns)).tables) == ["a", "b", "declared"]

    # A Lance commit is a transaction too: `<table id>$<version>`.
    lance_commit = tid(ns, "a", "1")
    commit = transactions.describe_transaction(lance_commit, m.DescribeTransactionRequest())
    assert commit.status == "Succeeded"
    altered = transactions.alter_transaction(
        lance_commit,
        m.AlterTransactionRequest(actions=[m.AlterTransactionAction(set_property_action=m.AlterTransactionSetProperty(key="reviewed", value="yes"))]),
    )
    assert isinstance(altered, m.AlterTransactionResponse)
    assert altered.status == "Succeeded"
    assert altered.properties and altered.properties.get("reviewed") == "yes"

    # 404 code 10: no such transaction; 409 code 14: a terminal status never changes; 400 code 13:
    # an unknown status; 404 code 4: a batch naming a table that does not exist.
    missing = str(uuid.uuid4())
    expect_error(lambda: transactions.describe_transaction(missing, m.DescribeTransactionRequest()), NotFoundException, 404, 10)
    set_running = m.AlterTransactionRequest(actions=[m.AlterTransactionAction(set_status_action=m.AlterTransactionSetStatus(status="Running"))])
    expect_error(lambda: transactions.alter_transaction(missing, set_running), NotFoundException, 404, 10)
    expect_error(lambda: transactions.alter_transaction(batch.transaction_id, set_running), ConflictException, 409, 14)
    expect_error(
        lambda: transactions.alter_transaction(
            batch.transaction_id,
            m.AlterTransactionRequest(actions=[m.AlterTransactionAction(set_status_action=m.AlterTransactionSetStatus(status="Sideways"))]),
        ),
        BadRequestException,
        400,
        13,
    )
    version_a, staged_a = stage_next_manifest(tables, ns, "a")
    expect_error(
        lambda: tables.batch_create_table_versions(
            m.BatchCreateTableVersionsRequest(
                entries=[
                    m.CreateTableVersionEntry(id=[ns, "a"], version=version_a, manifest_path=staged_a),
                    m.CreateTableVersionEntry(id=[ns, "nope"], version=1, manifest_path=staged_a),
                ]
            )
        ),
        NotFoundException,
        404,
        4,
    )
    expect_error(
        lambda: transactions.batch_commit_tables(
            m.BatchCommitTablesRequest(operations=[m.CommitTableOperation(deregister_table=m.DeregisterTableRequest(id=[ns, "nope"]))])
        ),
        NotFoundException,
        404,
        4,
    )
    # Nothing of the failed batch was committed.
    assert latest_version(tables, ns, "a") == version_a - 1


# ---------------------------------------------------------------------------------------------
# Branches; and the 406 code 0 of a branch on an operation that does not take one yet (the client has no exception class for 406)


@covers("ListTableBranches", "CreateTableBranch", "DeleteTableBranch")
def test_branches(namespaces, tables, api):
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 2))
    branches = client.BranchApi(api)
    branches.create_table_branch(tid(ns, "t"), m.CreateTableBranchRequest(name="dev"))
    branches.create_table_branch(tid(ns, "t"), m.CreateTableBranchRequest(name="dev/sub", from_branch="dev", from_version=1))
    listed = branches.list_table_branches(tid(ns, "t"))
    assert sorted(listed.branches) == ["dev", "dev/sub"]
    dev, sub = listed.branches["dev"], listed.branches["dev/sub"]
    assert (dev.parent_branch, dev.parent_version) == (None, 1) and dev.manifest_size > 0 and dev.create_at > 0
    assert (sub.parent_branch, sub.parent_version) == ("dev", 1)
    page = branches.list_table_branches(tid(ns, "t"), limit=1)
    assert len(page.branches) == 1 and page.page_token
    expect_error(lambda: branches.create_table_branch(tid(ns, "t"), m.CreateTableBranchRequest(name="dev")), ConflictException, 409, 23)
    expect_error(lambda: branches.create_table_branch(tid(ns, "t"), m.CreateTableBranchRequest(name="x", from_branch="nope")), NotFoundException, 404, 22)
    expect_error(lambda: branches.create_table_branch(tid(ns, "t"), m.CreateTableBranchRequest(name="x", from_version=9)), NotFoundException, 404, 11)
    expect_error(lambda: branches.create_table_branch(tid(ns, "t"), m.CreateTableBranchRequest(name="a..b")), BadRequestException, 400, 13)
    branches.delete_table_branch(tid(ns, "t"), m.DeleteTableBranchRequest(name="dev/sub"))
    branches.delete_table_branch(tid(ns, "t"), m.DeleteTableBranchRequest(name="dev"))
    expect_error(lambda: branches.delete_table_branch(tid(ns, "t"), m.DeleteTableBranchRequest(name="dev")), NotFoundException, 404, 22)
    assert branches.list_table_branches(tid(ns, "t")).branches == {}
    # A missing branch is 404 code 22 wherever a request names one.
    expect_error(lambda: tables.count_table_rows(tid(ns, "t"), m.CountTableRowsRequest(branch="dev")), NotFoundException, 404, 22)


# ---------------------------------------------------------------------------------------------
# Errors every operation may answer: 401, 403, 413, 429. The guarded service (API keys, OAuth2
# client credentials, authorization) and the throttled one (rate limit) are started beside the
# open one by generated-client.test.ts.


def required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run this file through test/realclient/generated-client.test.ts")
    return value


def client_for(url: str, **auth) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=url, **auth))


def test_unauthenticated_and_forbidden(http):
    url = required_env("LANCE_NS_GUARDED_URL")
    anonymous = client.NamespaceApi(client_for(url))
    wrong = client.NamespaceApi(client_for(url, api_key={"ApiKeyAuth": "not-a-key"}))
    admin = client.NamespaceApi(client_for(url, api_key={"ApiKeyAuth": required_env("LANCE_NS_GUARDED_ADMIN_KEY")}))
    reader_api = client_for(url, api_key={"ApiKeyAuth": required_env("LANCE_NS_GUARDED_READER_KEY")})
    reader = client.NamespaceApi(reader_api)

    # 401 code 16: no credentials, or unknown ones.
    expect_error(lambda: anonymous.list_namespaces("$"), UnauthorizedException, 401, 16)
    expect_error(lambda: wrong.namespace_exists("$", m.NamespaceExistsRequest()), UnauthorizedException, 401, 16)

    ns = unique("guarded")
    admin.create_namespace(tid(ns), m.CreateNamespaceRequest())
    assert reader.describe_namespace(tid(ns), m.DescribeNamespaceRequest()).properties == {}
    # 403 code 15: a reader may not write, neither JSON nor Arrow operations.
    expect_error(lambda: reader.create_namespace(tid(ns, "child"), m.CreateNamespaceRequest()), ForbiddenException, 403, 15)
    expect_error(lambda: client.TableApi(reader_api).create_table(tid(ns, "t"), ipc_stream(rows(0, 1))), ForbiddenException, 403, 15)

    # A bearer token from the service's OAuth2 client-credentials endpoint (not an operation of the
    # client) works as the client's access_token.
    res = http.request(
        "POST",
        f"{url}/oauth/token",
        body=f"grant_type=client_credentials&client_id={required_env('LANCE_NS_GUARDED_CLIENT_ID')}&client_secret={required_env('LANCE_NS_GUARDED_CLIENT_SECRET')}".encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert res.status == 200, res.data
    token = json.loads(res.data)["access_token"]
    bearer = client.NamespaceApi(client_for(url, access_token=token))
    bearer.create_namespace(tid(ns, "by_token"), m.CreateNamespaceRequest())
    assert bearer.list_namespaces(tid(ns)).namespaces == ["by_token"]
    expect_error(lambda: client.NamespaceApi(client_for(url, access_token=token + "x")).list_namespaces("$"), UnauthorizedException, 401, 16)


def test_throttled():
    throttled = client.NamespaceApi(client_for(required_env("LANCE_NS_THROTTLED_URL")))
    # The throttled service allows a burst of 3 requests per caller, then about one per 100 s.
    # (POSTs only: urllib3, under the client, retries a GET answered 429 after its Retry-After.)
    for _ in range(3):
        assert throttled.namespace_exists("$", m.NamespaceExistsRequest()) is None
    # 429 code 21, with Retry-After; the client has no exception class for 429.
    with pytest.raises(ApiException) as info:
        throttled.describe_namespace("$", m.DescribeNamespaceRequest())
    assert type(info.value) is ApiException and info.value.status == 429
    assert error_of(info.value).code == 21
    assert int(info.value.headers["retry-after"]) >= 1


def test_oversized_body_and_foreign_origin(namespaces):
    # 413 code 13: a JSON body over the 4 MiB limit, refused from its Content-Length (no client class for 413).
    huge = {f"k{i}": "v" * 1000 for i in range(5000)}
    expect_error(lambda: namespaces.create_namespace(tid(unique("huge")), m.CreateNamespaceRequest(properties=huge)), ApiException, 413, 13)
    # 403 code 15: a request from a web page of another origin.
    expect_error(
        lambda: namespaces.list_namespaces("$", _headers={"Origin": "https://elsewhere.example"}),
        ForbiddenException,
        403,
        15,
    )


# ---------------------------------------------------------------------------------------------
# Routes the generated client has no method for: the POST forms of the three lists it calls with GET,
# the GET forms of the other routes that have one, the old aliases, the health checks. Called with
# urllib3; their answers must still parse into the client's models.


@covers(
    "Live",
    "Ready",
    "ListNamespaces",
    "ListTables",
    "ListAllTables",
    "ListTableVersionsGet",
    "CountTableRowsGet",
    "GetTableStatsGet",
    "DescribeTableIndexStatsGet",
    "ListTableIndicesGet",
    "ListTableTagsGet",
    "ListTableBranchesGet",
    "DeclareTableAlias1",
    "BatchDeleteTableVersionsAlias1",
)
def test_routes_without_a_client_method(namespaces, tables, indices, http):
    base = server_url()
    ns = new_namespace(namespaces)
    create_table(tables, ns, "t", rows(0, 4))
    tables.insert_into_table(tid(ns, "t"), ipc_stream(rows(4, 4)))
    indices.create_table_scalar_index(tid(ns, "t"), m.CreateTableIndexRequest(column="id", index_type="BTREE", name="id_idx"))
    table = quote(tid(ns, "t"), safe="")

    def get(path: str):
        res = http.request("GET", base + path)
        return res.status, res.data

    for path in ("/health/live", "/health/ready"):
        assert get(path)[0] == 200, path

    def post(path: str, body: dict | None = None):
        res = http.request("POST", base + path, body=json.dumps(body or {}).encode(), headers={"content-type": "application/json"})
        return res.status, res.data

    status, data = post(f"/v1/namespace/{quote(ns)}/list")
    assert status == 200 and m.ListNamespacesResponse.from_json(data).namespaces == []
    status, data = post(f"/v1/namespace/{quote(ns)}/table/list", {"limit": 10})
    assert status == 200 and m.ListTablesResponse.from_json(data).tables == ["t"]
    status, data = post("/v1/table")
    assert status == 200 and tid(ns, "t") in m.ListTablesResponse.from_json(data).tables
    status, data = get(f"/v1/table/{table}/version/list?descending=true&limit=1")
    assert status == 200 and [v.version for v in m.ListTableVersionsResponse.from_json(data).versions] == [3]
    status, data = get(f"/v1/table/{table}/count_rows")
    assert status == 200 and json.loads(data) == 8
    status, data = get(f"/v1/table/{table}/stats")
    assert status == 200 and m.GetTableStatsResponse.from_json(data).num_rows == 8
    status, data = get(f"/v1/table/{table}/index/id_idx/stats")
    assert status == 200 and m.DescribeTableIndexStatsResponse.from_json(data).num_indexed_rows == 8
    status, data = get(f"/v1/table/{table}/index/list")
    assert status == 200 and [i.index_name for i in m.ListTableIndicesResponse.from_json(data).indexes] == ["id_idx"]
    status, data = get(f"/v1/table/{table}/tags/list")
    assert status == 200 and m.ListTableTagsResponse.from_json(data).tags == {}
    status, data = get(f"/v1/table/{table}/branches/list")
    assert status == 200 and m.ListTableBranchesResponse.from_json(data).branches == {}

    res = http.request("POST", f"{base}/v1/table/{quote(tid(ns, 'old'), safe='')}/create-empty", body=b"{}", headers={"content-type": "application/json"})
    assert res.status == 200 and m.DeclareTableResponse.from_json(res.data).location.endswith("old.lance")
    res = http.request(
        "POST",
        f"{base}/v1/table/{table}/version/batch-delete",
        body=json.dumps({"ranges": [{"start_version": 1, "end_version": 2}]}).encode(),
        headers={"content-type": "application/json"},
    )
    assert res.status == 200 and m.BatchDeleteTableVersionsResponse.from_json(res.data).deleted_count == 1
    status, data = post(f"/v1/namespace/{quote(unique('missing'))}/list")
    assert status == 404 and m.ErrorResponse.from_json(data).code == 1


# ---------------------------------------------------------------------------------------------
# The service's OpenAPI document against the client


def service_openapi(http) -> dict:
    res = http.request("GET", server_url() + "/openapi.json")
    assert res.status == 200
    return json.loads(res.data)


def service_operations(document: dict) -> dict[str, tuple[str, str, dict]]:
    operations = {}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            operations[operation["operationId"]] = (method, path, operation)
    return operations


def test_every_operation_is_covered(http):
    operations = set(service_operations(service_openapi(http)))
    assert operations - set(COVERED) == set(), "operations of the service no test calls"
    assert SEED_OPERATIONS - set(COVERED) == set(), "operations of the seed document no test calls"
    assert set(COVERED) - operations == set(), "tests claim operations the service does not list"


def snake(operation_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


API_CLASSES = (
    client.TableApi,
    client.NamespaceApi,
    client.TransactionApi,
    client.TagApi,
    client.IndexApi,
    client.DataApi,
    client.MetadataApi,
    client.BranchApi,
    client.MaterializedViewApi,
)


def client_response_types(operation_id: str) -> dict[str, str | None] | None:
    """The `_response_types_map` the client's method for this operation deserializes with."""
    name = snake(operation_id)
    for api_class in API_CLASSES:
        method = getattr(api_class, name, None)
        if method is not None:
            source = inspect.getsource(method)
            return {status: (None if kind == "None" else kind.strip('"')) for status, kind in re.findall(r"'(\w+)': (\"[^\"]*\"|None)", source)}
    return None


def schema_ref_parts(ref: str) -> list[str]:
    return ref.lstrip("#/").split("/")


def deref(document: dict, schema: dict) -> dict:
    seen = 0
    while "$ref" in schema:
        seen += 1
        assert seen < 20, "a $ref cycle"
        target = document
        for part in schema_ref_parts(schema["$ref"]):
            target = target[part]
        schema = target
    return schema


def json_types(document: dict, schema: dict) -> tuple[set[str], list[dict]]:
    """The JSON types a schema admits, and the object/array alternatives to look into."""
    schema = deref(document, schema)
    types: set[str] = set()
    parts: list[dict] = []
    for key in ("anyOf", "oneOf"):
        for alternative in schema.get(key, []):
            sub_types, sub_parts = json_types(document, alternative)
            types |= sub_types
            parts += sub_parts
    declared = schema.get("type")
    if isinstance(declared, str):
        declared = [declared]
    if declared:
        types |= set(declared)
        parts.append(schema)
    elif not schema.get("anyOf") and not schema.get("oneOf"):
        if "const" in schema or "enum" in schema:
            values = schema.get("enum", [schema.get("const")])
            types |= {type_of_value(v) for v in values}
        else:
            types.add("any")
        parts.append(schema)
    return types, parts


def type_of_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def python_types(annotation) -> tuple[bool, list]:
    """(accepts None, the non-None alternatives) of a pydantic field annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return python_types(typing.get_args(annotation)[0])
    if origin is typing.Union:
        nullable = False
        alternatives = []
        for arg in typing.get_args(annotation):
            if arg is type(None):
                nullable = True
                continue
            sub_nullable, sub_alternatives = python_types(arg)
            nullable = nullable or sub_nullable
            alternatives += sub_alternatives
        return nullable, alternatives
    if annotation is typing.Any:
        return True, [typing.Any]
    return False, [annotation]


def accepts(python_type, json_type: str) -> bool:
    if python_type is typing.Any:
        return True
    origin = typing.get_origin(python_type) or python_type
    if json_type == "string":
        # pydantic parses ISO 8601 strings into datetime fields (they are not strict).
        return origin in (str, bytes, datetime.datetime, datetime.date)
    if json_type == "integer":
        return origin in (int, float)
    if json_type == "number":
        return origin is float
    if json_type == "boolean":
        return origin is bool
    if json_type == "array":
        return origin in (list, tuple)
    if json_type == "object":
        return origin is dict or (inspect.isclass(origin) and issubclass(origin, BaseModel))
    return False


def compare_schema(document: dict, schema: dict, annotation, where: str, problems: list[str], depth: int = 0) -> None:
    """Records where the client's `annotation` would reject or drop what `schema` lets the service send."""
    if depth > 8:
        return
    types, parts = json_types(document, schema)
    nullable, alternatives = python_types(annotation)
    if "any" in types:
        return
    if "null" in types and not nullable:
        problems.append(f"{where}: the service may send null, the client's type does not accept it")
    for json_type in types - {"null"}:
        if not any(accepts(p, json_type) for p in alternatives):
            problems.append(f"{where}: the service sends {json_type}, the client expects {annotation}")
    for part in parts:
        part_types = part.get("type")
        part_types = {part_types} if isinstance(part_types, str) else set(part_types or [])
        if "object" in part_types:
            for python_type in alternatives:
                if inspect.isclass(python_type) and issubclass(python_type, BaseModel):
                    compare_model(document, part, python_type, where, problems, depth + 1)
                elif typing.get_origin(python_type) is dict and isinstance(part.get("additionalProperties"), dict):
                    value_type = typing.get_args(python_type)[1]
                    compare_schema(document, part["additionalProperties"], value_type, f"{where}{{*}}", problems, depth + 1)
        if "array" in part_types and isinstance(part.get("items"), dict):
            for python_type in alternatives:
                if typing.get_origin(python_type) is list:
                    compare_schema(document, part["items"], typing.get_args(python_type)[0], f"{where}[]", problems, depth + 1)


# Fields the service adds to every error body beyond the spec's ErrorResponse (RFC 9457 problem
# details, documented in docs/compatibility.md's wire contract); clients ignore them.
ERROR_EXTRAS = {"type", "title", "status"}
# Fields the service sends only when a request asks with one of its own extensions (documented in
# docs/compatibility.md): DescribeTable's `maintenance`, with `with_maintenance`.
ASKED_EXTRAS = {m.DescribeTableResponse: {"maintenance"}}


def compare_model(document: dict, schema: dict, model: type[BaseModel], where: str, problems: list[str], depth: int = 0) -> None:
    schema = deref(document, schema)
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    for name, property_schema in properties.items():
        if name not in fields:
            if not (model is m.ErrorResponse and name in ERROR_EXTRAS) and name not in ASKED_EXTRAS.get(model, ()):
                problems.append(f"{where}.{name}: sent by the service, not in the client's {model.__name__}")
            continue
        compare_schema(document, property_schema, fields[name].annotation, f"{where}.{name}", problems, depth)
    for name, info in fields.items():
        if info.is_required() and name not in required:
            problems.append(f"{where}.{name}: required by the client's {model.__name__}, optional in the service's schema")


def test_openapi_agrees_with_client_models(http):
    document = service_openapi(http)
    problems: list[str] = []
    compared = 0
    for operation_id, (method, path, operation) in sorted(service_operations(document).items()):
        response_types = client_response_types(operation_id)
        if response_types is None:
            continue  # no client method (GET forms, aliases, health): parsed in test_routes_without_a_client_method
        where = f"{operation_id} ({method.upper()} {path})"
        success = {status: response for status, response in operation["responses"].items() if status.startswith("2")}
        for status, response in success.items():
            if status not in response_types:
                problems.append(f"{where}: the service answers {status}, the client's method does not expect it")
                continue
            kind = response_types[status]
            content = response.get("content", {})
            if kind is None or kind == "bytearray":
                continue  # the client returns nothing / the raw bytes
            json_content = content.get("application/json")
            if json_content is None:
                problems.append(f"{where}: the client parses {kind} from a {status} answer that is not JSON ({sorted(content)})")
                continue
            compared += 1
            model = getattr(m, kind, None)
            if model is None:
                # A primitive or a map: the client's type names are Python's (int, str, Dict[str, str]).
                python_type = eval(kind, {"Dict": typing.Dict, "List": typing.List, "str": str, "int": int, "bool": bool, "float": float, "object": typing.Any})
                compare_schema(document, json_content["schema"], python_type, f"{where} {status}", problems)
            else:
                compare_model(document, json_content["schema"], model, f"{where} {status}", problems)
        for status, response in operation["responses"].items():
            kind = response_types.get(status) or response_types.get(status[0] + "XX")
            if kind == "ErrorResponse" and "application/json" in response.get("content", {}):
                compare_model(document, response["content"]["application/json"]["schema"], m.ErrorResponse, f"{where} {status}", problems)
    assert compared > 40
    assert problems == [], "\n".join(problems)


# Request fields the generated client (spec 0.13) can send that the service's schemas do not declare,
# so the service drops them. Known and accepted; anything new here fails the test below.
IGNORED_REQUEST_FIELDS: set[str] = set()


def compare_request_model(document: dict, schema: dict, model: type[BaseModel], where: str, problems: list[str], depth: int = 0) -> None:
    """Records the fields of the client's request `model` the service's `schema` does not declare."""
    if depth > 6:
        return
    schema = deref(document, schema)
    properties = schema.get("properties", {})
    for name, info in model.model_fields.items():
        field = info.alias or name
        if field not in properties:
            if f"{where}.{field}" not in IGNORED_REQUEST_FIELDS:
                problems.append(f"{where}.{field}: the client may send it, the service does not declare it")
            continue
        _, alternatives = python_types(info.annotation)
        for python_type in alternatives:
            if inspect.isclass(python_type) and issubclass(python_type, BaseModel):
                _, parts = json_types(document, properties[field])
                for part in parts:
                    if "properties" in part:
                        compare_request_model(document, part, python_type, f"{where}.{field}", problems, depth + 1)


def test_openapi_declares_every_request_field_of_the_client(http):
    """The other direction: a field the client sends that the service does not know is silently dropped."""
    document = service_openapi(http)
    problems: list[str] = []
    compared = 0
    for operation_id, (_, _, operation) in sorted(service_operations(document).items()):
        method = next((getattr(api, snake(operation_id)) for api in API_CLASSES if hasattr(api, snake(operation_id))), None)
        if method is None or "406" in operation["responses"] and len(operation["responses"]) == 1:
            continue  # no client method, or an operation the service refuses as a whole
        parameters = inspect.signature(method).parameters
        query = {p["name"] for p in operation.get("parameters", []) if p["in"] in ("query", "path")}
        for name in parameters:
            if name in ("self", "body", "request_body") or name.startswith("_") or name.endswith("_request"):
                continue
            if name not in query:
                problems.append(f"{operation_id}?{name}: a query parameter of the client the service does not declare")
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        models = [p.annotation for p in parameters.values() if p.name.endswith("_request")]
        if body and models:
            model = models[0] if not isinstance(models[0], str) else getattr(m, models[0])
            # An optional body (RefreshMaterializedView) is annotated Optional[Model].
            model = next((t for t in typing.get_args(model) if inspect.isclass(t) and issubclass(t, BaseModel)), model)
            compare_request_model(document, body["schema"], model, operation_id, problems)
            compared += 1
    assert compared > 30
    assert problems == [], "\n".join(problems)
