"""pylance on an S3 root with nothing but the service URL and a bearer token.

Run by test/realclient/vended-credentials.test.ts, which starts the service on radosgw with
credential vending (STS AssumeRole with a session policy per table), issues the tokens, and
runs this file with no AWS keys in the environment. Environment:
  LANCE_NS_URL    the service
  WRITER_TOKEN    a principal that may write namespaces `vend` and `vendm` (managed versioning)
  READER_TOKEN    a principal that may only read them
  SIBLING_URI     the location of table vend$sibling, which the writer's credentials for
                  vend$t must not reach
"""

import os
import uuid

import lance
import lance_namespace
import pyarrow as pa
import pytest
from lance_namespace import DescribeTableRequest

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def connect(token_var: str):
    return lance_namespace.connect(
        "rest", {"uri": os.environ["LANCE_NS_URL"], "header.Authorization": f"Bearer {os.environ[token_var]}"}
    )


def described(ns, table_id):
    return ns.describe_table(DescribeTableRequest(id=table_id)).storage_options or {}


@pytest.fixture(autouse=True)
def no_aws_keys():
    leaked = [k for k in os.environ if k.startswith("AWS_")]
    assert leaked == [], f"the client must have no AWS settings: {leaked}"


def test_writer_creates_appends_and_reads_with_vended_credentials_only():
    ns = connect("WRITER_TOKEN")
    table_id = ["vend", f"t{uuid.uuid4().hex[:8]}"]
    ds = lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    assert ds.count_rows() == 3
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    ds = lance.dataset(namespace_client=ns, table_id=table_id)
    assert ds.count_rows() == 6
    assert ds.version == 2

    options = described(ns, table_id)
    for key in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token", "expires_at_millis", "aws_endpoint", "aws_region"):
        assert key in options, key
    assert options["aws_access_key_id"] != "TESTERACCESSKEY", "the service's own key must never be handed out"
    assert options["allow_http"] == "true"

    # The credentials open this table and no other (vended-credentials.test.ts tries the rest).
    assert lance.dataset(ds.uri, storage_options=options).count_rows() == 6
    with pytest.raises(Exception):
        lance.dataset(os.environ["SIBLING_URI"], storage_options=options).count_rows()


def test_reader_reads_but_cannot_write():
    writer = connect("WRITER_TOKEN")
    reader = connect("READER_TOKEN")
    table_id = ["vend", f"r{uuid.uuid4().hex[:8]}"]
    lance.write_dataset(DATA, namespace_client=writer, table_id=table_id, mode="create")

    assert lance.dataset(namespace_client=reader, table_id=table_id).count_rows() == 3
    with pytest.raises(Exception):
        lance.write_dataset(DATA, namespace_client=reader, table_id=table_id, mode="append")
    # Nothing the reader tried reached the table.
    ds = lance.dataset(namespace_client=writer, table_id=table_id)
    assert ds.count_rows() == 3
    assert ds.version == 1


def test_managed_table_commits_through_the_service_with_vended_credentials():
    ns = connect("WRITER_TOKEN")
    table_id = ["vendm", f"m{uuid.uuid4().hex[:8]}"]
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="create")
    lance.write_dataset(DATA, namespace_client=ns, table_id=table_id, mode="append")
    ds = lance.dataset(namespace_client=ns, table_id=table_id)
    assert ds.count_rows() == 6
    assert ds.version == 2
    assert ns.describe_table(DescribeTableRequest(id=table_id)).managed_versioning is True
