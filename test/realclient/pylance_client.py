"""Real-client contract tests: pylance's REST namespace client against our server.

Run by test/realclient/python-clients.test.ts on a local root and on radosgw (see
clients_support.py for the environment). Every test uses names of its own, so the tests are
independent of each other and of the catalog's state.

The client is lance's Rust RestNamespace (through lance_namespace.connect("rest", ...)),
and the data path is pylance's namespace integration:
  lance.write_dataset(data, namespace_client=ns, table_id=[...])  (declare_table on create,
                                                                   describe_table on append)
  lance.dataset(namespace_client=ns, table_id=[...])              (describe_table)

With managed versioning (a namespace or table property managed_versioning=true, answered as
`managed_versioning: true` by declare/describe), pylance stages each manifest and commits it
through the service (create_table_version) instead of writing the final manifest itself.

Run as a script (`python pylance_client.py append-worker '<json>'`) it is one writer process of
test_managed_versioning_concurrent_appends.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import lance
import lance_namespace
import pyarrow as pa
import pytest
from lance_namespace import (
    CountTableRowsRequest,
    CreateNamespaceRequest,
    CreateTableBranchRequest,
    CreateTableRequest,
    CreateTableTagRequest,
    DeclareTableRequest,
    DeleteFromTableRequest,
    DeleteTableBranchRequest,
    DeregisterTableRequest,
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DescribeTableVersionRequest,
    DescribeTableVersionResponse,
    DropNamespaceRequest,
    DropTableRequest,
    GetTableTagVersionRequest,
    InsertIntoTableRequest,
    ListTableBranchesRequest,
    ListNamespacesRequest,
    ListTablesRequest,
    ListTableTagsRequest,
    ListTableVersionsRequest,
    NamespaceExistsRequest,
    RegisterTableRequest,
    TableExistsRequest,
)

from clients_support import drop_namespace_quietly, error_text, local_dir, ns, on_s3, server_url, service_commits, unique  # noqa: F401 (ns is a fixture)

VECTOR_TYPE = pa.list_(pa.float32(), 4)
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("vec", VECTOR_TYPE)])


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


def arrow_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_create_table_with_arrow_data(ns):
    """CreateTable: the service writes the rows it is sent; pylance reads them."""
    namespace = unique("create_ns")
    table_id = [namespace, unique("tbl")]
    try:
        create_namespace(ns, namespace)
        data = rows(0, 4)
        created = ns.create_table(CreateTableRequest(id=table_id), arrow_stream(data))
        assert created.version == 1
        assert created.location
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        assert dataset.version == 1
        assert sorted_by_id(dataset.to_table()).equals(data)
        with pytest.raises(Exception) as info:
            ns.create_table(CreateTableRequest(id=table_id), arrow_stream(rows(10, 1)))
        assert "already exists" in error_text(info.value)
        # pylance appends to the table the service created.
        assert lance.write_dataset(rows(4, 2), namespace_client=ns, table_id=table_id, mode="append").version == 2
        assert lance.dataset(namespace_client=ns, table_id=table_id).count_rows() == 6
    finally:
        drop_namespace_quietly(ns, namespace)


def test_register_existing_location_and_deregister(ns):
    """RegisterTable at the location of a table pylance wrote: a second name for the same data,
    which sees the first name's later commits; deregistering it leaves the data and the first
    name alone."""
    namespace = unique("reg_ns")
    other = unique("reg_other")
    source_id = [namespace, "source"]
    registered_id = [other, "alias"]
    try:
        create_namespace(ns, namespace)
        create_namespace(ns, other)
        lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=source_id)
        location = ns.describe_table(DescribeTableRequest(id=source_id)).location

        response = ns.register_table(RegisterTableRequest(id=registered_id, location=location))
        assert response.location.rstrip("/") == location.rstrip("/")
        assert ns.list_tables(ListTablesRequest(id=[other])).tables == ["alias"]
        ns.table_exists(TableExistsRequest(id=registered_id))
        assert ns.describe_table(DescribeTableRequest(id=registered_id)).location.rstrip("/") == location.rstrip("/")
        alias = lance.dataset(namespace_client=ns, table_id=registered_id)
        assert alias.version == 1
        assert sorted_by_id(alias.to_table()).equals(rows(0, 3))

        lance.write_dataset(rows(3, 2), namespace_client=ns, table_id=source_id, mode="append")
        assert lance.dataset(namespace_client=ns, table_id=registered_id).count_rows() == 5

        with pytest.raises(Exception):
            ns.register_table(RegisterTableRequest(id=registered_id, location=location))

        ns.deregister_table(DeregisterTableRequest(id=registered_id))
        assert ns.list_tables(ListTablesRequest(id=[other])).tables == []
        with pytest.raises(Exception):
            lance.dataset(namespace_client=ns, table_id=registered_id)
        assert lance.dataset(namespace_client=ns, table_id=source_id).count_rows() == 5
    finally:
        drop_namespace_quietly(ns, other)
        drop_namespace_quietly(ns, namespace)


def test_deregistered_name_is_free_and_its_data_stays(ns):
    """As with Lance's own directory catalog: after a deregister the name is free (pylance writes a
    new table of it, at a new location), the deregistered data stays readable where it was, and a
    Restrict drop of the namespace succeeds once nothing else is in it."""
    namespace = unique("dereg_ns")
    table_id = [namespace, "t"]
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=table_id)
        old = ns.deregister_table(DeregisterTableRequest(id=table_id)).location
        assert ns.list_tables(ListTablesRequest(id=[namespace])).tables == []
        lance.write_dataset(rows(10, 2), namespace_client=ns, table_id=table_id)
        new = ns.describe_table(DescribeTableRequest(id=table_id)).location
        assert new.rstrip("/") != old.rstrip("/")
        assert sorted_by_id(lance.dataset(namespace_client=ns, table_id=table_id).to_table()).equals(rows(10, 2))
        # The deregistered data is served again once registered (here under another name).
        ns.register_table(RegisterTableRequest(id=[namespace, "back"], location=old))
        assert lance.dataset(namespace_client=ns, table_id=[namespace, "back"]).count_rows() == 3
        ns.drop_table(DropTableRequest(id=[namespace, "back"]))
        ns.deregister_table(DeregisterTableRequest(id=table_id))
        ns.drop_namespace(DropNamespaceRequest(id=[namespace]))
        with pytest.raises(Exception):
            ns.namespace_exists(NamespaceExistsRequest(id=[namespace]))
    finally:
        drop_namespace_quietly(ns, namespace)


def test_register_answers_the_location_as_sent_and_refuses_in_lances_words(ns):
    """What Lance's own REST namespace tests expect of a server: RegisterTable of a relative location
    (the last segment of a deregistered table's location, relative to its namespace) answers that
    location as sent, and the table is there under the new name; an absolute URI or path outside the
    catalog and a `..` are refused with the reference server's words, which those tests match."""
    namespace = unique("reg_rel")
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=[namespace, "physical"])
        location = ns.deregister_table(DeregisterTableRequest(id=[namespace, "physical"])).location
        relative = location.rstrip("/").split("/")[-1]
        response = ns.register_table(RegisterTableRequest(id=[namespace, "registered"], location=relative))
        assert response.location == relative
        ns.table_exists(TableExistsRequest(id=[namespace, "registered"]))
        assert ns.describe_table(DescribeTableRequest(id=[namespace, "registered"])).location.rstrip("/") == location.rstrip("/")
        assert sorted_by_id(lance.dataset(namespace_client=ns, table_id=[namespace, "registered"]).to_table()).equals(rows(0, 3))
        for sent, words in [
            ("s3://some-other-bucket/table.lance", "Absolute URIs are not allowed"),
            ("/nowhere-near-the-root/table.lance", "Absolute paths are not allowed"),
            ("../outside/table.lance", "Path traversal is not allowed"),
        ]:
            with pytest.raises(Exception) as info:
                ns.register_table(RegisterTableRequest(id=[namespace, "refused"], location=sent))
            assert words in str(info.value), sent
        with pytest.raises(Exception):
            ns.table_exists(TableExistsRequest(id=[namespace, "refused"]))
    finally:
        drop_namespace_quietly(ns, namespace)


