"""Replicas (issue 12, part 1), with real processes sharing one storage directory:
a replica serves a prefix of its primary's history (same values, same LSNs), refuses
writes as a Redis replica does, reports ROLE and INFO replication in Redis' shapes,
acknowledges for WAIT, waits for an LSN (TS.WAITLSN), refills from storage when
restarted empty, reconnects to a restarted primary, and changes role on REPLICAOF."""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.sentinel import Sentinel

from tests.conftest import ServerProcess, free_port, start_temporalstore, until


def _replica(
    primary: ServerProcess, workdir: Path, extra: list[str] | None = None
) -> ServerProcess:
    return start_temporalstore(
        ["--replicaof", f"127.0.0.1 {primary.port}", *(extra or [])], workdir=workdir
    )


def _last_command(c: redis.Redis, key: str) -> bytes:
    """The command of a key's newest version."""
    last = c.execute_command("TS.HISTORY", key)[-1]
    if not isinstance(last, dict):
        last = dict(zip(last[::2], last[1::2], strict=True))
    return last[b"command"]  # type: ignore[no-any-return]


def _caught_up(primary: redis.Redis, replica: redis.Redis) -> bool:
    return bool(replica.execute_command("TS.VERSION") == primary.execute_command("TS.VERSION"))


@contextmanager
def replicated(
    flags: list[str], linked: bool = False
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A primary and its replica on one storage directory, both started with
    `flags`; with `linked`, once the primary counts the replica's link."""
    workdir = Path(tempfile.mkdtemp(prefix="ts-repl-"))
    primary = start_temporalstore(flags, workdir=workdir)
    replica = _replica(primary, workdir, flags)
    try:
        if linked:
            p = redis.Redis(port=primary.port)
            until(lambda: p.info("replication")["connected_slaves"] == 1)
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


@pytest.fixture
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with replicated(["--history", "all"]) as servers:
        yield servers


def _value(c: redis.Redis, key: str) -> Any:
    kind = c.type(key)
    read = {
        b"string": lambda: c.get(key),
        b"hash": lambda: c.hgetall(key),
        b"list": lambda: c.lrange(key, 0, -1),
        b"set": lambda: c.smembers(key),
        b"zset": lambda: c.zrange(key, 0, -1, withscores=True),
        b"stream": lambda: c.xrange(key),
    }[kind]
    return kind, read()


def _load(c: redis.Redis) -> None:
    c.set("s", "v1")
    c.set("s", "v2")
    c.hset("h", mapping={"a": "1", "b": "2"})
    c.hdel("h", "a")
    c.rpush("l", "x", "y", "z")
    c.lpop("l")
    c.zadd("z", {"m": 1.5, "n": 2})
    c.sadd("t", "p", "q")
    c.xadd("st", {"f": "v"}, id="1-1")
    c.execute_command("TS.SEAL", "snap")
    c.incr("counter")
    c.set("ttl", "x", px=600_000)


def test_replica_serves_the_primary_history(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary, replica = pair
    p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    _load(p)
    until(lambda: _caught_up(p, r))
    for key in ("s", "h", "l", "z", "t", "st", "counter", "ttl"):
        assert _value(r, key) == _value(p, key), key
        assert r.execute_command("TS.HISTORY", key) == p.execute_command("TS.HISTORY", key)
        assert r.pttl(key) == pytest.approx(p.pttl(key), abs=1000)
    assert r.execute_command("TS.ASOF", "s", "BACK", "1") == b"v1"
    assert r.execute_command("TS.SNAPSHOTS") == p.execute_command("TS.SNAPSHOTS")
    assert r.execute_command("TS.ASOF", "counter", "SNAPSHOT", "snap") is None
    assert r.execute_command("TS.CHECKOUT", "AT", "SNAPSHOT", "snap") == b"OK"
    assert r.get("counter") is None
    assert r.hgetall("h") == {b"b": b"2"}


def test_replica_refuses_writes_and_reports_its_role(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    primary, replica = pair
    p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    p.execute_command("TS.TABLE", "CREATE", "ns:t")
    p.set("k", "v")
    until(lambda: _caught_up(p, r))
    table = r.execute_command("TS.TABLE", "INFO", "ns:t")
    table = table if isinstance(table, dict) else dict(zip(table[::2], table[1::2], strict=True))
    assert table[b"applied_lsn"] == p.execute_command("TS.VERSION")
    assert table[b"replica_lag_ms"] >= 0
    with pytest.raises(redis.ReadOnlyError) as e:
        r.set("k", "other")
    assert str(e.value) == "You can't write against a read only replica."
    lsn = p.execute_command("TS.VERSION")
    role = r.execute_command("ROLE")
    assert role == [b"slave", b"127.0.0.1", primary.port, b"connected", lsn]
    until(lambda: p.execute_command("ROLE")[2])
    kind, offset, links = p.execute_command("ROLE")
    assert (kind, offset) == (b"master", lsn)
    assert links == [[b"127.0.0.1", str(replica.port).encode(), str(lsn).encode()]]
    info = r.info("replication")
    assert info["role"] == "slave"
    assert info["master_host"] == "127.0.0.1" and info["master_port"] == primary.port
    assert info["master_link_status"] == "up"
    assert info["master_sync_in_progress"] == 0
    assert info["slave_repl_offset"] == lsn
    assert info["slave_read_only"] == 1
    ours = r.info("temporalstore")
    assert ours["applied_lsn"] == lsn and ours["replica_lag_ms"] >= 0 and ours["role"] == "slave"
    pinfo = p.info("replication")
    assert pinfo["role"] == "master" and pinfo["connected_slaves"] == 1
    slave0 = pinfo["slave0"]
    assert (slave0["ip"], slave0["port"], slave0["state"]) == ("127.0.0.1", replica.port, "online")
    assert slave0["offset"] == lsn
    assert pinfo["master_repl_offset"] == lsn


def test_wait_and_read_your_writes_on_a_replica(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    primary, replica = pair
    p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    for i in range(200):
        p.set(f"k{i}", i)
        assert p.execute_command("WAIT", 1, 5000) == 1
    lsn = p.execute_command("TS.LASTLSN")
    assert lsn == p.execute_command("TS.VERSION")
    assert r.execute_command("TS.WAITLSN", lsn, 5000) >= lsn
    assert r.get("k199") == b"199"
    # An LSN nobody wrote yet: the wait times out and says how far the node is.
    assert r.execute_command("TS.WAITLSN", lsn + 1000, 100) == lsn
    with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica"):
        r.execute_command("WAIT", 1, 10)


def test_wait_without_replicas_times_out_with_zero() -> None:
    server = start_temporalstore()
    try:
        c = redis.Redis(port=server.port)
        c.set("k", "v")
        assert c.execute_command("WAIT", 0, 0) == 0
        assert c.execute_command("WAIT", 1, 100) == 0
        assert c.execute_command("ROLE") == [b"master", c.execute_command("TS.VERSION"), []]
    finally:
        server.stop()


def test_expiry_on_a_replica_hides_keys_and_writes_nothing(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    primary, replica = pair
    p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    p.set("gone", "x", px=300)
    until(lambda: _caught_up(p, r))
    time.sleep(0.4)
    before = r.execute_command("TS.VERSION")
    assert r.get("gone") is None and r.exists("gone") == 0
    assert r.execute_command("TS.VERSION") == before  # no deletion of its own
    # The primary's deletion arrives as a record, with the primary's LSN.
    until(lambda: _last_command(p, "gone") == b"expired")
    until(lambda: _caught_up(p, r))
    assert r.execute_command("TS.HISTORY", "gone") == p.execute_command("TS.HISTORY", "gone")


def test_a_replica_restarted_empty_refills_and_follows_a_restarted_primary() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="ts-repl-"))
    port = free_port()
    primary = start_temporalstore(["--port", str(port)], workdir=workdir)
    replica = _replica(primary, workdir)
    try:
        p = redis.Redis(port=port)
        for i in range(500):
            p.set(f"k{i}", i)
        r = redis.Redis(port=replica.port)
        until(lambda: _caught_up(p, r))
        # Killed, then started again with an empty memory: storage, then the link.
        replica.proc.send_signal(signal.SIGKILL)
        replica.proc.wait()
        replica.stop()
        p.set("while-away", "1")
        replica = _replica(primary, workdir)
        r = redis.Redis(port=replica.port)
        until(lambda: _caught_up(p, r))
        assert r.get("k499") == b"499" and r.get("while-away") == b"1"
        # The primary restarts on its port: the replica reconnects and follows it.
        primary.stop()
        until(lambda: r.info("replication")["master_link_status"] == "down")
        assert r.get("k1") == b"1"  # a replica whose primary vanished keeps serving
        assert "master_link_down_since_seconds" in r.info("replication")
        primary = start_temporalstore(["--port", str(port)], workdir=workdir)
        p = redis.Redis(port=port)
        p.set("after-restart", "yes")
        until(lambda: r.get("after-restart") == b"yes")
        assert until(lambda: _caught_up(p, r))
    finally:
        replica.stop()
        primary.stop()


def test_replicaof_no_one_promotes_and_replicaof_demotes() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="ts-repl-"))
    primary = start_temporalstore(["--durability", "sync"], workdir=workdir)
    replica = _replica(primary, workdir, ["--durability", "sync"])
    try:
        p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
        for i in range(100):
            p.set(f"k{i}", i)
        until(lambda: _caught_up(p, r))
        # The old primary goes; the replica takes the prefix over.
        primary.proc.send_signal(signal.SIGKILL)
        primary.proc.wait()
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        until(lambda: r.execute_command("ROLE")[0] == b"master")
        until(lambda: _try_set(r, "new", "1"))
        assert r.get("k99") == b"99"
        assert [r.get(f"k{i}") for i in range(100)] == [str(i).encode() for i in range(100)]
        # The former replica is primary now; a new node follows it, then is
        # turned into a primary and back.
        primary.stop()
        primary = _replica(replica, workdir)
        p = redis.Redis(port=primary.port)
        until(lambda: _caught_up(r, p))
        assert p.get("new") == b"1"
    finally:
        replica.stop()
        primary.stop()


def _try_set(c: redis.Redis, key: str, value: str) -> bool:
    try:
        return bool(c.set(key, value))
    except redis.RedisError:
        return False


def test_sentinel_clients_find_the_primary_and_replicas() -> None:
    """redis-py's Sentinel client, pointed at the nodes themselves (--group)."""
    with replicated(["--group", "g"], linked=True) as (primary, replica):
        p = redis.Redis(port=primary.port)
        nodes = [("127.0.0.1", primary.port), ("127.0.0.1", replica.port)]
        sentinel = Sentinel(nodes, socket_timeout=5)
        assert sentinel.discover_master("g") == ("127.0.0.1", primary.port)
        until(lambda: sentinel.discover_slaves("g") == [("127.0.0.1", replica.port)])
        sentinel.master_for("g").set("a", "1")
        r = redis.Redis(port=replica.port)
        until(lambda: _caught_up(p, r))
        assert sentinel.slave_for("g").get("a") == b"1"
        for port in (primary.port, replica.port):
            c = redis.Redis(port=port)
            addr = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "g")
            assert addr == [b"127.0.0.1", str(primary.port).encode()]
            assert c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "other") is None
            with pytest.raises(redis.ResponseError, match="No such master with that name"):
                c.execute_command("SENTINEL", "MASTER", "other")
        assert len(p.execute_command("SENTINEL", "SENTINELS", "g")) == 1


