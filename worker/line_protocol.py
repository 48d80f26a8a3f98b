"""The line protocol the service's Python workers speak (udf_worker.py, index_worker.py).

One JSON object per line (UTF-8) on stdin, one JSON object per line on stdout, one request at a
time, each answered by exactly one line carrying the request's `id`. Nothing else is ever written to
stdout: whatever a library prints, from Python or native code, goes to stderr, which the service
logs. The Node side is src/engine/python-worker/.

    {"id": <int>, "op": "<name>", ...}   -> {"id": <int>, "ok": true, ...}
    {"id": <int>, "op": "shutdown"}      -> {"id": <int>, "ok": true}, then the process exits
                                            (end of input does the same silently)

A failure is {"id": ..., "ok": false, "kind": K, "message": "...", "what": "..." (optional),
"traceback": "..." (optional)}, K as the worker documents its kinds; a handler raises an exception
with `kind` (and optionally `what` and `traceback`) attributes for one. A request that is not JSON,
or lacks an `id`, is answered with id null and kind "invalid_input"; any other exception is kind
"internal" with its traceback.
"""

import json
import os
import sys
import traceback


def take_stdio():
    """
    Keeps the process's real stdin and stdout for the protocol and returns them as (requests,
    respond); fd 0 and 1 become /dev/null and stderr, so that nothing a library (or a UDF) reads
    or prints can touch a protocol line. Called before anything else is imported.
    """
    requests = os.fdopen(os.dup(0), "rb")
    responses = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")
    sys.stdout = sys.stderr

    def respond(body):
        responses.write(json.dumps(body) + "\n")
        responses.flush()

    return requests, respond


class ProtocolFailure(Exception):
    """A request the protocol itself refuses (kind invalid_input)."""

    kind = "invalid_input"
    what = None
    traceback = None


def field(request, name, kind):
    """The request's `name`, which must be a `kind`; invalid_input otherwise."""
    value = request.get(name)
    if not isinstance(value, kind):
        raise ProtocolFailure(f"{name} must be a {kind.__name__}")
    return value


def serve(requests, respond, handlers):
    """Answers each request line with its handler's result (a dict merged into the answer) until shutdown or end of input."""
    for line in requests:
        request_id = None
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or "id" not in request:
                raise ProtocolFailure("a request is a JSON object with an id")
            request_id = request["id"]
            op = request.get("op")
            if op == "shutdown":
                respond({"id": request_id, "ok": True})
                return
            handler = handlers.get(op)
            if handler is None:
                raise ProtocolFailure(f"unknown op {op!r}")
            respond({"id": request_id, "ok": True, **handler(request)})
        except json.JSONDecodeError as e:
            respond({"id": None, "ok": False, "kind": "invalid_input", "message": f"not JSON: {e}"})
        except Exception as e:  # noqa: BLE001
            kind = getattr(e, "kind", None)
            if not isinstance(kind, str):
                respond({"id": request_id, "ok": False, "kind": "internal", "message": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
                continue
            body = {"id": request_id, "ok": False, "kind": kind, "message": str(e)}
            if getattr(e, "what", None):
                body["what"] = e.what
            if getattr(e, "traceback", None):
                body["traceback"] = e.traceback
            respond(body)