@pytest.mark.skipif(on_s3(), reason="the client holds no S3 credentials of its own to write outside a table")
def test_register_dataset_written_outside_the_catalog(ns):
    """RegisterTable of a Lance dataset pylance wrote by path, inside the root but not through the
    service; then written through the namespace."""
    namespace = unique("ext_ns")
    table_id = [namespace, "ext"]
    path = os.path.join(os.environ["LANCE_NS_ROOT"], "outside", f"{unique('ds')}.lance")
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 2), path)
        lance.write_dataset(rows(2, 2), path, mode="append")
        ns.register_table(RegisterTableRequest(id=table_id, location=path))
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        assert dataset.version == 2
        assert sorted_by_id(dataset.to_table()).equals(rows(0, 4))
        assert lance.dataset(namespace_client=ns, table_id=table_id, version=1).count_rows() == 2
        assert lance.write_dataset(rows(4, 1), namespace_client=ns, table_id=table_id, mode="append").version == 3
        assert lance.dataset(path).count_rows() == 5
    finally:
        drop_namespace_quietly(ns, namespace)


# ---------------------------------------------------------------------------------------------
# Versions and tags, with and without managed versioning
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("managed", [False, True], ids=["unmanaged", "managed"])
def test_versions_and_tags(ns, managed):
    """Create, append, overwrite through pylance; tags made by pylance and by the service; reads
    of the latest version, older versions and tags. With managed versioning every commit goes
    through the service (create_table_version)."""
    namespace = unique("ver_ns")
    table_id = [namespace, "t"]
    try:
        create_namespace(ns, namespace, {"managed_versioning": "true"} if managed else None)
        commits_before = service_commits()
        assert lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=table_id).version == 1
        assert ns.describe_table(DescribeTableRequest(id=table_id)).managed_versioning is managed
        assert lance.write_dataset(rows(3, 2), namespace_client=ns, table_id=table_id, mode="append").version == 2

        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        dataset.tags.create("first", 1)
        ns.create_table_tag(CreateTableTagRequest(id=table_id, tag="second", version=2))

        replacement = rows(100, 2)
        assert lance.write_dataset(replacement, namespace_client=ns, table_id=table_id, mode="overwrite").version == 3

        def read(version=None) -> pa.Table:
            return sorted_by_id(lance.dataset(namespace_client=ns, table_id=table_id, version=version).to_table())

        assert read().equals(replacement)
        assert read(1).equals(rows(0, 3))
        assert read(2).equals(rows(0, 5))
        assert read("first").equals(rows(0, 3))
        assert read("second").equals(rows(0, 5))
        latest = lance.dataset(namespace_client=ns, table_id=table_id)
        assert latest.version == 3
        assert latest.checkout_version("first").count_rows() == 3

        tags = ns.list_table_tags(ListTableTagsRequest(id=table_id)).tags
        assert {name: tag.version for name, tag in tags.items()} == {"first": 1, "second": 2}
        assert ns.get_table_tag_version(GetTableTagVersionRequest(id=table_id, tag="first")).version == 1
        assert {name: tag["version"] for name, tag in latest.tags.list().items()} == {"first": 1, "second": 2}

        assert [v.version for v in all_versions(ns, table_id)] == [1, 2, 3]
        assert describe_version(ns, table_id).version.version == 3
        assert describe_version(ns, table_id, 1).version.version == 1
        older = ns.describe_table(DescribeTableRequest(id=table_id, version=1, load_detailed_metadata=True))
        assert older.version == 1
        assert ns.describe_table(DescribeTableRequest(id=table_id, load_detailed_metadata=True)).version == 3
        if managed:
            assert service_commits() - commits_before == 3
    finally:
        drop_namespace_quietly(ns, namespace)


