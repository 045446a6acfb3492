"""A storage directory written by an older release still loads, and answers as it did.

`tests/data/checkpoint-5f12840/` was written by the server at commit 5f12840 (the last
release before history was frozen into compressed pages in memory, issue 29) with
`tools/old_image.py`: the `workload` below, a checkpoint (BGSAVE), then kill -9. Beside
it, `replies.json` holds what that server answered to `queries` when restarted on a copy
of the directory. The current server, started on another copy, must load it and
answer every query byte for byte as the old one did: values, expiries, history (times,
commands, metadata), as-of reads by version, snapshot and BACK, a table with its own
retention, a sealed snapshot and a branch.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import redis

from tests.conftest import start_temporalstore

IMAGE = Path(__file__).resolve().parent / "data" / "checkpoint-5f12840"
FAR = "99999999999999"  # an expiry far in the future (absolute ms): the same on every run


def workload(r: Any) -> None:
    """What the old server was given (kept here, beside the queries, as the image's
    recipe)."""
    r.execute_command("TS.TABLE", "CREATE", "app:audit", "RETAIN", "VERSIONS", "3")
    r.execute_command("TS.META", "AUTHOR", "agent-7", "MESSAGE", "first pass")
    for i in range(12):
        r.set("plan", f"draft {i}" * (1 + i % 3))
        r.incr("counter")
        r.hset("profile", f"f{i % 4}", i)
        r.rpush("timeline", f"call {i}")
        r.zadd("scores", {f"m{i % 5}": i})
        r.sadd("tags", f"t{i % 6}")
        r.set("app:audit:last", i)
        if i == 5:
            r.execute_command("TS.SEAL", "halfway", "TRIGGER", "test")
    r.execute_command("TS.META", "RESET")
    r.set("once", "written once")
    r.set("expiring", "value", pxat=int(FAR))
    r.xadd("events", {"kind": "start"}, id="1-1")
    r.xadd("events", {"kind": "stop"}, id="2-1")
    r.set("gone", "soon")
    r.delete("gone")
    r.execute_command("TS.BRANCH", "CREATE", "what-if")
    with _on_branch(r) as b:
        b.set("plan", "branch plan")


def _on_branch(r: Any) -> Any:
    """A connection of its own (not the pool's: it stays checked out) on `what-if`."""
    kw = r.connection_pool.connection_kwargs
    b = redis.Redis(port=kw["port"], socket_timeout=30, single_connection_client=True)
    b.execute_command("TS.CHECKOUT", "what-if")
    return b


def jsonable(x: Any, unordered: bool = False) -> Any:
    """A reply as JSON: bytes as {"b": latin-1 text}, lists and dicts recursively;
    `unordered` (a set's replies: members come in hash order, which differs between
    processes): lists of strings sorted."""
    if isinstance(x, bytes):
        return {"b": x.decode("latin-1")}
    if isinstance(x, list | tuple):
        if unordered and x and all(isinstance(v, bytes) for v in x):
            x = sorted(x)
        return [jsonable(v, unordered) for v in x]
    if isinstance(x, dict):
        return [[jsonable(k), jsonable(v, unordered)] for k, v in sorted(x.items())]
    if isinstance(x, set):
        return [jsonable(v) for v in sorted(x)]
    return x


def queries(r: Any) -> list[Any]:
    """What is asked of both servers, once loaded; each reply (or error text) in order."""
    deadline = time.monotonic() + 30
    while r.info("persistence")["loading"]:
        assert time.monotonic() < deadline, "still loading"
        time.sleep(0.05)
    asks: list[list[Any]] = [
        ["TS.VERSION"],
        ["DBSIZE"],
        ["GET", "plan"],
        ["GET", "counter"],
        ["HGETALL", "profile"],
        ["LRANGE", "timeline", 0, -1],
        ["ZRANGE", "scores", 0, -1, "WITHSCORES"],
        ["SMEMBERS", "tags"],
        ["GET", "once"],
        ["PEXPIRETIME", "expiring"],
        ["XRANGE", "events", "-", "+"],
        ["EXISTS", "gone"],
        ["GET", "app:audit:last"],
        ["TS.SNAPSHOTS"],
        ["TS.BRANCH", "LIST"],
    ]
    for key in ("plan", "counter", "profile", "timeline", "scores", "tags", "once", "gone"):
        asks.append(["TS.HISTORY", key, "WITHVALUES"])
    asks.append(["TS.HISTORY", "app:audit:last", "WITHVALUES"])
    for key in ("plan", "profile", "timeline", "scores"):
        asks.append(["TS.ASOF", key, "SNAPSHOT", "halfway"])
        asks.append(["TS.ASOF", key, "BACK", 3])
        for v in (1, 7, 20, 40, 60):
            asks.append(["TS.ASOF", key, "VERSION", v])
    asks.append(["TS.ASOF", "app:audit:last", "VERSION", 3])
    asks.append(["TS.DIFF", "SNAPSHOT", "halfway", "HEAD"])
    out: list[Any] = []
    for argv in asks:
        try:
            reply = r.execute_command(*argv)
        except redis.ResponseError as e:
            reply = {"error": str(e)}
        out.append([jsonable(argv), jsonable(reply, "tags" in argv)])
    with _on_branch(r) as b:
        for argv in (["GET", "plan"], ["TS.HISTORY", "plan", "WITHVALUES"]):
            out.append([jsonable(argv), jsonable(b.execute_command(*argv))])
    return out


def test_a_checkpoint_of_the_older_release_loads_and_answers_the_same(tmp_path: Path) -> None:
    shutil.copytree(IMAGE / "data", tmp_path / "data")
    expected = json.loads((IMAGE / "replies.json").read_text())
    p = start_temporalstore(workdir=tmp_path)
    r = redis.Redis(port=p.port, socket_timeout=30)
    try:
        got = json.loads(json.dumps(queries(r)))
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g == e, g[0]
    finally:
        r.close()
        p.stop()
