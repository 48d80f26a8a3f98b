"""Real-client contract tests: pylance's REST namespace client against our server.

Standalone pytest file. The server URL comes from the environment variable LANCE_NS_URL
(test/realclient/pylance.test.ts starts the service and runs this file). Every test uses
names of its own, so the tests are independent of each other and of the catalog's state.

The client is lance's Rust RestNamespace (through lance_namespace.connect("rest", ...)),
and the data path is pylance's namespace integration:
  lance.write_dataset(data, namespace_client=ns, table_id=[...])  (declare_table on create,
                                                                   describe_table on append)
  lance.dataset(namespace_client=ns, table_id=[...])              (describe_table)
"""

import os
import uuid

import lance
import lance_namespace
import pyarrow as pa
import pytest
from lance_namespace import (
    CreateNamespaceRequest,
    DeclareTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DropNamespaceRequest,
    DropTableRequest,
    ListNamespacesRequest,
    ListTablesRequest,
    NamespaceExistsRequest,
    TableExistsRequest,
)

VECTOR_TYPE = pa.list_(pa.float32(), 4)
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("vec", VECTOR_TYPE)])


def server_url() -> str:
    url = os.environ.get("LANCE_NS_URL")
    if not url:
        pytest.fail("LANCE_NS_URL is not set: run this file through test/realclient/pylance.test.ts")
    return url


@pytest.fixture
def ns():
    return lance_namespace.connect("rest", {"uri": server_url()})


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def rows(start: int, count: int) -> pa.Table:
    """Rows id start..start+count-1; floats that are exact in float32, so reads compare equal."""
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"row-{i}" for i in ids], pa.string()),
            "vec": pa.array([[i + 0.5, i + 0.25, -i * 1.0, 2.0**-i] for i in ids], VECTOR_TYPE),
        },
        schema=SCHEMA,
    )


def sorted_by_id(table: pa.Table) -> pa.Table:
    return table.sort_by("id")


def create_namespace(ns, name: str, properties=None) -> None:
    ns.create_namespace(CreateNamespaceRequest(id=[name], properties=properties))


def drop_namespace_quietly(ns, name: str) -> None:
    """Best-effort cleanup so a failed test does not leave a namespace that later asserts trip on."""
    try:
        for table in ns.list_tables(ListTablesRequest(id=[name])).tables or []:
            ns.drop_table(DropTableRequest(id=[name, table]))
        ns.drop_namespace(DropNamespaceRequest(id=[name]))
    except Exception:
        pass


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".lower()


# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------


def test_namespace_create_describe_list_drop(ns):
    name = unique("ns")
    properties = {"owner": "realclient", "description": "made by pylance"}
    try:
        create_namespace(ns, name, properties)

        described = ns.describe_namespace(DescribeNamespaceRequest(id=[name]))
        assert described.properties == properties

        ns.namespace_exists(NamespaceExistsRequest(id=[name]))

        listed = ns.list_namespaces(ListNamespacesRequest(id=[]))
        assert name in listed.namespaces

        assert ns.list_tables(ListTablesRequest(id=[name])).tables == []

        dropped = ns.drop_namespace(DropNamespaceRequest(id=[name]))
        assert dropped is not None

        with pytest.raises(Exception):
            ns.namespace_exists(NamespaceExistsRequest(id=[name]))
        assert name not in ns.list_namespaces(ListNamespacesRequest(id=[])).namespaces
    finally:
        drop_namespace_quietly(ns, name)


def test_create_existing_namespace_raises(ns):
    name = unique("dup_ns")
    try:
        create_namespace(ns, name)
        with pytest.raises(Exception) as info:
            create_namespace(ns, name)
        assert "already exists" in error_text(info.value)
    finally:
        drop_namespace_quietly(ns, name)


def test_nested_namespace_listing(ns):
    parent = unique("parent")
    try:
        create_namespace(ns, parent)
        ns.create_namespace(CreateNamespaceRequest(id=[parent, "child_a"]))
        ns.create_namespace(CreateNamespaceRequest(id=[parent, "child_b"]))
        listed = ns.list_namespaces(ListNamespacesRequest(id=[parent]))
        assert sorted(listed.namespaces) == ["child_a", "child_b"]
        for child in ("child_a", "child_b"):
            ns.drop_namespace(DropNamespaceRequest(id=[parent, child]))
        ns.drop_namespace(DropNamespaceRequest(id=[parent]))
    finally:
        for child in ("child_a", "child_b"):
            try:
                ns.drop_namespace(DropNamespaceRequest(id=[parent, child]))
            except Exception:
                pass
        drop_namespace_quietly(ns, parent)