@pytest.mark.parametrize("managed", [False, True], ids=["unmanaged", "managed"])
def test_dataset_writes_through_the_namespace(ns, managed):
    """A dataset opened through the namespace commits its own changes (delete, update,
    merge_insert, add_columns, an index, restore) each as the next version, through the service
    when the table has managed versioning."""
    namespace = unique("dsw_ns")
    table_id = [namespace, "t"]
    try:
        create_namespace(ns, namespace, {"managed_versioning": "true"} if managed else None)
        commits_before = service_commits()
        lance.write_dataset(rows(0, 10), namespace_client=ns, table_id=table_id)
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        assert dataset.delete("id < 2")["num_deleted_rows"] == 2
        assert dataset.update({"name": "'renamed'"}, where="id = 5")["num_rows_updated"] == 1
        merged = dataset.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows(9, 3))
        assert (merged["num_inserted_rows"], merged["num_updated_rows"]) == (2, 1)
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        dataset.add_columns({"double_id": "id * 2"})
        dataset.create_scalar_index("id", "BTREE")
        assert dataset.version == 6
        latest = lance.dataset(namespace_client=ns, table_id=table_id)
        assert sorted(latest.to_table(columns=["id"]).column("id").to_pylist()) == list(range(2, 12))
        assert latest.to_table(filter="id = 5", columns=["name"]).column("name").to_pylist() == ["renamed"]
        assert [i.name for i in latest.describe_indices()] == ["id_idx"]

        lance.dataset(namespace_client=ns, table_id=table_id, version=1).restore()
        restored = lance.dataset(namespace_client=ns, table_id=table_id)
        assert restored.version == 7
        assert sorted_by_id(restored.to_table()).equals(rows(0, 10))
        assert [v.version for v in all_versions(ns, table_id)] == list(range(1, 8))
        if managed:
            assert service_commits() - commits_before == 7
    finally:
        drop_namespace_quietly(ns, namespace)


