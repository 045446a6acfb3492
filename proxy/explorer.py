"""The history explorer's JSON API (`/api/...`), read-only.

Each endpoint runs TS.* verbs (and SCAN / TYPE) through the dispatcher, on the
request's session (logged in as the HTTP credentials say, RESP3): the same code, the
same replies, the same ACL checks and errors as a RESP client gets, and nothing that
writes (the verbs run are listed in `READ_ONLY`). Replies are rendered as JSON by
`proxy.jsonstream`, in bounded chunks with the event loop let in between.

Query parameters are raw bytes, percent-encoded (keys need not be UTF-8). Points
(`at`, `a`, `b`): `now`, `version:N`, `time:MS`, `snapshot:NAME`, `branch:NAME`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import unquote_to_bytes

from aiohttp import web

from commands.dispatch import DISPATCHER
from commands.replies import Deferred, ErrorReply, Reply
from commands.session import Session
from proxy.jsonstream import stream_json

# What the explorer may run: reads only (the checkout changes this request's own
# session, which ends with the request).
READ_ONLY = frozenset(
    {
        b"select",
        b"scan",
        b"type",
        b"ts.version",
        b"ts.snapshots",
        b"ts.branch",
        b"ts.checkout",
        b"ts.history",
        b"ts.asof",
        b"ts.diff",
    }
)
MAX_COUNT = 1000
# The request's session, logged in by proxy.web's middleware.
SESSION = web.RequestKey("session", Session)
POINT_KINDS = {b"version", b"time", b"snapshot", b"branch"}


class ApiError(Exception):
    """An error reply of a verb, or a bad parameter: answered as JSON with `status`."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def run(s: Session, *argv: bytes) -> Reply:
    """One command on the request's session; its reply (awaited if it comes later)."""
    name = argv[0].lower()
    assert name in READ_ONLY and (name != b"ts.branch" or argv[1].lower() == b"list")
    reply = DISPATCHER.execute(s, list(argv))
    if isinstance(reply, Deferred):
        done: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        reply.start(lambda r: None if done.done() else done.set_result(r))
        reply = await done
    if isinstance(reply, ErrorReply):
        text = bytes(reply).decode("utf-8", "replace")
        raise ApiError(text, 403 if text.startswith(("NOPERM", "NOAUTH")) else 400)
    return reply


def params(request: web.Request) -> dict[str, bytes]:
    """The query string's parameters as raw bytes (the last of a repeated name)."""
    out: dict[str, bytes] = {}
    for part in request.rel_url.raw_query_string.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        out[name] = unquote_to_bytes(value.replace("+", " "))
    return out


def _int(p: dict[str, bytes], name: str, default: int, lo: int = 0, hi: int = 2**63) -> int:
    raw = p.get(name)
    if raw is None or raw == b"":
        return default
    try:
        n = int(raw)
    except ValueError:
        raise ApiError(f"{name} must be an integer") from None
    if not lo <= n <= hi:
        raise ApiError(f"{name} must be between {lo} and {hi}")
    return n


async def point(s: Session, raw: bytes | None) -> list[bytes]:
    """A point parameter as the verbs' arguments (`now`: the current version)."""
    if raw is None or raw in (b"", b"now"):
        return [b"VERSION", str(await run(s, b"TS.VERSION")).encode()]
    kind, sep, arg = raw.partition(b":")
    if not sep or kind.lower() not in POINT_KINDS:
        raise ApiError("a point is now, version:N, time:MS, snapshot:NAME or branch:NAME")
    return [kind.upper(), arg]


async def _scope(s: Session, p: dict[str, bytes]) -> None:
    """Select the database, and check the session out at `at` or on `branch`."""
    dbi = _int(p, "db", 0)
    if dbi != s.dbi:  # (a user without SELECT can still explore database 0)
        await run(s, b"SELECT", str(dbi).encode())
    branch = p.get("branch")
    at = p.get("at")
    if at is not None and at.startswith(b"branch:"):
        branch, at = at[len(b"branch:") :], None
    if branch:
        await run(s, b"TS.CHECKOUT", branch)
    if at and at != b"now":
        await run(s, b"TS.CHECKOUT", b"AT", *await point(s, at))


def _key(p: dict[str, bytes]) -> bytes:
    key = p.get("key")
    if key is None:
        raise ApiError("key is required")
    return key


async def _reply(request: web.Request, body: Any) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "application/json", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    await stream_json(response, body)
    await response.write_eof()
    return response


