"""TS.TABLE: per-table durability and retention, with real processes."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import start_temporalstore


def as_map(reply: Any) -> dict[Any, Any]:
    """A map reply whichever protocol redis-py speaks (RESP3 dict or RESP2 pairs)."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2], strict=True))


def test_table_lifecycle_and_errors(tmp_path: Path) -> None:
    p = start_temporalstore(["--storage", f"file://{tmp_path}/s"])
    r = redis.Redis(port=p.port, decode_responses=True)
    try:
        assert r.execute_command(
            "TS.TABLE",
            "CREATE",
            "app:sessions",
            "DURABILITY",
            "SYNC",
            "RETAIN",
            "VERSIONS",
            "3",
            "SNAPSHOT-EVERY",
            "8",
        )
        with pytest.raises(redis.ResponseError, match="already exists"):
            r.execute_command("TS.TABLE", "CREATE", "app:sessions")
        for bad in ("app", "a:b:c", ":x", "x:"):
            with pytest.raises(redis.ResponseError, match="<namespace>:<table>"):
                r.execute_command("TS.TABLE", "CREATE", bad)
        for args in (
            ("DURABILITY", "MAYBE"),
            ("RETAIN", "VERSIONS", "0"),
            ("RETAIN",),
            ("SNAPSHOT-EVERY", "x"),
            ("BOGUS", "1"),
        ):
            with pytest.raises(redis.ResponseError):
                r.execute_command("TS.TABLE", "CREATE", "app:other", *args)
        r.set("app:sessions:1", "a")
        r.set("app:sessions:2", "b")
        r.set("app:sessionsX", "not in the table")
        info = r.execute_command("TS.TABLE", "INFO", "app:sessions")
        info = as_map(info)
        assert info["durability"] == "sync" and info["retain"] == "versions:3"
        assert info["snapshot-every"] == 8 and info["keys"] == 2
        assert info["versions_in_memory"] == 2 and info["durable_lsn"] >= 1
        assert r.execute_command("TS.TABLE", "ALTER", "app:sessions", "DURABILITY", "ASYNC")
        listed = [as_map(x) for x in r.execute_command("TS.TABLE", "LIST")]
        assert [x["name"] for x in listed] == ["app:sessions"]
        assert listed[0]["durability"] == "async"
        with pytest.raises(redis.ResponseError, match="no such table"):
            r.execute_command("TS.TABLE", "INFO", "app:nope")
        assert r.execute_command("TS.TABLE", "DROP", "app:sessions")
        assert r.execute_command("TS.TABLE", "LIST") == []
        assert r.get("app:sessions:1") == "a"
    finally:
        r.close()
        p.stop()


def test_retention_is_per_table(tmp_path: Path) -> None:
    p = start_temporalstore(
        ["--storage", f"file://{tmp_path}/s", "--history", "all", "--keep-checkpoints", "1"]
    )
    r = redis.Redis(port=p.port, decode_responses=True)
    try:
        r.execute_command("TS.TABLE", "CREATE", "t:short", "RETAIN", "VERSIONS", "2")
        first_short = first_long = 0
        for i in range(10):
            r.set("t:short:k", i)
            r.set("other", i)
            if i == 0:
                first_short = first_long = r.execute_command("TS.VERSION")
        assert r.execute_command("TS.ASOF", "other", "VERSION", first_long) == "0"
        assert r.execute_command("SAVE")  # compact: storage keeps only the checkpoint now
        assert r.execute_command("TS.ASOF", "other", "VERSION", first_long) == "0"
        with pytest.raises(redis.ResponseError, match=r"PRUNED version \d+ of t:short:k"):
            r.execute_command("TS.ASOF", "t:short:k", "VERSION", first_short)
    finally:
        r.close()
        p.stop()


def test_sync_table_waits_for_storage_while_async_keys_do_not(tmp_path: Path) -> None:
    p = start_temporalstore(["--storage", f"file://{tmp_path}/s", "--fault-injection", "yes"])
    r = redis.Redis(port=p.port, decode_responses=True)
    r.execute_command("TS.TABLE", "CREATE", "bank:ledger", "DURABILITY", "SYNC")
    r.set("bank:ledger:warmup", "1")  # durable
    r.execute_command("TS.FAULT", "OUTAGE", "ON")
    done = threading.Event()

    def sync_write() -> None:
        w = redis.Redis(port=p.port)
        w.set("bank:ledger:1", "100")
        done.set()
        w.close()

    t = threading.Thread(target=sync_write)
    t.start()
    try:
        assert r.set("cache:x", "1")  # an async key is acknowledged during the outage
        assert r.get("cache:x") == "1"
        assert not done.wait(1.0), "a sync-table write was acknowledged while storage was down"
        r.execute_command("TS.FAULT", "OUTAGE", "OFF")
        assert done.wait(20), "the sync-table write never completed after the outage"
    finally:
        t.join(30)
        r.close()
        p.stop()


def test_tables_survive_restart(tmp_path: Path) -> None:
    storage = ["--storage", f"file://{tmp_path}/s"]
    p = start_temporalstore(storage)
    r = redis.Redis(port=p.port, decode_responses=True)
    r.execute_command("TS.TABLE", "CREATE", "a:b", "RETAIN", "MS", "60000")
    r.execute_command("TS.TABLE", "CREATE", "c:d", "DURABILITY", "SYNC")
    r.execute_command("TS.WAITDURABLE", "0")
    r.close()
    p.proc.send_signal(signal.SIGKILL)
    p.proc.wait(10)
    p.stop()
    for graceful in (False, True):
        q = start_temporalstore(storage)
        r = redis.Redis(port=q.port, decode_responses=True)
        listed = {m["name"]: m for m in (as_map(x) for x in r.execute_command("TS.TABLE", "LIST"))}
        assert set(listed) == {"a:b", "c:d"}
        assert listed["a:b"]["retain"] == "ms:60000" and listed["c:d"]["durability"] == "sync"
        r.close()
        if graceful:
            q.stop()
        else:
            q.proc.send_signal(signal.SIGTERM)
            assert q.proc.wait(30) == 0
            q.stop()
