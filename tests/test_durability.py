"""The durable update stream, with real processes against a local directory and
against S3 (moto's server over HTTP): restarts, kill -9 in async and sync mode, an
object storage outage, corruption, and two writers on one prefix."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import ROOT, ServerProcess, make_bucket, start_temporalstore, until
from tests.helpers import read_value


@pytest.fixture(params=["file", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "file":
        return ["--storage", f"file://{tmp_path}/store"]
    endpoint = request.getfixturevalue("moto_s3")
    return ["--storage", f"s3://{make_bucket(endpoint)}/ts", "--s3-endpoint-url", endpoint]


def client(p: ServerProcess) -> redis.Redis:
    return redis.Redis(port=p.port, socket_timeout=30)


def kill9(p: ServerProcess) -> None:
    p.proc.send_signal(signal.SIGKILL)
    p.proc.wait(10)
    p.stop()


def snapshot(r: redis.Redis) -> dict[bytes, Any]:
    """Every key's type, value and whether it has a TTL."""
    out: dict[bytes, Any] = {}
    for key in sorted(r.keys("*")):
        t = r.type(key)
        v = read_value(r, key, t)
        out[key] = (t, v, r.pttl(key) > 0, r.object("encoding", key))
    return out


def fill(r: redis.Redis) -> None:
    for i in range(5):
        r.set("counter", i)
    r.set("expiring", "v", ex=1000)
    r.set("raw", "x" * 100)
    r.append("appended", "abc")
    r.hset("hash", mapping={f"f{i}": i for i in range(10)})
    r.hset("bighash", mapping={f"f{i}": "v" * 70 for i in range(3)})
    r.rpush("list", *range(20))
    r.lpop("list")
    r.sadd("intset", 1, 2, 3)
    r.sadd("set", "a", "b", "c")
    r.zadd("zset", {"a": 1.5, "b": -2, "c": float("inf")})
    r.xadd("stream", {"f": "v"}, id="1-1")
    r.xadd("stream", {"g": "w"}, id="2-0")
    r.incrbyfloat("float", "0.1")
    r.expire("hash", 5000)
    r.delete("raw")
    r.select(3)  # type: ignore[no-untyped-call]
    r.set("in-db-3", "yes")
    r.select(0)  # type: ignore[no-untyped-call]


def test_graceful_restart_keeps_every_key_and_expiry(storage: list[str]) -> None:
    p = start_temporalstore(storage)
    r = client(p)
    fill(r)
    before = snapshot(r)
    lsn = int(r.info("persistence")["last_lsn"])
    r.close()
    p.proc.send_signal(signal.SIGTERM)
    assert p.proc.wait(30) == 0
    p.stop()
    q = start_temporalstore(storage)
    r = client(q)
    try:
        assert snapshot(r) == before
        r.select(3)  # type: ignore[no-untyped-call]
        assert r.get("in-db-3") == b"yes"
        info = r.info("persistence")
        assert int(info["last_lsn"]) > lsn and int(info["writer_epoch"]) == 2
    finally:
        r.close()
        q.stop()


def test_kill9_async_keeps_everything_up_to_the_durable_lsn(storage: list[str]) -> None:
    p = start_temporalstore(storage)
    r = client(p)
    confirmed = -1
    written = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        pipe = r.pipeline(transaction=False)
        for _ in range(50):
            pipe.set(f"k:{written}", written)
            written += 1
        pipe.execute()
        if written % 500 == 0:
            r.execute_command("TS.WAITDURABLE", "0")
            confirmed = written - 1
    r.close()
    kill9(p)
    assert confirmed > 0
    q = start_temporalstore(storage)
    r = client(q)
    try:
        present = {int(k.split(b":")[1]) for k in r.keys("k:*")}
        assert set(range(confirmed + 1)) <= present
        # What survived beyond the confirmed point is a prefix: no holes.
        assert present == set(range(len(present)))
    finally:
        r.close()
        q.stop()


