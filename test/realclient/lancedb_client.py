"""LanceDB Python (0.40) through the service: lancedb.connect_namespace("rest", {"uri": ...}).

The same walk through a table (create_table, open, add, count, vector search with and without a
filter, a filter-only query, full-text index and search, scalar and vector indices, update,
delete, drop) runs with and without managed versioning, and in two modes:
  - client-side: the service resolves names (declare, describe, list, drop) and, with managed
    versioning, commits each version; the client reads and writes the data itself;
  - pushdown: namespace_client_pushdown_operations=["QueryTable", "CreateTable"], every operation
    LanceDB 0.40 can hand to a REST namespace. What its native REST connection really sends
    (seen through a recording proxy): filter-only scans and full-text searches go to the
    service's QueryTable; vector searches still run in the client, and create_table still
    declares the table and writes the data itself (CreateTable is accepted but not used).
Every query's answer is checked against rows computed here from the data the test wrote.
test_hybrid_search runs LanceDB's hybrid search (vector + full text, fused by its RRF reranker) in
each mode and checks it against the same search on the table opened directly (lancedb.connect at
the location DescribeTable answers; on S3, see open_directly).
test_managed_branch_commits_through_the_service forks a branch of a managed table and writes on it,
every commit through the service.
test_phrase_query_pushed_down records a client bug: a phrase or boolean full-text query is
pushed down as the Debug text of the Rust query.

Run by test/realclient/python-clients.test.ts (see clients_support.py for the environment).
"""

import math

import lancedb
import pyarrow as pa
import pytest
from lancedb.index import FTS, BTree, IvfFlat

from lance_namespace import DescribeTableRequest, ListTableVersionsRequest

from clients_support import RecordingProxy, connect, drop_namespace_quietly, on_s3, server_url, service_commits, unique

DIM = 4
ROWS = 48
WORDS = ["apple", "banana", "cherry"]


def row_text(i: int) -> str:
    # One fruit word per row (a third of the rows each), and a word of its own.
    return f"{WORDS[i % 3]} number{i}"


def row_vector(i: int) -> list:
    # Distinct, exactly representable float32 vectors spread over the space.
    return [float(i), float((i * 7) % 11), float((i * 5) % 13) / 2.0, 1.0]


def make_rows(start: int, count: int, text=row_text) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "text": pa.array([text(i) for i in ids], pa.string()),
            "vector": pa.array([row_vector(i) for i in ids], pa.list_(pa.float32(), DIM)),
        }
    )


def nearest(ids: list, query: list, k: int) -> list:
    """The k ids whose vectors are nearest to query (L2), ties by id."""
    return [i for _, i in sorted((math.dist(row_vector(i), query), i) for i in ids)[:k]]


def ids_of(table: pa.Table) -> list:
    return table.column("id").to_pylist()


def query_requests(requests: list) -> list:
    return [path for method, path in requests if method == "POST" and path.split("?")[0].endswith("/query")]


@pytest.fixture
def proxy():
    p = RecordingProxy(server_url())
    yield p
    p.close()


MODES = {
    "client-side": None,
    "pushdown": ["QueryTable", "CreateTable"],
}


def in_every_mode(test):
    """Runs `test(proxy, mode, managed)` in each mode, with and without managed versioning."""
    test = pytest.mark.parametrize("mode", list(MODES))(test)
    return pytest.mark.parametrize("managed", [False, True], ids=["unmanaged", "managed"])(test)


def connect_in(proxy, mode: str, prefix: str):
    """A LanceDB connection through the proxy in `mode`, a fresh namespace name for it, and
    whether the connection pushes queries down."""
    db = lancedb.connect_namespace("rest", {"uri": proxy.url}, namespace_client_pushdown_operations=MODES[mode])
    return db, unique(f"{prefix}_{mode.replace('-', '_')}"), MODES[mode] is not None