# ---------------------------------------------------------------------------------------------
# Tables through pylance's namespace integration
# ---------------------------------------------------------------------------------------------


def test_write_read_append_describe_drop(ns):
    namespace = unique("data_ns")
    table = unique("tbl")
    table_id = [namespace, table]
    try:
        create_namespace(ns, namespace, {"purpose": "write-read"})

        first = rows(0, 5)
        written = lance.write_dataset(first, namespace_client=ns, table_id=table_id)
        assert written.version == 1
        assert written.count_rows() == 5

        assert ns.list_tables(ListTablesRequest(id=[namespace])).tables == [table]

        opened = lance.dataset(namespace_client=ns, table_id=table_id)
        assert opened.schema == SCHEMA
        assert opened.version == 1
        assert sorted_by_id(opened.to_table()).equals(first)

        second = rows(5, 3)
        appended = lance.write_dataset(second, namespace_client=ns, table_id=table_id, mode="append")
        assert appended.version == 2

        reopened = lance.dataset(namespace_client=ns, table_id=table_id)
        assert reopened.version == 2
        assert reopened.count_rows() == 8
        assert sorted_by_id(reopened.to_table()).equals(pa.concat_tables([first, second]))

        ns.table_exists(TableExistsRequest(id=table_id))

        described = ns.describe_table(DescribeTableRequest(id=table_id))
        assert described.location
        assert table in described.location
        assert described.location.rstrip("/") == reopened.uri.rstrip("/") or reopened.uri.rstrip("/").endswith(
            described.location.rstrip("/").split("://")[-1]
        )

        checked = ns.describe_table(DescribeTableRequest(id=table_id, check_declared=True))
        assert checked.is_only_declared is False

        detailed = ns.describe_table(DescribeTableRequest(id=table_id, load_detailed_metadata=True))
        assert detailed.version == 2
        assert detailed.table == table
        assert detailed.namespace == [namespace]

        dropped = ns.drop_table(DropTableRequest(id=table_id))
        assert dropped is not None
        with pytest.raises(Exception):
            ns.table_exists(TableExistsRequest(id=table_id))
        assert ns.list_tables(ListTablesRequest(id=[namespace])).tables == []
        with pytest.raises(Exception):
            lance.dataset(namespace_client=ns, table_id=table_id)

        ns.drop_namespace(DropNamespaceRequest(id=[namespace]))
        with pytest.raises(Exception):
            ns.namespace_exists(NamespaceExistsRequest(id=[namespace]))
    finally:
        drop_namespace_quietly(ns, namespace)


def test_describe_detailed_metadata_has_schema_and_stats(ns):
    """Spec (DescribeTableRequest.load_detailed_metadata): "When true, the response must include all
    detailed metadata such as `version`, `schema`, and `stats`". The reference DirectoryNamespace
    returns `schema` (arrow_schema_to_json) alongside `version`."""
    namespace = unique("meta_ns")
    table = unique("tbl")
    table_id = [namespace, table]
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=table_id)
        detailed = ns.describe_table(DescribeTableRequest(id=table_id, load_detailed_metadata=True))
        assert detailed.version == 1
        assert detailed.var_schema is not None, "load_detailed_metadata=true: response has no `schema`"
        assert [f.name for f in detailed.var_schema.fields] == ["id", "name", "vec"]
        assert detailed.var_schema.fields[0].type.type.lower() == "int64"
        assert detailed.stats is not None, "load_detailed_metadata=true: response has no `stats`"
        assert detailed.stats.num_fragments >= 1
        assert detailed.stats.num_deleted_rows == 0
    finally:
        drop_namespace_quietly(ns, namespace)


