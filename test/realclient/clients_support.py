"""What the Python real-client tests share: the service's address, names, the namespace client,
cleanup, and a recording proxy that shows which requests a client actually sent.

test/realclient/python-clients.test.ts starts the service on a local root and on radosgw and runs
each pytest file with:
  LANCE_NS_URL    the service
  LANCE_NS_ROOT   its catalog root (a directory, or s3://bucket/prefix)
On radosgw the service vends credentials (STS) and the client's environment has no AWS settings:
whatever the clients read or write there, they do with what the service handed them.
"""

import http.client
import http.server
import os
import re
import threading
import uuid
from urllib.parse import urlsplit

import lance_namespace
import pytest
from lance_namespace import DropNamespaceRequest, DropTableRequest, ListNamespacesRequest, ListTablesRequest


def server_url() -> str:
    url = os.environ.get("LANCE_NS_URL")
    if not url:
        pytest.fail("LANCE_NS_URL is not set: run this file through test/realclient/python-clients.test.ts")
    return url


def on_s3() -> bool:
    """Whether the service's root is on S3 (else a local directory)."""
    return os.environ.get("LANCE_NS_ROOT", "").startswith("s3://")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def connect(url: str = None):
    """pylance's REST namespace client (lance's Rust RestNamespace)."""
    return lance_namespace.connect("rest", {"uri": url or server_url()})


@pytest.fixture
def ns():
    return connect()


def drop_namespace_quietly(ns, name) -> None:
    """Best-effort cleanup of a namespace (a name, or a path) with its child namespaces and tables,
    so that a failed test leaves nothing behind for later asserts to trip on."""
    path = [name] if isinstance(name, str) else list(name)
    try:
        for child in ns.list_namespaces(ListNamespacesRequest(id=path)).namespaces or []:
            drop_namespace_quietly(ns, path + [child])
        for table in ns.list_tables(ListTablesRequest(id=path)).tables or []:
            ns.drop_table(DropTableRequest(id=path + [table]))
        ns.drop_namespace(DropNamespaceRequest(id=path))
    except Exception:
        pass


def local_dir(location: str):
    """The table directory on local disk, or None when the table is not on the local file system."""
    if location.startswith("file://"):
        return location[len("file://"):]
    if "://" in location:
        return None
    return location


def service_commits() -> int:
    """How many versions the service has committed, on every path (its lance_ns_commits_total
    metric, outcome committed). Taken before and after a client's writes to a managed table, the
    difference proves they all went through the service: a version leaves no other trace of it
    (a Lance client's commit on a local disk has no sidecar)."""
    target = urlsplit(server_url())
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    pattern = re.compile(r'^lance_ns_commits_total\{path="[a-z]+",outcome="committed"\} (\d+)$', re.M)
    return sum(int(m.group(1)) for m in pattern.finditer(text))


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".lower()


class RecordingProxy:
    """A loopback HTTP/1.1 proxy in front of the service that records each request's method and
    path, so a test can tell what a client sent (for instance, whether a query was pushed down
    to the service or executed by the client itself). Bodies pass through unchanged."""

    def __init__(self, upstream: str):
        target = urlsplit(upstream)
        self.requests = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def _forward(self):
                body = self._body()
                with proxy._lock:
                    proxy.requests.append((self.command, self.path))
                hop = ("transfer-encoding", "connection", "keep-alive", "host", "content-length")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in hop}
                headers["Content-Length"] = str(len(body))
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                try:
                    upstream_conn.request(self.command, self.path, body=body, headers=headers)
                    response = upstream_conn.getresponse()
                    payload = response.read()
                    self.send_response(response.status)
                    for k, v in response.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive", "date"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                finally:
                    upstream_conn.close()

            do_GET = _forward
            do_POST = _forward
            do_DELETE = _forward
            do_PUT = _forward

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def mark(self) -> int:
        """A position in the record, for since()."""
        with self._lock:
            return len(self.requests)

    def since(self, mark: int) -> list:
        with self._lock:
            return list(self.requests[mark:])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