def api(fn: Any) -> Any:
    """An endpoint: its session from the middleware, its errors as JSON."""

    async def handler(request: web.Request) -> web.StreamResponse:
        s = request[SESSION]
        try:
            body = await fn(s, params(request))
        except ApiError as e:
            return web.Response(
                status=e.status,
                text=json.dumps({"error": str(e)}),
                content_type="application/json",
            )
        return await _reply(request, body)

    return handler


async def overview(s: Session, p: dict[str, bytes]) -> Any:
    """The current version, the snapshots and the branches."""
    return {
        "version": await run(s, b"TS.VERSION"),
        "user": s.user,
        "snapshots": _objects(await run(s, b"TS.SNAPSHOTS")),
        "branches": _objects(await run(s, b"TS.BRANCH", b"LIST")),
    }


async def keys(s: Session, p: dict[str, bytes]) -> Any:
    """One SCAN page of the keys matching `pattern` (at a point, or on a branch), each
    with its type there."""
    await _scope(s, p)
    count = str(_int(p, "count", 100, 1, MAX_COUNT)).encode()
    argv = [b"SCAN", p.get("cursor") or b"0", b"COUNT", count]
    pattern = p.get("pattern")
    if pattern:
        argv += [b"MATCH", pattern]
    cursor, found = await run(s, *argv)
    typed = [[k, await run(s, b"TYPE", k)] for k in sorted(found)]
    return {"cursor": cursor, "keys": typed}


async def history(s: Session, p: dict[str, bytes]) -> Any:
    """The key's newest `count` versions (TS.HISTORY REV), newest first."""
    key = _key(p)
    await _scope(s, p)
    count = str(_int(p, "count", 200, 1, MAX_COUNT)).encode()
    argv = [b"TS.HISTORY", key, b"REV", b"COUNT", count]
    if p.get("before"):
        argv += [b"TO", b"VERSION", str(_int(p, "before", 0) - 1).encode()]
    return {"key": key, "versions": _objects(await run(s, *argv))}


async def value(s: Session, p: dict[str, bytes]) -> Any:
    """The key's value at `version` (TS.ASOF), with its type."""
    key = _key(p)
    scope = {k: v for k, v in p.items() if k != "at"}
    at = b"version:" + p["version"] if p.get("version") else p.get("at")
    if at is not None and at.lower().startswith(b"branch:"):  # a branch's head
        scope["branch"], at = at[len(b"branch:") :], None
    await _scope(s, scope)
    where = await point(s, at)
    found = await run(s, b"TS.ASOF", key, *where)
    return {"key": key, "at": b" ".join(where), "type": type_of(found), "value": found}


async def diff(s: Session, p: dict[str, bytes]) -> Any:
    """The keys that differ between points `a` and `b` (TS.DIFF), a page at a time."""
    await _scope(s, {"db": p.get("db", b"0")})
    count = str(_int(p, "count", 200, 1, MAX_COUNT)).encode()
    argv = [b"TS.DIFF", *await point(s, p.get("a")), *await point(s, p.get("b")), b"COUNT", count]
    if p.get("match"):
        argv += [b"MATCH", p["match"]]
    if p.get("after"):
        argv += [b"AFTER", p["after"]]
    changes = await run(s, *argv)
    return {"a": b" ".join(argv[1:3]), "b": b" ".join(argv[3:5]), "changes": list(changes.items())}


def _objects(entries: list[dict[bytes, Reply]]) -> list[dict[str, Reply]]:
    """A verb's list of RESP3 maps with named fields, as JSON objects."""
    return [{k.decode(): v for k, v in e.items()} for e in entries]


def type_of(reply: Reply) -> str | None:
    """The type of a value in its read shape (TS.ASOF's RESP3 reply)."""
    if reply is None:
        return None
    if isinstance(reply, bytes):
        return "string"
    if isinstance(reply, dict):
        return "hash"
    if isinstance(reply, set):
        return "set"
    if not reply:
        return "stream"  # of the types, only a stream can be empty
    first = reply[0]
    if isinstance(first, list | tuple) and len(first) == 2:
        return "zset" if isinstance(first[1], float) else "stream"
    return "list"


API_ROUTES = {
    "/api/overview": api(overview),
    "/api/keys": api(keys),
    "/api/history": api(history),
    "/api/value": api(value),
    "/api/diff": api(diff),
}