def test_overwrite_replaces_rows(ns):
    namespace = unique("ow_ns")
    table_id = [namespace, unique("tbl")]
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 4), namespace_client=ns, table_id=table_id)
        replacement = rows(100, 2)
        overwritten = lance.write_dataset(replacement, namespace_client=ns, table_id=table_id, mode="overwrite")
        assert overwritten.version == 2
        reopened = lance.dataset(namespace_client=ns, table_id=table_id)
        assert sorted_by_id(reopened.to_table()).equals(replacement)
    finally:
        drop_namespace_quietly(ns, namespace)


def test_create_over_existing_table_raises(ns):
    namespace = unique("dup_tbl_ns")
    table_id = [namespace, unique("tbl")]
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 2), namespace_client=ns, table_id=table_id)
        with pytest.raises(Exception) as info:
            lance.write_dataset(rows(10, 2), namespace_client=ns, table_id=table_id)
        assert "already exists" in error_text(info.value)
        # The failed create must not have touched the data.
        assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 2
    finally:
        drop_namespace_quietly(ns, namespace)


def test_declare_table_is_only_declared(ns):
    namespace = unique("decl_ns")
    table = unique("declared")
    table_id = [namespace, table]
    try:
        create_namespace(ns, namespace)

        declared = ns.declare_table(DeclareTableRequest(id=table_id))
        assert declared.location
        assert table in declared.location

        ns.table_exists(TableExistsRequest(id=table_id))
        assert table in ns.list_tables(ListTablesRequest(id=[namespace])).tables
        assert table not in (ns.list_tables(ListTablesRequest(id=[namespace], include_declared=False)).tables or [])

        plain = ns.describe_table(DescribeTableRequest(id=table_id))
        assert plain.location == declared.location
        assert plain.is_only_declared is None

        checked = ns.describe_table(DescribeTableRequest(id=table_id, check_declared=True))
        assert checked.is_only_declared is True

        with pytest.raises(Exception):
            ns.declare_table(DeclareTableRequest(id=table_id))

        ns.drop_table(DropTableRequest(id=table_id))
        with pytest.raises(Exception):
            ns.table_exists(TableExistsRequest(id=table_id))
        ns.drop_namespace(DropNamespaceRequest(id=[namespace]))
    finally:
        drop_namespace_quietly(ns, namespace)


def test_declared_table_then_written_by_pylance(ns):
    """Declare first (like lance-spark / LanceDB), then fill it with pylance in append mode."""
    namespace = unique("fill_ns")
    table_id = [namespace, unique("tbl")]
    try:
        create_namespace(ns, namespace)
        ns.declare_table(DeclareTableRequest(id=table_id))
        data = rows(0, 3)
        # A declared table is described (not declared again) by append/overwrite; a Lance
        # overwrite creates version 1 when there is no dataset yet.
        lance.write_dataset(data, namespace_client=ns, table_id=table_id, mode="overwrite")
        checked = ns.describe_table(DescribeTableRequest(id=table_id, check_declared=True))
        assert checked.is_only_declared is False
        assert sorted_by_id(lance.dataset(namespace_client=ns, table_id=table_id).to_table()).equals(data)
    finally:
        drop_namespace_quietly(ns, namespace)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_describe_missing_table_raises_not_found(ns):
    namespace = unique("missing_ns")
    try:
        create_namespace(ns, namespace)
        with pytest.raises(Exception) as info:
            ns.describe_table(DescribeTableRequest(id=[namespace, "no_such_table"]))
        text = error_text(info.value)
        assert "not found" in text or "does not exist" in text, text
    finally:
        drop_namespace_quietly(ns, namespace)


def test_open_missing_table_raises(ns):
    with pytest.raises(Exception) as info:
        lance.dataset(namespace_client=ns, table_id=[unique("absent_ns"), "no_such_table"])
    text = error_text(info.value)
    assert "not found" in text or "does not exist" in text, text


def test_drop_namespace_with_tables_raises(ns):
    namespace = unique("busy_ns")
    table_id = [namespace, unique("tbl")]
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 1), namespace_client=ns, table_id=table_id)
        with pytest.raises(Exception) as info:
            ns.drop_namespace(DropNamespaceRequest(id=[namespace]))
        text = error_text(info.value)
        assert "not empty" in text or "contains" in text, text
        ns.table_exists(TableExistsRequest(id=table_id))
    finally:
        drop_namespace_quietly(ns, namespace)