def test_kill9_sync_loses_no_acknowledged_write(storage: list[str]) -> None:
    args = [*storage, "--durability", "sync"]
    acked: set[str] = set()
    for cycle in range(3):
        p = start_temporalstore(args)
        stop = threading.Event()
        lock = threading.Lock()

        def writer(
            n: int,
            p: ServerProcess = p,
            cycle: int = cycle,
            stop: threading.Event = stop,
            lock: threading.Lock = lock,
        ) -> None:
            r = client(p)
            i = 0
            try:
                while not stop.is_set():
                    key = f"c{cycle}:w{n}:{i}"
                    r.set(key, i)
                    with lock:
                        acked.add(key)
                    i += 1
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            finally:
                r.close()

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        # Killed once this cycle's writers have had a few dozen writes acknowledged
        # (counted, not timed: a loaded machine acknowledges fewer per second).
        goal = 60 * (cycle + 1)
        until(lambda goal=goal: len(acked) > goal, timeout=60)
        kill9(p)
        stop.set()
        for t in threads:
            t.join(30)
        q = start_temporalstore(args)
        r = client(q)
        try:
            present = {k.decode() for k in r.keys("*")}
            with lock:
                missing = acked - present
            assert not missing, f"cycle {cycle}: lost {len(missing)} acknowledged writes"
            assert len(acked) > 50 * (cycle + 1)
        finally:
            r.close()
            q.stop()


def test_outage_backpressures_writes_and_loses_nothing(storage: list[str]) -> None:
    args = [
        *storage,
        "--fault-injection",
        "yes",
        "--max-unflushed-bytes",
        "20000",
        "--write-wait-ms",
        "300",
    ]
    p = start_temporalstore(args)
    r = client(p)
    r.set("before", "1")
    r.execute_command("TS.WAITDURABLE", "0")
    r.execute_command("TS.FAULT", "OUTAGE", "ON")
    acked: list[int] = []
    refused = 0
    for i in range(400):
        try:
            r.set(f"o:{i}", "x" * 200)
            acked.append(i)
        except redis.ResponseError as e:
            assert str(e).startswith("object storage unavailable"), e
            refused += 1
            if refused >= 3:
                break
    assert refused >= 1 and acked, "writes were neither accepted nor pushed back"
    assert r.get("before") == b"1"  # reads keep working
    assert r.info("persistence")["last_flush_status"] == "err"
    r.execute_command("TS.FAULT", "OUTAGE", "OFF")
    assert (
        r.execute_command("TS.WAITDURABLE", "10000") >= int(r.info("persistence")["last_lsn"]) - 1
    )
    r.set("after", "1")
    r.close()
    kill9(p)
    q = start_temporalstore(args)
    r = client(q)
    try:
        for i in acked:
            assert r.exists(f"o:{i}"), i
        assert r.get("before") == b"1"
    finally:
        r.close()
        q.stop()


def test_put_that_lands_but_reports_failure_is_not_duplicated(storage: list[str]) -> None:
    args = [*storage, "--fault-injection", "yes"]
    p = start_temporalstore(args)
    r = client(p)
    r.execute_command("TS.FAULT", "FAIL-AFTER-PUT", "3")
    for i in range(50):
        r.set(f"f:{i}", i)
    r.execute_command("TS.WAITDURABLE", "10000")
    assert r.info("persistence")["fenced"] == 0
    r.close()
    kill9(p)
    q = start_temporalstore(args)
    r = client(q)
    try:
        assert len(r.keys("f:*")) == 50
    finally:
        r.close()
        q.stop()


def test_two_writers_on_one_prefix_fence_the_older(storage: list[str]) -> None:
    a = start_temporalstore(storage)
    ra = client(a)
    ra.set("from-a", "1")
    ra.execute_command("TS.WAITDURABLE", "0")
    b = start_temporalstore(storage)
    rb = client(b)
    try:
        assert rb.get("from-a") == b"1"
        rb.set("from-b", "1")
        fenced = False
        for i in range(100):
            try:
                ra.set(f"late-a:{i}", "1")
            except redis.ReadOnlyError as e:
                assert "fenced" in str(e)
                fenced = True
                break
            time.sleep(0.05)
        assert fenced, "the older writer kept accepting writes"
        assert int(ra.info("persistence")["fenced"]) == 1
        assert rb.get("from-b") == b"1"
        rb.execute_command("TS.WAITDURABLE", "0")
    finally:
        ra.close()
        rb.close()
        a.stop()
        b.stop()
    c = start_temporalstore(storage)
    rc = client(c)
    try:
        assert rc.get("from-a") == b"1" and rc.get("from-b") == b"1"
    finally:
        rc.close()
        c.stop()
    out = inspect(storage)
    assert out.returncode == 0, out.stdout + out.stderr


