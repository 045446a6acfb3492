"""Redis' own replica protocol (SYNC/PSYNC) and BGREWRITEAOF, against real processes.

A raw socket attaches as a replica to redis-server 7.0 and to ours: the RDB payload is
read with our own RDB reader, and the propagated streams of the same commands are
compared byte for byte (millisecond times, which differ between the servers, masked).
A real `redis-server --replicaof` follows ours and ends with the same dataset (DEBUG
DIGEST) and the same replication offset.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from commands.rdb_file import parse_rdb
from tests.conftest import Differ, ServerProcess, start_redis, until
from tests.resp_client import RawClient

MS = re.compile(rb"\$13\r\n1\d{12}\r\n")  # an absolute time in ms (PXAT, PEXPIREAT)
T = b"T" * 13  # what replaces it


def attach(port: int, command: bytes = b"SYNC\r\n") -> tuple[RawClient, bytes, bytes]:
    """Attach as a replica: (the link, the FULLRESYNC line or b"", the RDB file)."""
    c = RawClient(port)
    c.send(command)
    head = b""
    if command.startswith(b"PSYNC"):
        end = c._line(0)
        head, c.buf = c.buf[:end], c.buf[end + 2 :]
    while not c.buf.lstrip(b"\n"):
        c._fill()
    c.buf = c.buf.lstrip(b"\n")  # redis-server sends newlines while it saves the RDB
    end = c._line(0)
    assert c.buf[:1] == b"$", c.buf[:80]
    n = int(c.buf[1:end])
    c.buf = c.buf[end + 2 :]
    return c, head, c.read_bytes(n)


def stream(link: RawClient) -> bytes:
    return MS.sub(b"$13\r\n" + T + b"\r\n", link.read_pending(0.5))


def commands_of(data: bytes) -> list[list[bytes]]:
    """The stream as a list of commands (argv)."""
    out: list[list[bytes]] = []
    pos = 0
    while pos < len(data):
        assert data[pos : pos + 1] == b"*", data[pos:]
        nl = data.index(b"\r\n", pos)
        count = int(data[pos + 1 : nl])
        pos = nl + 2
        argv = []
        for _ in range(count):
            nl = data.index(b"\r\n", pos)
            n = int(data[pos + 1 : nl])
            argv.append(data[nl + 2 : nl + 2 + n])
            pos = nl + 2 + n + 2
        out.append(argv)
    return out


@pytest.fixture
def both(redis_dbg: ServerProcess, ts_dbg: ServerProcess) -> Iterator[list[redis.Redis]]:
    clients = [redis.Redis(port=p.port) for p in (redis_dbg, ts_dbg)]
    for c in clients:
        c.flushall()
        c.config_set("repl-ping-replica-period", "3600")
    yield clients
    for c in clients:
        c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        c.config_set("repl-ping-replica-period", "10")
        c.close()


def same_stream(
    both: list[redis.Redis], run: Callable[[redis.Redis], None], mask: bytes | None = None
) -> list[list[bytes]]:
    """Attach to both servers, run `run(client)` on each, return ours as commands after
    asserting the two streams are the same bytes (what `mask` matches replaced by x:
    random choices)."""
    got = []
    for c in both:
        link, _head, _rdb = attach(c.connection_pool.connection_kwargs["port"])
        try:
            run(c)
            data = stream(link)
            if mask is not None:
                data = re.sub(mask, lambda m: b"x" * len(m.group(1)), data)
            got.append(data)
        finally:
            link.close()
    assert got[1] == got[0], f"\nredis: {got[0]!r}\nours:  {got[1]!r}"
    return commands_of(got[1])


def test_rewrites_equal_redis(both: list[redis.Redis]) -> None:
    def run(c: redis.Redis) -> None:
        c.set("a", "1", ex=100)
        c.set("b", "2", px=5000, get=True)
        c.set("c", "3", get=True)
        c.execute_command("SETEX", "d", 100, "v")
        c.execute_command("PSETEX", "e", 100000, "v")
        c.getset("c", "4")
        c.incrbyfloat("f", 1.5)
        c.hincrbyfloat("h", "x", 2.5)
        c.expire("a", 50)
        c.pexpire("b", 50000, gt=True)
        c.expireat("d", 4_000_000_000)
        c.pexpireat("e", 4_000_000_000_000)
        c.expire("f", -1)  # already past: DEL
        c.getex("c", ex=100)
        c.getex("c", persist=True)
        c.getdel("c")
        c.sadd("s", "only")
        c.spop("s")
        c.rpush("l", "x", "y", "z")
        c.blpop(["l"], 1)
        c.blmove("l", "l2", 1, "LEFT", "RIGHT")
        c.lmpop(1, "l", direction="RIGHT", count=5)
        c.zadd("z", {"m": 1, "n": 2, "o": 3})
        c.bzpopmin(["z"], 1)
        c.zmpop(1, ["z"], max=True, count=10)
        c.xadd("st", {"f": "v"}, id="7-*")
        c.xadd("st", {"f": "w"}, id="8-1", maxlen=1000, approximate=True)  # ~: = 2
        c.xadd("st", {"f": "x"}, id="9-1", minid="8", approximate=True)
        c.xtrim("st", maxlen=0, approximate=False)
        c.xtrim("st", maxlen=5, approximate=True)  # deleted nothing: not propagated
        c.geoadd("g", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"])
        c.geoadd("g", [13.1, 38.2, "Palermo", 2.35, 48.85, "Paris"], nx=True, ch=True)
        c.execute_command("SELECT", 5)  # the client's next commands: another database
        c.delete("absent")  # changes nothing: not propagated

    def run_all(c: redis.Redis) -> None:
        run(c)
        c2 = redis.Redis(port=c.connection_pool.connection_kwargs["port"], db=5)
        c2.set("in5", "v")
        c.set("back", "v")  # database 0 again: SELECT 0
        c2.close()

    cmds = same_stream(both, run_all)
    assert cmds[0] == [b"SELECT", b"0"]
    assert [b"SET", b"a", b"1", b"PXAT", T] in cmds
    assert [b"DEL", b"f"] in cmds and [b"SREM", b"s", b"only"] in cmds
    assert [b"SELECT", b"5"] in cmds


def test_transactions_and_scripts_wrapped(both: list[redis.Redis]) -> None:
    def run(c: redis.Redis) -> None:
        p = c.pipeline(transaction=True)
        p.set("m1", 1)
        p.incr("m1")
        p.get("m1")
        p.execute()
        p = c.pipeline(transaction=True)
        p.set("one", 1)
        p.get("one")
        p.execute()  # one write: not wrapped
        c.eval("redis.call('set', KEYS[1], 'x'); redis.call('append', KEYS[1], 'y')", 1, "k")
        c.eval("return redis.call('get', KEYS[1])", 1, "k")  # no write: nothing
        c.sadd("big", *range(10))
        c.spop("big", 3)  # three SREMs, wrapped
        c.spop("big", 100)  # the whole set: DEL
        c.flushall()  # propagated even with nothing to flush
        c.flushdb()

    cmds = same_stream(both, run, mask=rb"(?<=SREM\r\n\$3\r\nbig\r\n\$1\r\n)(\d)")
    names = [a[0].upper() for a in cmds]
    assert names[:6] == [b"SELECT", b"MULTI", b"SET", b"INCRBY", b"EXEC", b"SET"]
    assert names.count(b"MULTI") == 3 and names[-2:] == [b"FLUSHALL", b"FLUSHDB"]


def test_lazy_expiry_and_blocked_pops(both: list[redis.Redis]) -> None:
    """Lazy expiry propagates DEL before the command that found the key, not wrapped
    for SCAN/RANDOMKEY (one key each: Redis' hash order would make two differ); a pop
    served after blocking propagates its non-blocking form."""

    def run(c: redis.Redis) -> None:
        port = c.connection_pool.connection_kwargs["port"]
        c.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        c.set("gone", "v", px=1)
        c.set("x", "1")
        time.sleep(0.01)
        c.scan(0)
        c.delete("x")  # RANDOMKEY would pick among x and gone2 at random
        c.set("gone2", "v", px=1)
        time.sleep(0.01)
        c.randomkey()
        c.set("gone3", "v", px=1)
        time.sleep(0.01)
        c.get("gone3")  # a read that expires: one DEL
        c.set("gone4", "v", px=1)
        time.sleep(0.01)
        c.append("gone4", "w")  # a write that finds it expired: DEL, then APPEND, wrapped
        waiter = RawClient(port)
        waiter.send(b"*3\r\n$5\r\nBRPOP\r\n$1\r\nq\r\n$1\r\n5\r\n")
        until(lambda: c.info("clients")["blocked_clients"] == 1)
        c.lpush("q", "a", "b")
        assert waiter.read_reply() == b"*2\r\n$1\r\nq\r\n$1\r\na\r\n"
        waiter.close()

    cmds = same_stream(both, run)
    assert [b"RPOP", b"q"] in cmds
    assert cmds.count([b"DEL", b"gone"]) == 1


def test_active_expiry_propagates_del(ts_dbg: ServerProcess) -> None:
    c = redis.Redis(port=ts_dbg.port)
    c.flushall()
    link, _h, _rdb = attach(ts_dbg.port)
    c.set("soon", "v", px=50)
    cmds = until(lambda: commands_of(link.read_pending(0.3)) or None, timeout=10)
    got = cmds + commands_of(link.read_pending(1.0))
    assert got[-1] == [b"DEL", b"soon"], got
    link.close()
    c.close()


def test_rdb_payload_holds_the_dataset(ts_dbg: ServerProcess) -> None:
    c = redis.Redis(port=ts_dbg.port)
    c.flushall()
    c.set("s", "v" * 50)
    c.set("n", 12345, ex=1000)
    c.rpush("l", *range(200))
    c.hset("h", mapping={"a": 1, "b": 2})
    c.zadd("z", {"m": 1.5})
    c.sadd("i", 1, 2, 3)
    c.xadd("st", {"f": "v"}, id="1-1")
    c.xgroup_create("st", "g", id="0")
    redis.Redis(port=ts_dbg.port, db=2).set("two", "2")
    c.function_load("#!lua name=lib\nredis.register_function('f', function() return 1 end)")
    info = c.info("replication")
    stats = c.info("stats")
    link, head, rdb = attach(ts_dbg.port, b"PSYNC ? -1\r\n")
    after = c.info("stats")
    assert after["sync_full"] == stats["sync_full"] + 1
    assert after["sync_partial_err"] == stats["sync_partial_err"]
    assert head == b"+FULLRESYNC %s %d" % (
        info["master_replid"].encode(),
        c.info("replication")["master_repl_offset"],
    )
    parsed = parse_rdb(rdb)
    keys = {(db, k): (v, at) for db, k, v, at in parsed.keys}
    assert keys[(0, b"s")][0] == b"v" * 50
    assert keys[(0, b"n")][1] is not None and keys[(0, b"n")][1] > time.time() * 1000
    assert list(keys[(0, b"l")][0]) == [b"%d" % i for i in range(200)]
    assert keys[(2, b"two")] == (b"2", None)
    assert {k for _db, k in keys} == {b"s", b"n", b"l", b"h", b"z", b"i", b"st", b"two"}
    assert len(parsed.functions) == 1
    link.close()
    c.function_flush()
    c.close()


def test_offset_moves_with_the_bytes_and_the_flag_clears(ts_dbg: ServerProcess) -> None:
    c = redis.Redis(port=ts_dbg.port)
    link, _h, _rdb = attach(ts_dbg.port)
    before = c.info("replication")
    assert before["connected_slaves"] >= 1 and before["repl_backlog_active"] == 1
    c.set("k", "v")
    c.lpush("l", "a")
    data = link.read_pending(0.5)
    after = c.info("replication")["master_repl_offset"]
    assert after - before["master_repl_offset"] == len(data) > 0
    link.send(b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$%d\r\n%d\r\n" % (len(str(after)), after))
    assert until(lambda: c.info("replication")["slave0"]["offset"] == after)
    assert link.read_pending(0.3) == b""  # a replica's commands get no reply
    link.close()
    time.sleep(0.2)
    c.set("k2", "v")  # the first write after the last replica left detaches the stream
    assert c.info("replication")["connected_slaves"] == 0
    assert c.info("replication")["master_repl_offset"] == after  # no replica: no bytes
    c.close()


def test_redis_server_follows_us(ts_dbg: ServerProcess) -> None:
    """redis-server --replicaof ours: full sync from our RDB, then the stream; the
    datasets end equal (DEBUG DIGEST, functions) and so do the offsets."""
    c = redis.Redis(port=ts_dbg.port)
    c.flushall()
    c.set("pre", "x")
    c.rpush("l", *range(300))
    c.hset("h", mapping={"a": 1, "b": "x" * 100})
    c.zadd("z", {"a": 1.5, "b": 2})
    c.xadd("st", {"f": "v"})
    c.xgroup_create("st", "g", id="0")
    c.set("ttl", "v", ex=1000)
    c.function_load("#!lua name=lib\nredis.register_function('f', function() return 1 end)")
    replica = start_redis(
        ["--replicaof", "127.0.0.1", str(ts_dbg.port), "--enable-debug-command", "yes"]
    )
    r = redis.Redis(port=replica.port)
    try:
        until(lambda: r.info("replication")["master_link_status"] == "up")
        for i in range(50):
            c.incr("n")
            c.lpush("l", i)
            c.hincrbyfloat("h", "a", 0.5)
        c.set("a", "1", ex=100)
        c.sadd("s", "a", "b")
        c.spop("s")
        c.expire("pre", 100)
        redis.Redis(port=ts_dbg.port, db=3).set("in3", "z")
        c.xadd("st", {"g": "w"})
        c.xreadgroup("g", "c1", {"st": ">"})
        c.eval("redis.call('set','x','1'); redis.call('incr','x')", 0)
        # TS.* verbs propagate the keys' resulting states; TS.RESTORE of more than 1,024
        # keys writes in slices, each propagated as it commits.
        c.set("pre", "y")
        c.execute_command("TS.REVERT", "pre", "BACK", "1")
        lsn = c.execute_command("TS.LASTLSN")
        p = c.pipeline(transaction=False)
        for i in range(1500):
            p.set(f"bulk{i}", i)
        p.execute()
        assert c.execute_command("TS.RESTORE", "VERSION", lsn) == 1500
        t = time.monotonic()
        assert c.wait(1, 5000) == 1  # REPLCONF GETACK: the replica acknowledges at once
        assert time.monotonic() - t < 0.9  # (unasked, a replica acknowledges every second)
        until(
            lambda: (
                r.info("replication")["master_repl_offset"]
                == c.info("replication")["master_repl_offset"]
            )
        )
        assert r.execute_command("DEBUG", "DIGEST") == c.execute_command("DEBUG", "DIGEST")
        offset = c.info("replication")["master_repl_offset"]
        assert c.execute_command("ROLE")[1] == offset
        port = b"%d" % replica.port  # its offset: once it acknowledged (every second)
        until(lambda: c.execute_command("ROLE")[2][0][1:] == [port, b"%d" % offset])
        assert r.function_list() == c.function_list()

        # XCLAIM ... LASTID carries no entries-read: a Redis primary's replica shows it
        # unknown too (and so a lag of its own).
        def groups(x: redis.Redis) -> list[dict[str, object]]:
            return [
                {k: v for k, v in g.items() if k not in ("entries-read", "lag")}
                for g in x.xinfo_groups("st")
            ]

        assert groups(r) == groups(c)
        assert r.xpending("st", "g") == c.xpending("st", "g")
    finally:
        r.close()
        replica.stop()
        c.function_flush()
        c.close()


def test_bgrewriteaof_writes_a_checkpoint(ts_dbg: ServerProcess) -> None:
    c = redis.Redis(port=ts_dbg.port)
    c.flushall()
    c.xadd("mystream", {"a": "b"}, maxlen=0, approximate=False)
    written = c.info("persistence")["checkpoints_written"]
    rewrites = c.info("persistence")["aof_rewrites"]
    raw = RawClient(ts_dbg.port)
    assert raw.call("BGREWRITEAOF") == b"+Background append only file rewriting started\r\n"
    raw.close()
    until(lambda: c.info("persistence")["aof_rewrite_in_progress"] == 0)
    p = c.info("persistence")
    assert p["checkpoints_written"] == written + 1 and p["aof_rewrites"] == rewrites + 1
    assert p["aof_last_bgrewrite_status"] == "ok" and p["aof_last_rewrite_time_sec"] >= 0
    assert c.execute_command("DEBUG", "LOADAOF") == b"OK"
    assert c.xinfo_stream("mystream")["length"] == 0
    c.close()


def test_bgrewriteaof_replies(ddiff: Differ) -> None:
    d = ddiff
    d.check("MULTI")
    d.check("BGREWRITEAOF")
    d.check("EXEC")  # "scheduled" inside a transaction
    for c in (d.ref, d.ours):  # scheduled, then started, then done

        def idle(c: RawClient = c) -> bool:
            info = c.call("INFO", "persistence")
            return b"aof_rewrite_in_progress:0" in info and b"aof_rewrite_scheduled:0" in info

        until(idle)
    d.check("BGREWRITEAOF", "x")  # arity


def test_xreadgroup_propagates_as_redis(both: list[redis.Redis]) -> None:
    """XREADGROUP: an XCLAIM per entry delivered (TIME masked), XGROUP CREATECONSUMER and
    XGROUP SETID ... ENTRIESREAD for NOACK reads, the consumer's history re-read."""

    def run(c: redis.Redis) -> None:
        c.xadd("st", {"f": "1"}, id="1-1")
        c.xadd("st", {"f": "2"}, id="2-1")
        c.xgroup_create("st", "g", id="0")
        c.xreadgroup("g", "alice", {"st": ">"}, count=1)
        c.xreadgroup("g", "alice", {"st": ">"})
        c.xreadgroup("g", "alice", {"st": "0"})  # history: counts go up, not propagated
        c.xadd("st", {"f": "3"}, id="3-1")
        c.xreadgroup("g", "bob", {"st": ">"}, noack=True)
        c.xreadgroup("g", "carol", {"st": ">"}, noack=True)  # nothing new: nothing
        c.xack("st", "g", "1-1")
        raw = RawClient(c.connection_pool.connection_kwargs["port"])
        raw.call("XCLAIM", "st", "g", "dave", 0, "2-1")  # alice's entry to dave
        c.xdel("st", "2-1")
        c.xadd("st", {"f": "4"}, id="4-1")
        c.xreadgroup("g", "erin", {"st": ">"})
        raw.call("XCLAIM", "st", "g", "frank", 0, "2-1", "4", "JUSTID")  # 2-1: deleted
        raw.call("XCLAIM", "st", "g", "frank", 0, "9", "LASTID", "5-1")  # SETID
        c.xadd("st", {"f": "6"}, id="6-1")
        c.xreadgroup("g", "gina", {"st": ">"})
        c.xdel("st", "6-1")
        raw.call("XAUTOCLAIM", "st", "g", "hank", 0, "0-0")
        raw.close()

    cmds = same_stream(both, run)
    assert [b"XGROUP", b"CREATECONSUMER", b"st", b"g", b"bob"] in cmds
    assert [b"XGROUP", b"SETID", b"st", b"g", b"3-1", b"ENTRIESREAD", b"3"] in cmds
    assert sum(1 for a in cmds if a[0] == b"XCLAIM") == 8


def test_a_replica_is_a_replica_client(redis_dbg: ServerProcess, ts_dbg: ServerProcess) -> None:
    """CLIENT LIST shows it with flags=S, TYPE replica selects it, INFO clients does not
    count it, as redis-server does."""
    for server in (redis_dbg, ts_dbg):
        c = redis.Redis(port=server.port)
        before = c.info("clients")["connected_clients"]
        link, _h, _rdb = attach(server.port)
        replicas = c.client_list(_type="replica")
        assert len(replicas) == 1 and replicas[0]["flags"] == "S", (server, replicas)
        assert c.info("clients")["connected_clients"] == before
        assert c.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        assert link.read_closed()
        link.close()
        c.close()


def test_multi_cases_of_the_redis_suite(both: list[redis.Redis]) -> None:
    """multi.tcl's propagation cases (tagged needs:repl there): SELECT inside MULTI,
    empty and read-only transactions, a write with no effect, PUBLISH, SCRIPT LOAD and
    SCRIPT FLUSH (not propagated), EVAL (its effects), SWAPDB of a database with itself."""

    def run(c: redis.Redis) -> None:
        raw = RawClient(c.connection_pool.connection_kwargs["port"])
        for block in (
            [["SELECT", 1], ["SET", "a", "b"], ["GET", "a"], ["SELECT", 2], ["SET", "c", "d"]],
            [],
            [["GET", "a"]],
            [["DEL", "nothing"]],
            [["PUBLISH", "ch", "msg"]],
            [["SCRIPT", "LOAD", "return 1"], ["SET", "e", "f"]],
            [["EVAL", "redis.call('set', KEYS[1], 'bar')", 1, "bar"]],
            [["SCRIPT", "FLUSH"], ["SET", "g", "h"]],
        ):
            raw.call("MULTI")
            for argv in block:
                raw.call(*argv)
            raw.call("EXEC")
        raw.call("SELECT", 0)
        raw.call("SWAPDB", 3, 3)
        raw.call("PUBLISH", "ch", "outside")
        raw.close()

    same_stream(both, run)


def test_a_redis_replica_counts_for_min_replicas_to_write(ts_dbg: ServerProcess) -> None:
    """min-replicas-to-write: a Redis replica that acknowledged within the lag is a good
    replica (INFO's min_slaves_good_slaves, and writes are accepted again)."""
    c = redis.Redis(port=ts_dbg.port)
    c.config_set("min-replicas-max-lag", 10)
    c.config_set("min-replicas-to-write", 1)
    try:
        with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
            c.set("k", "v")
        link, _h, _rdb = attach(ts_dbg.port)
        link.send(b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$1\r\n0\r\n")
        assert until(lambda: c.info("replication")["min_slaves_good_slaves"] == 1)
        assert c.set("k", "v")
        link.close()
    finally:
        c.config_set("min-replicas-to-write", 0)
        c.close()


def test_eviction_propagates_del(both: list[redis.Redis]) -> None:
    """The Redis suite's `propagation with eviction` (unit/maxmemory, external:skip there):
    each evicted key is a DEL of its own in the stream, then writes go on."""

    def run(c: redis.Redis) -> None:
        for i in (1, 2, 3):
            c.set(f"asdf{i}", i)
        c.config_set("maxmemory-policy", "allkeys-lru")
        c.config_set("maxmemory", 1)
        try:
            assert until(lambda: c.dbsize() == 0)
        finally:
            c.config_set("maxmemory", 0)
            c.config_set("maxmemory-policy", "noeviction")
        c.set("asdf4", 4)

    # Which key goes first is the LRU sample's choice: each DEL's key digit is masked.
    got = same_stream(both, run, mask=rb"(?<=asdf)([123])(?=\r\n\*)")
    assert [argv[0] for argv in got] == [b"SELECT"] + [b"SET"] * 3 + [b"DEL"] * 3 + [b"SET"]


def test_sync_behind_unwritten_replies_is_refused_as_redis(
    redis_dbg: ServerProcess, ts_dbg: ServerProcess
) -> None:
    """SYNC or PSYNC in the same read as earlier commands: their replies are not
    written yet, so Redis refuses it (clientHasPendingReplies) rather than send the
    RDB ahead of them; the connection stays a normal client."""
    for command in (b"SYNC\r\n", b"PSYNC ? -1\r\n"):
        got = []
        for p in (redis_dbg, ts_dbg):
            c = RawClient(p.port)
            try:
                c.send(b"HEXISTS nokey f\r\n" + command + b"PING\r\n")
                got.append(b"".join(c.read_reply() for _ in range(3)))
            finally:
                c.close()
        assert (
            got[0]
            == got[1]
            == (b":0\r\n-ERR SYNC and PSYNC are invalid with pending output\r\n+PONG\r\n")
        ), got