@in_every_mode
def test_table_walk(proxy, mode, managed):
    db, namespace, pushdown = connect_in(proxy, mode, "ldb")
    path = [namespace]
    properties = {"client": "lancedb", **({"managed_versioning": "true"} if managed else {})}
    try:
        db.create_namespace(path, properties=properties)
        commits_before = service_commits()
        assert db.describe_namespace(path).properties == properties
        assert namespace in db.list_namespaces().namespaces

        # create_table, then add: versions 1 and 2.
        table = db.create_table("items", make_rows(0, 40), namespace_path=path)
        assert table.version == 1
        added = table.add(make_rows(40, ROWS - 40))
        assert added.version == 2
        assert db.list_tables(namespace_path=path).tables == ["items"]

        # open, count (also with a filter).
        table = db.open_table("items", namespace_path=path)
        assert table.version == 2
        assert table.count_rows() == ROWS
        assert table.count_rows("id >= 10") == ROWS - 10
        assert table.schema.field("vector").type == pa.list_(pa.float32(), DIM)
        all_ids = list(range(ROWS))

        # Vector search without an index: exact nearest neighbours, without and with a filter.
        query = [5.2, 3.0, 1.5, 1.0]
        got = table.search(query).limit(5).to_arrow()
        assert ids_of(got) == nearest(all_ids, query, 5)
        assert "_distance" in got.column_names
        got = table.search(query).where("id % 2 = 0").limit(4).to_arrow()
        assert ids_of(got) == nearest([i for i in all_ids if i % 2 == 0], query, 4)

        # A filter-only query (no vector, no text), with a projection.
        mark = proxy.mark()
        got = table.search().where("id < 6 AND id != 2").select(["id", "text"]).to_arrow()
        assert sorted(ids_of(got)) == [0, 1, 3, 4, 5]
        assert got.column_names == ["id", "text"]
        assert sorted(got.column("text").to_pylist()) == sorted(row_text(i) for i in [0, 1, 3, 4, 5])
        filter_queries = query_requests(proxy.since(mark))

        # Full-text index and search, without and with a filter.
        table.create_index("text", config=FTS())
        mark = proxy.mark()
        got = table.search("banana", query_type="fts").limit(ROWS).to_arrow()
        assert sorted(ids_of(got)) == [i for i in all_ids if i % 3 == 1]
        assert "_score" in got.column_names
        got = table.search("number7", query_type="fts").limit(5).to_arrow()
        assert ids_of(got) == [7]
        got = table.search("cherry", query_type="fts").where("id < 20").limit(ROWS).to_arrow()
        assert sorted(ids_of(got)) == [i for i in range(20) if i % 3 == 2]
        fts_queries = query_requests(proxy.since(mark))

        # A scalar index, and a vector index (IVF flat with one partition: still exact).
        table.create_index("id", config=BTree())
        table.create_index("vector", config=IvfFlat(num_partitions=1))
        indices = {i.name: i for i in table.list_indices()}
        assert {(i.index_type, tuple(i.columns)) for i in indices.values()} == {
            ("FTS", ("text",)),
            ("BTree", ("id",)),
            ("IvfFlat", ("vector",)),
        }
        for name in indices:
            stats = table.index_stats(name)
            assert stats.num_indexed_rows == ROWS, (name, stats)
            assert stats.num_unindexed_rows == 0, (name, stats)
        got = table.search(query).limit(5).to_arrow()
        assert ids_of(got) == nearest(all_ids, query, 5)
        got = table.search(query).where("id > 30").limit(3).to_arrow()
        assert ids_of(got) == nearest([i for i in all_ids if i > 30], query, 3)
        got = table.search().where("id = 17").to_arrow()
        assert ids_of(got) == [17]

        # Update and delete, each a new version, read back by filter and by full text.
        updated = table.update(where="id IN (3, 4)", values={"text": "durian changed"})
        assert updated.rows_updated == 2
        deleted = table.delete("id >= 44")
        assert deleted.num_deleted_rows == ROWS - 44
        assert table.count_rows() == 44
        got = table.search().where("text = 'durian changed'").to_arrow()
        assert sorted(ids_of(got)) == [3, 4]
        table.optimize()  # folds the changed rows into the indices (FTS on new text included)
        got = table.search("durian", query_type="fts").limit(10).to_arrow()
        assert sorted(ids_of(got)) == [3, 4]

        if managed:
            # Every commit (create, add, three indices, update, delete, optimize's) went
            # through the service, which lists them all.
            versions = [v.version for v in connect().list_table_versions(ListTableVersionsRequest(id=path + ["items"])).versions]
            assert versions == list(range(1, table.version + 1))
            assert service_commits() - commits_before == len(versions)

        # Another connection sees the same table at the same version.
        reopened = lancedb.connect_namespace("rest", {"uri": server_url()}).open_table("items", namespace_path=path)
        assert reopened.version == table.version
        assert reopened.count_rows() == 44

        # What reached the service: in client-side mode no query at all; with pushdown the
        # filter-only and full-text queries, each answered by the service (checked above).
        if pushdown:
            assert len(filter_queries) == 1, filter_queries
            assert len(fts_queries) == 3, fts_queries
        else:
            assert query_requests(proxy.requests) == []

        db.drop_table("items", namespace_path=path)
        assert db.list_tables(namespace_path=path).tables == []
        with pytest.raises(Exception):
            db.open_table("items", namespace_path=path)
        db.drop_namespace(path)
        assert namespace not in db.list_namespaces().namespaces
    finally:
        drop_namespace_quietly(connect(), namespace)