def inspect(storage: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", "inspect", *storage],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _crash_with_segments(tmp_path: Path) -> tuple[list[str], Path]:
    storage = ["--storage", f"file://{tmp_path}/store"]
    p = start_temporalstore(storage)
    r = client(p)
    for i in range(100):
        r.set(f"k:{i}", i)
    r.execute_command("TS.WAITDURABLE", "0")
    r.close()
    kill9(p)
    return storage, tmp_path / "store"


def _start_fails(storage: list[str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "--port", "0", *storage],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    return proc.stderr


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_segment_refuses_to_start_and_names_it(tmp_path: Path, damage: str) -> None:
    storage, root = _crash_with_segments(tmp_path)
    seg = sorted((root / "segments").iterdir())[-1]
    data = bytearray(seg.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) - 7]
    seg.write_bytes(bytes(data))
    err = _start_fails(storage)
    assert seg.name in err and "LSN" in err
    report = inspect(storage)
    assert report.returncode == 1 and seg.name in report.stdout


def test_corrupt_checkpoint_and_manifest_refuse_to_start(tmp_path: Path) -> None:
    storage = ["--storage", f"file://{tmp_path}/store"]
    p = start_temporalstore(storage)
    r = client(p)
    r.set("k", "v")
    r.close()
    p.proc.send_signal(signal.SIGTERM)
    p.proc.wait(30)
    p.stop()
    ckpt = next((tmp_path / "store" / "checkpoints").rglob("store.ckpt"))
    good = ckpt.read_bytes()
    ckpt.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    assert "store.ckpt" in _start_fails(storage)
    ckpt.write_bytes(good)
    manifest = sorted((tmp_path / "store" / "manifest").iterdir())[-1]
    manifest.write_bytes(b"{not json")
    assert manifest.name in _start_fails(storage)


def test_segments_without_a_manifest_refuse_to_start(tmp_path: Path) -> None:
    storage, root = _crash_with_segments(tmp_path)
    for m in (root / "manifest").iterdir():
        m.unlink()
    assert "no manifest" in _start_fails(storage)


def test_unreachable_storage_refuses_to_start() -> None:
    err = _start_fails(["--storage", "s3://nobucket/x", "--s3-endpoint-url", "http://127.0.0.1:9"])
    assert "cannot start" in err


def test_inspect_reports_totals(tmp_path: Path) -> None:
    storage, _root = _crash_with_segments(tmp_path)
    out = inspect(storage)
    assert out.returncode == 0, out.stderr
    assert "records=" in out.stdout and "problems=0" in out.stdout


def test_missing_segment_is_a_gap_that_refuses_to_start(tmp_path: Path) -> None:
    storage = ["--storage", f"file://{tmp_path}/store", "--flush-interval-ms", "5"]
    p = start_temporalstore(storage)
    r = client(p)
    for i in range(30):
        r.set(f"k:{i}", i)
        r.execute_command("TS.WAITDURABLE", "0")
    r.close()
    kill9(p)
    segments = sorted((tmp_path / "store" / "segments").iterdir())
    assert len(segments) > 3
    segments[len(segments) // 2].unlink()
    assert "gap in LSNs" in _start_fails(storage)


def test_waitaof_waits_for_object_storage(storage: list[str]) -> None:
    p = start_temporalstore(storage)
    r = client(p)
    try:
        r.set("k", "v")
        assert r.execute_command("WAITAOF", "1", "0", "0") == [1, 0]
        started = time.monotonic()
        assert r.execute_command("WAITAOF", "0", "1", "200") == [1, 0]
        assert time.monotonic() - started >= 0.15  # no replica can acknowledge
        with pytest.raises(redis.ResponseError, match="must between 0 and 1"):
            r.execute_command("WAITAOF", "2", "0", "0")
        with pytest.raises(redis.ResponseError, match="timeout is negative"):
            r.execute_command("WAITAOF", "1", "0", "-1")
        pipe = r.pipeline(transaction=True)
        pipe.set("k2", "v").execute_command("WAITAOF", "0", "1", "0")
        assert pipe.execute()[1][1] == 0  # inside MULTI it never blocks
        assert r.execute_command("TS.WAITDURABLE", "1000") >= 3
    finally:
        r.close()
        p.stop()


def test_compaction_deletes_what_checkpoints_cover_and_restart_still_works(
    tmp_path: Path,
) -> None:
    storage = [
        "--storage", f"file://{tmp_path}/store", "--flush-interval-ms", "5",
        "--checkpoint-every-records", "40", "--keep-checkpoints", "1",
    ]  # fmt: skip
    p = start_temporalstore(storage)
    r = client(p)
    root = tmp_path / "store"
    for round_ in range(4):
        for i in range(50):
            r.set(f"k:{round_ * 50 + i}", i)
        deadline = time.monotonic() + 20
        while int(r.info("persistence")["checkpoints_written"]) <= round_:
            assert time.monotonic() < deadline, "no checkpoint after 50 records"
            time.sleep(0.1)
    # Compaction follows each checkpoint (the counter moves first): wait for it.
    deadline = time.monotonic() + 20
    while len(list((root / "checkpoints").glob("*/store.ckpt"))) != 1:
        assert time.monotonic() < deadline, "compaction kept more than one checkpoint"
        time.sleep(0.1)
    info = r.info("persistence")
    assert int(info["checkpoints_written"]) >= 3
    ckpt_lsn = int(info["last_checkpoint_lsn"])
    firsts = sorted(int(f.stem) for f in (root / "segments").iterdir())
    # Every segment but the last starts after what the kept checkpoint covers.
    assert all(first > ckpt_lsn - 40 for first in firsts[:-1]), (firsts, ckpt_lsn)
    r.close()
    kill9(p)
    q = start_temporalstore(storage)
    r = client(q)
    try:
        assert len(r.keys("k:*")) == 200
    finally:
        r.close()
        q.stop()


def test_branches_snapshots_and_history_survive_kill9(storage: list[str]) -> None:
    p = start_temporalstore(storage)
    r = client(p)
    r.set("doc", "v1")
    r.execute_command("TS.SEAL", "first")
    r.execute_command("TS.BRANCH", "CREATE", "draft")
    r.execute_command("TS.CHECKOUT", "draft")
    r.execute_command("TS.META", "AUTHOR", "agent-7")
    r.set("doc", "draft-edit")
    r.hset("notes", "a", "1")
    r.execute_command("TS.CHECKOUT", "HEAD")
    r.set("doc", "v2")
    r.execute_command("TS.WAITDURABLE", "0")
    r.close()
    kill9(p)
    q = start_temporalstore(storage)
    r = client(q)
    try:
        assert r.get("doc") == b"v2"
        assert r.execute_command("TS.ASOF", "doc", "SNAPSHOT", "first") == b"v1"
        r.execute_command("TS.CHECKOUT", "draft")
        assert r.get("doc") == b"draft-edit" and r.hgetall("notes") == {b"a": b"1"}
        history = r.execute_command("TS.HISTORY", "doc")
        assert any(b"agent-7" in (h if isinstance(h, list) else list(h.values())) for h in history)
        r.execute_command("TS.CHECKOUT", "HEAD")
        assert r.exists("notes") == 0
        assert r.execute_command("TS.MERGE", "draft", "STRATEGY", "THEIRS") == 2
        assert r.get("doc") == b"draft-edit"
    finally:
        r.close()
        q.stop()


def test_versions_pruned_from_memory_are_read_from_storage(tmp_path: Path) -> None:
    storage = ["--storage", f"file://{tmp_path}/s", "--history", "versions:2"]
    p = start_temporalstore(storage)
    r = client(p)
    try:
        r.set("k", "first")
        first = r.execute_command("TS.VERSION")
        for i in range(10):
            r.set("k", f"later-{i}")
        r.execute_command("TS.WAITDURABLE", "0")
        # Memory keeps 2 versions; the first is still in the segments.
        assert r.execute_command("TS.ASOF", "k", "VERSION", first) == b"first"
        assert r.execute_command("TS.ASOF", "k", "VERSION", first - 1) is None
    finally:
        r.close()
        p.stop()