def test_managed_branch_commits_through_the_service(ns):
    """On a table with managed versioning, pylance's create_branch and its writes on the branch
    commit through the service (create_table_version with the branch): the branch's history is the
    service's to list and describe, starts at the version it was forked at, and main does not move.
    Before it commits the branch's first manifest pylance asks for the branch's latest version, and
    takes the service's 404 code 22 for "no version yet"."""
    namespace = unique("mvb_ns")
    table_id = [namespace, "t"]
    try:
        create_namespace(ns, namespace, {"managed_versioning": "true"})
        lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=table_id)
        lance.write_dataset(rows(3, 2), namespace_client=ns, table_id=table_id, mode="append")
        commits_before = service_commits()

        branch = lance.dataset(namespace_client=ns, table_id=table_id).create_branch("dev")
        assert branch.version == 2
        branch.insert(rows(10, 2))
        on_dev = lance.dataset(namespace_client=ns, table_id=table_id).checkout_version(("dev", None))
        assert (on_dev.version, on_dev.count_rows()) == (3, 7)
        on_dev.insert(rows(20, 1))
        # The branch's first manifest and both inserts went through the service.
        assert service_commits() - commits_before == 3

        main = lance.dataset(namespace_client=ns, table_id=table_id)
        assert (main.version, main.count_rows()) == (2, 5)
        assert sorted_by_id(main.checkout_version(("dev", None)).to_table()).equals(sorted_by_id(pa.concat_tables([rows(0, 5), rows(10, 2), rows(20, 1)])))
        assert [v.version for v in ns.list_table_versions(ListTableVersionsRequest(id=table_id, branch="dev")).versions] == [2, 3, 4]
        assert [v.version for v in all_versions(ns, table_id)] == [1, 2]
        request = DescribeTableVersionRequest(id=table_id, branch="dev")
        try:
            latest = ns.describe_table_version(request)
        except TypeError:
            latest = ns.describe_table_version(request.model_dump(exclude_none=True))
        latest = DescribeTableVersionResponse.from_dict(latest) if isinstance(latest, dict) else latest
        assert latest.version.version == 4
        assert "/tree/dev/_versions/" in latest.version.manifest_path
        assert list(main.branches.list()) == ["dev"]

        location = ns.describe_table(DescribeTableRequest(id=table_id)).location
        directory = local_dir(location)
        if directory is not None:
            # Read straight from storage, without the service: the same branch.
            assert lance.dataset(directory).checkout_version(("dev", None)).count_rows() == 8

        with pytest.raises(Exception) as info:
            ns.list_table_versions(ListTableVersionsRequest(id=table_id, branch="nope"))
        assert "branch" in error_text(info.value)
    finally:
        drop_namespace_quietly(ns, namespace)


