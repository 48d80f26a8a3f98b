"""Writes Geneva UDF envelopes for the UDF worker's tests, as Geneva's add_columns packages them.

Usage: python geneva_udfs.py <output dir>
Writes each envelope (DockerUDFPackager().marshal(udf).udf_payload: the DockerUDFSpecV1 JSON with
the cloudpickled UDF; for a chunker or a UDTF, its ChunkerSpec / UDTFSpec JSON as a view's create sends it) to
<output dir>/<sha256> and prints {"<name>": "<sha256>", ...} on stdout.
"""

import hashlib
import json
import os
import sys
from typing import Iterator, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from geneva import udf
from geneva.packager import DockerUDFPackager, marshal_chunker, marshal_udtf
from geneva.transformer import chunker, udtf


@udf(data_type=pa.int64())
def double(a: int) -> int:
    return a * 2


@udf(data_type=pa.int64(), input_columns=["a", "b"])
def plus(a: pa.Array, b: pa.Array) -> pa.Array:
    return pc.add(a, b)


@udf(data_type=pa.string())
def describe_row(batch: pa.RecordBatch) -> pa.Array:
    # Sees the whole row but the column it fills (and `_rowaddr`, as in Geneva's applier).
    names = ",".join(n for n in batch.schema.names if n != "_rowaddr")
    return pa.array([f"{names}:{a}" for a in batch.column("a").to_pylist()])


@udf(data_type=pa.int64())
def raises(a: int) -> int:
    if a == 7:
        raise ValueError(f"cannot compute row a={a}")
    return a


@udf(data_type=pa.int64())
def chatty(a: int) -> int:
    # Printing must not corrupt the worker's protocol; nor must reading stdin.
    print(f"chatty sees {a}")
    sys.stdin.read()
    os.write(1, b"written straight to fd 1\n")
    return a + 1


@udf(data_type=pa.int64())
def wrong_type(a: int) -> int:
    return f"not a number {a}"


@udf(data_type=pa.int64())
def too_short(a: pa.Array) -> pa.Array:
    return a.slice(1)


@udf(data_type=pa.int64())
def sleeps(a: int) -> int:
    import time

    # The test waits for this line in the log, then kills the worker (or lets the fill time out).
    print(f"sleeps started in {os.getpid()}", flush=True)
    time.sleep(3600)
    return a


class Piece(NamedTuple):
    label: str
    k: int


@chunker
def pieces(a: int) -> Iterator[Piece]:
    # a % 3 view rows for row a: none, one or two.
    for k in range(a % 3):
        yield Piece(label=f"{a}.{k}", k=k)


@chunker
def pieces_raise(a: int) -> Iterator[Piece]:
    if a == 7:
        raise ValueError(f"cannot chunk row a={a}")
    yield Piece(label=str(a), k=0)


CHUNKERS = {"pieces": pieces, "pieces_raise": pieces_raise}

DECADES = pa.schema([pa.field("decade", pa.int64()), pa.field("n", pa.int64()), pa.field("total", pa.int64())])


def decade_sums(source):
    # One row per decade of `a` among the rows it is given: how many, and their sum.
    groups = {}
    for a in source.to_arrow()["a"].to_pylist():
        groups.setdefault(a // 10, []).append(a)
    keys = sorted(groups)
    yield pa.RecordBatch.from_pydict({"decade": keys, "n": [len(groups[k]) for k in keys], "total": [sum(groups[k]) for k in keys]}, schema=DECADES)


def no_decades(source):
    raise ValueError("no decades today")
    yield


UDTFS = {
    "decades": udtf(decade_sums, output_schema=DECADES, input_columns=["a"]),
    "decades_by_v": udtf(decade_sums, output_schema=DECADES, input_columns=["a"], partition_by="v"),
    "decades_by_x": udtf(decade_sums, output_schema=DECADES, input_columns=["a"], partition_by="x"),
    "decades_raise": udtf(no_decades, output_schema=DECADES, input_columns=["a"]),
}

UDFS = {"double": double, "plus": plus, "describe_row": describe_row, "raises": raises, "chatty": chatty, "wrong_type": wrong_type, "too_short": too_short, "sleeps": sleeps}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    packager = DockerUDFPackager()
    written = {}
    for name, fn in UDFS.items():
        payload = packager.marshal(fn).udf_payload
        sha = hashlib.sha256(payload).hexdigest()
        with open(os.path.join(out, sha), "wb") as f:
            f.write(payload)
        written[name] = sha
    specs = [(name, marshal_chunker(fn)) for name, fn in CHUNKERS.items()] + [(name, marshal_udtf(fn)) for name, fn in UDTFS.items()]
    for name, spec in specs:
        payload = spec.to_json().encode("utf-8")
        sha = hashlib.sha256(payload).hexdigest()
        with open(os.path.join(out, sha), "wb") as f:
            f.write(payload)
        written[name] = sha
    print(json.dumps(written))


if __name__ == "__main__":
    main()
