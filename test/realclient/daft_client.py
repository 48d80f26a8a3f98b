"""Daft (0.7.26) with daft-lance (0.6.0) through the service.

daft-lance addresses a table by namespace: read_lance / write_lance(table_id=[...],
namespace_impl="rest", namespace_properties={"uri": ...}) connect lance_namespace's REST client
themselves; a create declares the table, an append or overwrite describes it, and each write is
committed by pylance (through the service's create_table_version when the table has managed
versioning). (daft.read_lance of Daft 0.7.26 still requires a uri; daft_lance.read_lance takes
the namespace.)

Run by test/realclient/python-clients.test.ts (see clients_support.py for the environment).
"""

import daft
import daft_lance
import lance
import pytest
from lance_namespace import CreateNamespaceRequest, DescribeTableRequest, ListTablesRequest

from clients_support import drop_namespace_quietly, ns, server_url, service_commits, unique  # noqa: F401 (ns is a fixture)


def frame(start: int, count: int) -> daft.DataFrame:
    ids = list(range(start, start + count))
    return daft.from_pydict({"id": ids, "name": [f"n{i}" for i in ids], "score": [i * 0.5 for i in ids]})


def namespace_args(table_id: list) -> dict:
    return {"table_id": table_id, "namespace_impl": "rest", "namespace_properties": {"uri": server_url()}}


def write(df: daft.DataFrame, table_id: list, mode: str) -> dict:
    return daft_lance.write_lance(df, mode=mode, **namespace_args(table_id)).to_pydict()


def read(table_id: list, **kwargs) -> daft.DataFrame:
    return daft_lance.read_lance(**namespace_args(table_id), **kwargs)


def ids(df: daft.DataFrame) -> list:
    return sorted(df.to_pydict()["id"])


@pytest.mark.parametrize("managed", [False, True], ids=["unmanaged", "managed"])
def test_create_append_overwrite_read(ns, managed):
    namespace = unique("daft_ns")
    table_id = [namespace, "events"]
    try:
        ns.create_namespace(CreateNamespaceRequest(id=[namespace], properties={"managed_versioning": "true"} if managed else None))
        commits_before = service_commits()

        assert write(frame(0, 4), table_id, "create")["version"] == [1]
        assert ns.list_tables(ListTablesRequest(id=[namespace])).tables == ["events"]
        assert ns.describe_table(DescribeTableRequest(id=table_id)).managed_versioning is managed
        with pytest.raises(Exception):
            write(frame(10, 1), table_id, "create")

        assert write(frame(4, 3), table_id, "append")["version"] == [2]
        assert ids(read(table_id)) == list(range(7))
        # A filter and a projection, evaluated by Daft over the Lance scan.
        filtered = read(table_id).where(daft.col("id") >= 5).select("id", "name").to_pydict()
        assert sorted(zip(filtered["id"], filtered["name"])) == [(5, "n5"), (6, "n6")]
        assert read(table_id).count_rows() == 7

        assert write(frame(100, 2), table_id, "overwrite")["version"] == [3]
        assert ids(read(table_id)) == [100, 101]
        assert ids(read(table_id, version=1)) == list(range(4))
        assert ids(read(table_id, version=2)) == list(range(7))

        # What Daft wrote is the table pylance sees through the namespace, in the same versions.
        dataset = lance.dataset(namespace_client=ns, table_id=table_id)
        assert dataset.version == 3
        assert sorted(dataset.to_table().column("id").to_pylist()) == [100, 101]
        assert dataset.schema.names == ["id", "name", "score"]
        if managed:
            # Each of Daft's commits went through the service.
            assert service_commits() - commits_before == 3
    finally:
        drop_namespace_quietly(ns, namespace)


def test_read_missing_table_raises(ns):
    namespace = unique("daft_missing")
    try:
        ns.create_namespace(CreateNamespaceRequest(id=[namespace]))
        with pytest.raises(Exception) as info:
            read([namespace, "absent"]).collect()
        text = str(info.value).lower()
        assert "not found" in text or "does not exist" in text, text
    finally:
        drop_namespace_quietly(ns, namespace)