def hybrid_text(i: int) -> str:
    """Every third row says "banana", each with its own term count and length, so that no two
    full-text scores tie (either server could rank a tie either way); the others say "apple"."""
    if i % 3 != 1:
        return f"apple number{i}"
    m = i // 3
    return " ".join(["banana"] * (1 + m % 4) + ["pad"] * (m // 4) + [f"number{i}"])


def open_directly(table_id: list):
    """The table opened straight at its location on a local root. On S3 the credentials the service
    vends reach the table's own directory only, where lancedb.connect would list its parent: there
    it is the table opened by a connection that reads and searches it itself (no pushdown)."""
    if on_s3():
        return lancedb.connect_namespace("rest", {"uri": server_url()}).open_table(table_id[-1], namespace_path=table_id[:-1])
    parent, name = connect().describe_table(DescribeTableRequest(id=table_id)).location.rstrip("/").rsplit("/", 1)
    return lancedb.connect(parent).open_table(name.removesuffix(".lance"))


@in_every_mode
def test_hybrid_search(proxy, mode, managed):
    db, namespace, pushdown = connect_in(proxy, mode, "ldb_hybrid")
    path = [namespace]
    try:
        db.create_namespace(path, properties={"managed_versioning": "true"} if managed else {})
        table = db.create_table("docs", make_rows(0, 40, hybrid_text), namespace_path=path)
        table.add(make_rows(40, ROWS - 40, hybrid_text))
        table.create_index("text", config=FTS())
        direct = open_directly(path + ["docs"])
        assert direct.version == table.version
        query = [5.2, 3.0, 1.5, 1.0]
        banana = [i for i in range(ROWS) if i % 3 == 1]
        searches = {
            "plain": lambda t: t.search(query_type="hybrid").vector(query).text("banana").limit(10),
            "filtered": lambda t: t.search(query_type="hybrid").vector(query).text("banana").where("id >= 20").limit(8),
            "post-filtered": lambda t: t.search(query_type="hybrid").vector(query).text("banana").where("id % 2 = 0", prefilter=False).limit(8),
            # None of the nearest vectors passes this filter: the full-text half's rows alone,
            # those of its top 8 that pass (filtered first, a third row would pass).
            "post-filtered, text only": lambda t: t.search(query_type="hybrid")
            .vector(query)
            .text("banana")
            .where("id % 2 = 0 AND id > 30", prefilter=False)
            .limit(8),
            "full text post-filtered": lambda t: t.search("banana", query_type="fts").where("id % 2 = 0 AND id > 30", prefilter=False).limit(8),
            "projected": lambda t: t.search(query_type="hybrid").vector(query).text("banana").select(["id", "text"]).with_row_id(True).limit(6),
            "paged": lambda t: t.search(query_type="hybrid").vector(query).text("banana").limit(5).offset(3),
        }
        mark = proxy.mark()
        results = {name: search(table).to_arrow() for name, search in searches.items()}
        sent = query_requests(proxy.since(mark))
        for name, search in searches.items():
            expected = search(direct).to_arrow()
            assert results[name].column_names == expected.column_names, name
            assert results[name].to_pylist() == expected.to_pylist(), name
            assert ("_relevance_score" in expected.column_names) is (name != "full text post-filtered"), name
        # Both kinds of match: the nearest vectors (not all banana rows) and banana rows far from them.
        plain = ids_of(results["plain"])
        assert set(nearest(list(range(ROWS)), query, 3)) <= set(plain)
        assert any(i not in banana for i in plain)
        assert any(i in banana and i not in nearest(list(range(ROWS)), query, 10) for i in plain)
        assert ids_of(results["filtered"]) and min(ids_of(results["filtered"])) >= 20
        assert ids_of(results["post-filtered, text only"]) == ids_of(results["full text post-filtered"]) == [34, 46]
        # What reached the service: with pushdown the full-text half of each hybrid search (the
        # vector half runs in the client, as its vector searches do); client-side nothing.
        if pushdown:
            assert len(sent) == len(searches), sent
        else:
            assert sent == []
    finally:
        drop_namespace_quietly(connect(), namespace)


def test_create_existing_table_raises_and_exist_ok_opens():
    db = lancedb.connect_namespace("rest", {"uri": server_url()})
    namespace = unique("ldb_exists")
    try:
        db.create_namespace([namespace])
        db.create_table("t", make_rows(0, 3), namespace_path=[namespace])
        with pytest.raises(Exception) as info:
            db.create_table("t", make_rows(10, 3), namespace_path=[namespace])
        assert "exist" in str(info.value).lower()
        again = db.create_table("t", make_rows(10, 3), namespace_path=[namespace], exist_ok=True)
        assert again.count_rows() == 3
        overwritten = db.create_table("t", make_rows(10, 2), namespace_path=[namespace], mode="overwrite")
        assert sorted(ids_of(overwritten.to_arrow())) == [10, 11]
    finally:
        drop_namespace_quietly(connect(), namespace)


def test_managed_branch_commits_through_the_service():
    """On a table with managed versioning, LanceDB's branches().create and its writes on the branch
    (the handle it returns, and the table opened with branch=) commit through the service; main
    does not move."""
    db = lancedb.connect_namespace("rest", {"uri": server_url()})
    namespace = unique("ldb_branch")
    path = [namespace]
    try:
        db.create_namespace(path, properties={"managed_versioning": "true"})
        table = db.create_table("t", make_rows(0, 3), namespace_path=path)
        table.add(make_rows(3, 2))
        commits_before = service_commits()
        dev = table.branches.create("dev")
        assert dev.version == 2
        dev.add(make_rows(10, 2))
        opened = db.open_table("t", namespace_path=path, branch="dev")
        assert (opened.version, opened.count_rows()) == (3, 7)
        opened.add(make_rows(20, 1))
        # The branch's first manifest and both adds went through the service.
        assert service_commits() - commits_before == 3
        main = db.open_table("t", namespace_path=path)
        assert (main.version, main.count_rows()) == (2, 5)
        versions = connect().list_table_versions(ListTableVersionsRequest(id=[namespace, "t"], branch="dev")).versions
        assert [v.version for v in versions] == [2, 3, 4]
    finally:
        drop_namespace_quietly(connect(), namespace)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="LanceDB 0.40 pushes a phrase (or boolean) full-text query down as a string_query holding the Rust "
    "Debug text of the query ('Phrase(PhraseQuery { column: ..., terms: ... })'), which any server can only "
    "search as plain words",
)
def test_phrase_query_pushed_down(proxy):
    from lancedb.query import PhraseQuery

    db = lancedb.connect_namespace("rest", {"uri": proxy.url}, namespace_client_pushdown_operations=MODES["pushdown"])
    namespace = unique("ldb_phrase")
    try:
        db.create_namespace([namespace])
        table = db.create_table("t", make_rows(0, 12), namespace_path=[namespace])
        table.create_index("text", config=FTS(with_position=True))
        local = lancedb.connect_namespace("rest", {"uri": server_url()}).open_table("t", namespace_path=[namespace])
        phrase = PhraseQuery("apple number3", "text")
        assert ids_of(local.search(phrase, query_type="fts").limit(12).to_arrow()) == [3]
        mark = proxy.mark()
        pushed = ids_of(table.search(phrase, query_type="fts").limit(12).to_arrow())
        if len(query_requests(proxy.since(mark))) != 1:
            pytest.fail("the phrase query was not pushed down")
        assert sorted(pushed) == [3]
    finally:
        drop_namespace_quietly(connect(), namespace)