def test_branches_both_ways(ns):
    """A branch the service forks and writes is read by pylance from storage; a branch pylance
    forks is listed, counted and written by the service; main never changes."""
    namespace = unique("br_ns")
    table_id = [namespace, "t"]
    try:
        create_namespace(ns, namespace)
        lance.write_dataset(rows(0, 3), namespace_client=ns, table_id=table_id)
        ns.create_table_branch(CreateTableBranchRequest(id=table_id, name="dev"))
        ns.insert_into_table(InsertIntoTableRequest(id=table_id, branch="dev"), arrow_stream(rows(3, 2)))
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        dev = dataset.checkout_version(("dev", None))
        assert sorted_by_id(dev.to_table()).equals(rows(0, 5))
        assert dataset.count_rows() == 3
        assert set(dataset.branches.list()) == {"dev"}

        # pylance forks a branch itself (from main's version 1) and writes it; the service sees it.
        forked = dataset.create_branch("py/feature", 1)
        lance.write_dataset(rows(10, 1), forked, mode="append")
        listed = ns.list_table_branches(ListTableBranchesRequest(id=table_id)).branches
        assert set(listed) == {"dev", "py/feature"}
        assert listed["py/feature"].parent_version == 1
        assert ns.count_table_rows(CountTableRowsRequest(id=table_id, branch="py/feature")).count == 4
        ns.delete_from_table(DeleteFromTableRequest(id=table_id, branch="py/feature", predicate="id = 0"))
        py = lance.dataset(namespace_client=ns, table_id=table_id).checkout_version(("py/feature", None))
        assert sorted(py.to_table(columns=["id"]).column("id").to_pylist()) == [1, 2, 10]
        assert ns.count_table_rows(CountTableRowsRequest(id=table_id)).count == 3

        ns.delete_table_branch(DeleteTableBranchRequest(id=table_id, name="dev"))
        assert set(lance.dataset(namespace_client=ns, table_id=table_id).branches.list()) == {"py/feature"}
        with pytest.raises(Exception) as info:
            ns.count_table_rows(CountTableRowsRequest(id=table_id, branch="dev"))
        assert "dev" in error_text(info.value)
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


# ---------------------------------------------------------------------------------------------
# Managed versioning: the service as commit coordinator
# ---------------------------------------------------------------------------------------------

APPENDS_PER_WRITER = 15
ROWS_PER_APPEND = 2
WRITER_TIMEOUT_S = 180


def append_worker(config: dict) -> None:
    """One writer process: connect, report ready, wait for the start line on stdin, append."""
    ns = lance_namespace.connect("rest", {"uri": config["url"]})
    table_id = config["table_id"]
    print(json.dumps({"kind": "ready"}), flush=True)
    if not sys.stdin.readline():
        raise SystemExit("stdin closed before the start signal")
    versions = []
    started = time.time()
    for i in range(config["appends"]):
        first = config["first_id"] + i * config["rows_per_append"]
        ds = lance.write_dataset(rows(first, config["rows_per_append"]), namespace_client=ns, table_id=table_id, mode="append")
        versions.append(ds.version)
    print(json.dumps({"kind": "done", "versions": versions, "started": started, "ended": time.time()}), flush=True)


def start_writer(config: dict) -> subprocess.Popen:
    """Starts a writer process; its stderr goes to a temporary file (read by writer_stderr)."""
    stderr = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "append-worker", json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    proc.stderr_file = stderr
    return proc


def writer_stderr(proc: subprocess.Popen) -> str:
    proc.stderr_file.seek(0)
    return proc.stderr_file.read()


def read_message(proc: subprocess.Popen) -> dict:
    """The next JSON line the writer prints (lines that are not JSON objects are skipped)."""
    while True:
        line = proc.stdout.readline()
        if not line:
            proc.wait(timeout=WRITER_TIMEOUT_S)
            raise AssertionError(f"writer exited with {proc.returncode} before reporting; stderr:\n{writer_stderr(proc)}")
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and "kind" in message:
            return message


def all_versions(ns, table_id) -> list:
    """Every version the service lists, following page tokens."""
    out = []
    token = None
    for _ in range(100):
        page = ns.list_table_versions(ListTableVersionsRequest(id=table_id, limit=20, page_token=token))
        out.extend(page.versions)
        token = page.page_token
        if not token:
            return out
    raise AssertionError("list_table_versions: more than 100 pages")


def describe_version(ns, table_id, version=None):
    """describe_table_version. pylance 14.0.2's RestNamespace takes and returns plain dicts here
    (unlike list_table_versions, which takes the lance_namespace request model)."""
    request = DescribeTableVersionRequest(id=table_id, version=version)
    try:
        response = ns.describe_table_version(request)
    except TypeError:
        response = ns.describe_table_version(request.model_dump(exclude_none=True))
    return DescribeTableVersionResponse.from_dict(response) if isinstance(response, dict) else response