def test_replicated_writes_wake_watch_and_blocked_readers_on_the_replica(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    primary, replica = pair
    p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    p.set("w", "0")
    p.xadd("events", {"n": "0"}, id="1-0")
    until(lambda: _caught_up(p, r))
    # WATCH on the replica: a replicated write to the key aborts the transaction.
    tx = r.pipeline(transaction=True)
    tx.watch("w")
    p.set("w", "1")
    until(lambda: _caught_up(p, r))
    tx.multi()
    tx.get("w")
    with pytest.raises(redis.WatchError):
        tx.execute()
    # XREAD BLOCK on the replica wakes when the primary's XADD arrives.
    reader = redis.Redis(port=replica.port, socket_timeout=10)
    got: list[Any] = []
    t = threading.Thread(
        target=lambda: got.append(reader.xread({"events": "$"}, block=8000)), daemon=True
    )
    t.start()
    time.sleep(0.3)
    p.xadd("events", {"n": "1"}, id="2-0")
    t.join(10)
    assert got and got[0] == [[b"events", [(b"2-0", {b"n": b"1"})]]], got


def test_replicaof_turns_a_primary_into_a_replica() -> None:
    """REPLICAOF host port on a primary: it steps down (its clients are closed),
    rebuilds from storage and follows the new primary."""
    with replicated([]) as (old, new):
        o, n = redis.Redis(port=old.port), redis.Redis(port=new.port)
        o.set("before", "1")
        until(lambda: _caught_up(o, n))
        assert n.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        until(lambda: _try_set(n, "on-new", "1"))
        assert o.execute_command("REPLICAOF", "127.0.0.1", str(new.port)) == b"OK"
        fresh = redis.Redis(port=old.port)
        until(lambda: fresh.execute_command("ROLE")[0] == b"slave", retry_on=(redis.RedisError,))
        until(lambda: fresh.get("on-new") == b"1", retry_on=(redis.RedisError,))
        assert fresh.get("before") == b"1"
        with pytest.raises(redis.ReadOnlyError):
            fresh.set("x", "1")


def _segment_firsts(workdir: Path) -> list[int]:
    """The first LSN of every segment in the storage directory, in order."""
    from flusher.paths import parse_segment

    root = workdir / "data"
    names = [str(p.relative_to(root)) for p in (root / "segments").rglob("*") if p.is_file()]
    return sorted(first for n in names if (first := parse_segment(n)) is not None)


def _lsn(c: redis.Redis) -> int:
    return int(c.info("temporalstore")["lsn"])


def test_a_replica_paused_past_two_compactions_rebuilds_from_the_checkpoint() -> None:
    """A replica stopped (SIGSTOP) while its primary writes more than its backlog
    holds, checkpoints and compacts twice: resumed, it finds the link closed and the
    segments it needs deleted; it rebuilds from the newest checkpoint, then serves
    what the primary serves and follows new writes."""
    flags = ["--keep-checkpoints", "1", "--flush-interval-ms", "20", "--history", "all"]
    with replicated(flags, linked=True) as (primary, replica):
        p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
        p.set("before", "1")
        p.set("before", "2")
        until(lambda: _caught_up(p, r))
        paused_at = _lsn(r)
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            big = b"x" * 65536
            for rnd in range(2):
                # 24 MiB per round: past what the link's buffers (8 MiB and the
                # sockets') and the backlog (8 MiB beyond storage) can hold.
                for start in range(0, 384, 32):
                    pipe = p.pipeline(transaction=False)
                    for i in range(start, start + 32):
                        pipe.set(f"big:{rnd}:{i}", big + str(i).encode())
                    pipe.execute()
                p.set(f"round:{rnd}", rnd)
                done = int(p.info("persistence")["last_checkpoint_lsn"])
                p.bgsave()
                until(lambda done=done: int(p.info("persistence")["last_checkpoint_lsn"]) > done)
            # Compaction deleted what the replica needs next.
            until(lambda: _segment_firsts(primary.workdir)[0] > paused_at + 1)
        finally:
            replica.proc.send_signal(signal.SIGCONT)
        p.set("after", "3")
        until(lambda: _caught_up(p, r), 60)
        assert r.get("after") == b"3" and r.get("round:1") == b"1"
        assert r.dbsize() == p.dbsize()
        assert r.get("big:0:7") == p.get("big:0:7") and r.get("big:1:383") == p.get("big:1:383")
        assert r.execute_command("TS.HISTORY", "after") == p.execute_command("TS.HISTORY", "after")
        # ... and it follows the link again.
        p.set("later", "4")
        until(lambda: r.get("later") == b"4")
        assert r.info("replication")["master_link_status"] == "up"
        assert any("rebuilt from storage" in line for line in replica.log_lines), "".join(
            replica.log_lines
        )


def test_a_replica_takes_the_history_policy_of_its_primary() -> None:
    """A replica started with another --history than its primary's (here the default
    versions:64 against versions:5) takes the primary's on linking and rebuilds under
    it: TS.HISTORY answers the same on both, for versions it read from storage and
    for those that came over the link."""
    workdir = Path(tempfile.mkdtemp(prefix="ts-repl-"))
    primary = start_temporalstore(["--history", "versions:5"], workdir=workdir)
    replica: ServerProcess | None = None
    try:
        p = redis.Redis(port=primary.port)
        for i in range(8):
            p.set("old", i)
        replica = _replica(primary, workdir)
        r = redis.Redis(port=replica.port)
        until(lambda: r.info("temporalstore")["history_policy"] == "versions:5")
        for i in range(12):
            p.set("new", i)
        until(lambda: r.get("new") == b"11" and _caught_up(p, r))
        for key in ("old", "new"):
            assert r.execute_command("TS.HISTORY", key) == p.execute_command("TS.HISTORY", key), key
        assert r.execute_command("TS.ASOF", "new", "BACK", "4") == b"7"
        assert any("taking the primary's" in line for line in replica.log_lines)
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()


def test_a_replica_authenticates_to_its_primary_with_masterauth() -> None:
    """A primary with a password (`--requirepass`) refuses a replica's link until the
    replica gives it (`masterauth`, as Redis' replicas: AUTH before the rest): without
    it the link stays down and the reason is logged; `CONFIG SET masterauth` lets the
    next try in. `--masteruser` names an ACL user to authenticate as."""
    workdir = Path(tempfile.mkdtemp(prefix="ts-repl-"))
    primary = start_temporalstore(["--requirepass", "s3cret"], workdir=workdir)
    replicas: list[ServerProcess] = []
    try:
        p = redis.Redis(port=primary.port, password="s3cret")
        p.execute_command("ACL", "SETUSER", "repl", "on", ">replpw", "+@all", "~*")
        p.set("k", "v1")
        replicas.append(_replica(primary, workdir, ["--masterauth", "wrong"]))
        r = redis.Redis(port=replicas[0].port)
        until(lambda: any("WRONGPASS" in line for line in replicas[0].log_lines))
        assert r.info("replication")["master_link_status"] == "down"
        assert r.config_set("masterauth", "s3cret")
        until(lambda: r.info("replication")["master_link_status"] == "up", 30)
        p.set("k", "v2")
        until(lambda: r.get("k") == b"v2")

        user = ["--masteruser", "repl", "--masterauth", "replpw"]
        replicas.append(_replica(primary, workdir, user))
        r2 = redis.Redis(port=replicas[1].port)
        until(lambda: r2.info("replication")["master_link_status"] == "up", 30)
        p.set("k", "v3")
        until(lambda: r2.get("k") == b"v3" and r.get("k") == b"v3")
        assert r2.config_get("masteruser") == {"masteruser": "repl"}
        assert r2.config_get("masterauth") == {"masterauth": "<redacted>"}
        assert p.info("replication")["connected_slaves"] == 2
    finally:
        for replica in replicas:
            replica.stop()
        primary.stop()