def test_managed_versioning_concurrent_appends(ns):
    """Two Python processes append to one managed-versioning table at the same time: every row
    lands once, the service's version history is 1..latest without gaps, and each version was
    committed through the service (final manifests it lists and describes, each counted by the
    service; on local disk no staged manifest left over)."""
    namespace = unique("mv_ns")
    table = unique("tbl")
    table_id = [namespace, table]
    writers = []
    try:
        create_namespace(ns, namespace, {"managed_versioning": "true"})
        commits_before = service_commits()
        assert ns.describe_namespace(DescribeNamespaceRequest(id=[namespace])).properties == {"managed_versioning": "true"}

        seed = rows(0, 3)
        created = lance.write_dataset(seed, namespace_client=ns, table_id=table_id)
        assert created.version == 1
        described = ns.describe_table(DescribeTableRequest(id=table_id))
        assert described.managed_versioning is True
        # Version 1 went through the service too.
        assert [v.version for v in all_versions(ns, table_id)] == [1]

        configs = [
            {
                "url": server_url(),
                "table_id": table_id,
                "first_id": 1000 * (i + 1),
                "appends": APPENDS_PER_WRITER,
                "rows_per_append": ROWS_PER_APPEND,
            }
            for i in range(2)
        ]
        writers = [start_writer(c) for c in configs]
        for w in writers:
            assert read_message(w)["kind"] == "ready"
        for w in writers:
            w.stdin.write("go\n")
            w.stdin.flush()
        results = []
        for w in writers:
            message = read_message(w)
            assert message["kind"] == "done", f"{message}; stderr:\n{writer_stderr(w)}"
            w.wait(timeout=WRITER_TIMEOUT_S)
            assert w.returncode == 0, writer_stderr(w)
            results.append(message)

        # They really overlapped in time.
        a, b = results
        assert a["started"] < b["ended"] and b["started"] < a["ended"]

        # Each append got a version of its own; together exactly 2..latest.
        latest = 1 + 2 * APPENDS_PER_WRITER
        assert sorted(a["versions"] + b["versions"]) == list(range(2, latest + 1))

        # Every row exactly once.
        expected_ids = list(range(3)) + [
            c["first_id"] + k for c in configs for k in range(c["appends"] * c["rows_per_append"])
        ]
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        assert dataset.version == latest
        assert dataset.count_rows() == len(expected_ids)
        assert sorted(dataset.to_table(columns=["id"]).column("id").to_pylist()) == sorted(expected_ids)

        # The service's history: gap-free 1..latest, every entry a final (not staged) manifest.
        listed = all_versions(ns, table_id)
        assert [v.version for v in listed] == list(range(1, latest + 1))
        for v in listed:
            assert v.manifest_path.endswith(".manifest"), v.manifest_path
        newest = describe_version(ns, table_id)
        assert newest.version.version == latest
        for version in (1, latest // 2, latest):
            one = describe_version(ns, table_id, version)
            assert one.version.version == version
            assert one.version.manifest_path == listed[version - 1].manifest_path

        # The service committed every version; on local disk no slot is held and no staged manifest
        # is left. (Names with ".~tmp~" are the service's own hidden files, kept to be written
        # again for the next reservation: never listed, and removed with the table.)
        assert service_commits() - commits_before == latest
        directory = local_dir(described.location)
        if directory is not None:
            reservations = os.path.join(directory, "_catalog", "reservations")
            held = [f for f in os.listdir(reservations) if ".~tmp~" not in f] if os.path.isdir(reservations) else []
            assert held == []
            staged = sorted(f for f in os.listdir(os.path.join(directory, "_versions")) if ".manifest-" in f)
            staged_versions = sorted(
                (2**64 - 1 - int(f.split(".")[0])) if len(f.split(".")[0]) == 20 else int(f.split(".")[0]) for f in staged
            )
            assert staged == [], f"staged manifests left behind, of versions {staged_versions}"
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
            w.stderr_file.close()
        drop_namespace_quietly(ns, namespace)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "append-worker":
    try:
        append_worker(json.loads(sys.argv[2]))
    except BaseException as e:  # report, then fail the process
        print(json.dumps({"kind": "error", "message": f"{type(e).__name__}: {e}"}), flush=True)
        raise
