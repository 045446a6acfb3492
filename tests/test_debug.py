"""DEBUG against redis-server, RESP2 and RESP3: the enable-debug-command gate, the
subcommands' replies and errors, digests equal to redis-server's for the same data,
and RELOAD rebuilding the store from storage for real (also across a restart)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from store import Store
from tests.conftest import Differ, ServerProcess, start_temporalstore
from tests.helpers import make_session, run
from tests.resp_client import RawClient

DEBUG_ON = ["--enable-debug-command", "yes"]


# -- the gate ------------------------------------------------------------------------


def test_refused_by_default_exactly_as_redis(diff: Differ) -> None:
    diff.run("""
        DEBUG HELP
        DEBUG SLEEP 0
        DEBUG nosuchthing
        DEBUG
        MULTI
        DEBUG OBJECT x
        SET a 1
        EXEC
    """)


def test_local_allows_loopback_clients() -> None:
    p = start_temporalstore(["--enable-debug-command", "local"])
    try:
        c = RawClient(p.port)
        assert c.call("DEBUG", "SLEEP", "0") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "enable-debug-command") == (
            b"*2\r\n$20\r\nenable-debug-command\r\n$5\r\nlocal\r\n"
        )
        assert c.call("CONFIG", "SET", "enable-debug-command", "no").startswith(
            b"-ERR CONFIG SET failed (possibly related to argument 'enable-debug-command') "
            b"- can't set immutable config"
        )
        c.close()
    finally:
        p.stop()


def test_protected_configs_gate(diff: Differ) -> None:
    # Both servers run with enable-protected-configs no.
    diff.run("""
        CONFIG SET dir somewhere
        CONFIG SET dbfilename x.rdb
        CONFIG SET enable-protected-configs yes
    """)


def test_protected_configs_allowed(tmp_path: object) -> None:
    p = start_temporalstore(["--enable-protected-configs", "yes"])
    try:
        c = RawClient(p.port)
        assert c.call("CONFIG", "SET", "dbfilename", "other.rdb") == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "dbfilename").endswith(b"other.rdb\r\n")
        assert c.call("CONFIG", "SET", "dir", "no-such-dir-for-this-test") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'dir') - "
            b"No such file or directory\r\n"
        )
        assert c.call("CONFIG", "SET", "dir", str(p.workdir)) == b"+OK\r\n"
        assert c.call("CONFIG", "GET", "dir").endswith(str(p.workdir).encode() + b"\r\n")
        c.close()
    finally:
        p.stop()


# -- replies -------------------------------------------------------------------------


def test_help_and_errors(ddiff: Differ) -> None:
    ddiff.run("""
        DEBUG HELP
        DEBUG help extra
        DEBUG nosuchsubcommand
        DEBUG JMAP
        DEBUG OBJECT
        DEBUG OBJECT nokey
        DEBUG DIGEST extra
        DEBUG RELOAD BOGUS
        DEBUG QUICKLIST-PACKED-THRESHOLD 5gb
        DEBUG QUICKLIST-PACKED-THRESHOLD abc
        DEBUG QUICKLIST-PACKED-THRESHOLD 1b
        DEBUG QUICKLIST-PACKED-THRESHOLD 0
        DEBUG ERROR "Some error"
        DEBUG ERROR "two\\nlines"
        DEBUG LOG hello
        DEBUG SET-SKIP-CHECKSUM-VALIDATION 0
        DEBUG AOF-FLUSH-SLEEP 0
        DEBUG REPLYBUFFER PEAK-RESET-TIME never
        DEBUG REPLYBUFFER PEAK-RESET-TIME reset
        DEBUG REPLYBUFFER PEAK-RESET-TIME abc
        DEBUG REPLYBUFFER RESIZING 1
        DEBUG REPLYBUFFER bogus 1
        DEBUG PAUSE-CRON 0
        DEBUG SET-ACTIVE-EXPIRE 1
        DEBUG CLUSTERLINK KILL to abc
        DEBUG DROP-CLUSTER-PACKET-FILTER x
        DEBUG DROP-CLUSTER-PACKET-FILTER -1
        DEBUG CLIENT-EVICTION
        DEBUG MALLCTL no.such.name
        DEBUG MALLCTL no.such.name x
        DEBUG MALLCTL-STR no.such.name
        DEBUG SDSLEN nokey
        DEBUG LISTPACK nokey
        DEBUG QUICKLIST nokey
        DEBUG HTSTATS 99
        DEBUG HTSTATS x
        DEBUG CONFIG-REWRITE-FORCE-ALL
        DEBUG STRINGMATCH-TEST
        DEBUG HTSTATS-KEY nokey
        SET s abc
        RPUSH l a b
        DEBUG LISTPACK s
        DEBUG QUICKLIST s
        DEBUG HTSTATS-KEY l
        SET n 12
        DEBUG SDSLEN n
        DEBUG POPULATE -1
        DEBUG POPULATE x
    """)


@pytest.mark.parametrize(
    "kind",
    [
        "string",
        "integer",
        "double",
        "bignum",
        "null",
        "array",
        "set",
        "map",
        "attrib",
        "true",
        "false",
        "verbatim",
        "BIGNUM",
        "nosuchtype",
    ],
)
def test_protocol(ddiff: Differ, kind: str) -> None:
    ddiff.check("DEBUG", "PROTOCOL", kind)


def test_protocol_push(ddiff: Differ) -> None:
    ref, ours = ddiff.both("DEBUG", "PROTOCOL", "push")
    assert ours == ref
    if ddiff.resp == 3:  # the push, then the real reply
        assert ddiff.ours.read_reply() == ddiff.ref.read_reply()


def test_protocol_from_scripts(ddiff: Differ) -> None:
    ddiff.check("EVAL", "return redis.call('debug', 'protocol', 'bignum')", "0")
    ddiff.check("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")
    try:
        for resp in ("2", "3"):
            for kind in ("bignum", "map", "set", "double", "null", "true", "false", "verbatim"):
                script = f"redis.setresp({resp});return redis.call('debug', 'protocol', '{kind}')"
                ddiff.check("EVAL", script, "0")
            script = f"redis.setresp({resp});return redis.call('debug', 'protocol', 'attrib')"
            ddiff.check("EVAL", script, "0")
    finally:
        ddiff.check("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
    ddiff.check("EVAL", "return redis.call('debug', 'protocol', 'bignum')", "0")


def test_digests_equal_redis(ddiff: Differ) -> None:
    ddiff.run("""
        DEBUG DIGEST
        DEBUG DIGEST-VALUE nokey
        SET s hello
        SET n 12345
        SET big 123456789012345678901234567890
        SET neg -7
        APPEND raw x
        RPUSH l a b 1 2 c
        SADD si 1 2 3 -5
        SADD ss a b c 1
        HSET h f v g 1 empty ""
        ZADD z 1 a 2.5 b -inf c inf d 0 e 1e300 f
        XADD st 1-1 f v
        XADD st 1-2 a b c d
        XADD st 5-0 x ""
        SET ttl v EX 1000
        SELECT 3
        SET other db
        SELECT 0
        DEBUG DIGEST
        DEBUG DIGEST-VALUE s n big neg raw l si ss h z st ttl nokey
        DEBUG DIGEST-VALUE
        CONFIG SET zset-max-ziplist-entries 0
        CONFIG SET hash-max-ziplist-entries 0
        ZADD z2 1 a 2 b
        HSET h2 f v
        CONFIG SET zset-max-ziplist-entries 128
        CONFIG SET hash-max-ziplist-entries 512
        DEBUG DIGEST-VALUE z2 h2
        DEBUG DIGEST
        FLUSHALL
        DEBUG DIGEST
    """)


def test_populate(ddiff: Differ) -> None:
    ddiff.run("""
        DEBUG POPULATE 5
        DEBUG POPULATE 3 p 12
        DEBUG POPULATE 2 q 3
        SET key:0 mine
        DEBUG POPULATE 2
        DBSIZE
        MGET key:0 key:1 key:4 p:0 p:2 q:0 q:1
        DEBUG DIGEST
    """)


def _norm_object(raw: bytes) -> bytes:
    """DEBUG OBJECT without what differs between processes: the address and the LRU
    clock (seconds: the two servers may read it a second apart). A shared integer's
    idle time in Redis is that of the one shared object (any key holding it touches
    it); ours is the key's own."""
    raw = re.sub(rb"at:0x[0-9a-f]+ ", b"at:ADDR ", re.sub(rb"lru:\d+ ", b"lru:N ", raw))
    if b"refcount:2147483647 " in raw:
        raw = re.sub(rb"lru_seconds_idle:\d+", b"lru_seconds_idle:N", raw)
    return raw


def _early_in_a_second() -> None:
    """Wait until the wall clock is early in a second. Both servers' LRU clocks count
    its seconds (redis' cached by its cron, up to 100 ms behind at hz 10): the few
    milliseconds of commands that follow fall in one second of both, so a key's
    lru_seconds_idle reads the same on both (across a tick it read 1 on one, 0 on the
    other)."""
    frac = time.time() % 1
    if not 0.15 <= frac < 0.5:
        time.sleep((1.15 - frac) % 1)


def test_object_line(ddiff: Differ) -> None:
    _early_in_a_second()
    ddiff.run("""
        SET s hello
        SET n 12
        SET big 12345678901
        SET long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        APPEND raw x
        RPUSH l a b c 1 2 300 70000
        SADD si 1 2 3
        SADD ss a b
        HSET h f v g 1
        ZADD z 1 a 2.5 b
    """)
    for key in ("s", "n", "big", "long", "raw", "l", "si", "ss", "h", "z"):
        ddiff.check("DEBUG", "OBJECT", key, normalize=_norm_object)
    ddiff.check("DEBUG", "OBJECT", "nokey")
    # A logically expired key is still found (Redis' dictFind): only the line's shape.
    ddiff.check("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    ddiff.check("SET", "gone", "v", "PX", "1")
    time.sleep(0.05)
    ref, ours = ddiff.both("DEBUG", "OBJECT", "gone")
    assert ours.startswith(b"+Value at:") and ref.startswith(b"+Value at:")
    ddiff.check("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_set_active_expire(ddiff: Differ) -> None:
    ddiff.check("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        ddiff.check("SET", "k", "v", "PX", "50")
        time.sleep(0.5)  # several cron cycles
        ddiff.check("DBSIZE")  # not collected: 1 on both
        ddiff.check("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and ddiff.ours.call("DBSIZE") != b":0\r\n":
            time.sleep(0.05)
        time.sleep(0.3)
        ddiff.check("DBSIZE")  # collected by the cycle on both
    finally:
        ddiff.both("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_sleep_blocks_the_server(ts_dbg: ServerProcess) -> None:
    a, b = RawClient(ts_dbg.port), RawClient(ts_dbg.port)
    try:
        took: list[float] = []

        def ping() -> None:
            time.sleep(0.1)
            t0 = time.monotonic()
            assert b.call("PING") == b"+PONG\r\n"
            took.append(time.monotonic() - t0)

        th = threading.Thread(target=ping)
        t0 = time.monotonic()
        th.start()
        assert a.call("DEBUG", "SLEEP", "0.6") == b"+OK\r\n"
        assert time.monotonic() - t0 >= 0.6
        th.join()
        assert took[0] >= 0.3  # the other client waited for the sleep to end
        assert a.call("DEBUG", "SLEEP", "0") == b"+OK\r\n"
        assert a.call("DEBUG", "SLEEP", "-1") == b"+OK\r\n"
        assert a.call("DEBUG", "SLEEP", "abc") == b"+OK\r\n"
    finally:
        a.close()
        b.close()


def test_change_repl_id(ts_dbg: ServerProcess) -> None:
    c = RawClient(ts_dbg.port)
    try:

        def replid() -> bytes:
            info = c.call("INFO", "replication")
            m = re.search(rb"master_replid:([0-9a-f]{40})", info)
            assert m is not None
            return m.group(1)

        before = replid()
        assert c.call("DEBUG", "CHANGE-REPL-ID") == b"+OK\r\n"
        assert replid() != before
    finally:
        c.close()


# -- RELOAD --------------------------------------------------------------------------


def test_reload_options_and_encodings(ddiff: Differ) -> None:
    # Not compared: NOFLUSH without MERGE over keys (redis-server panics at the first
    # duplicate key) and LOADAOF (redis-server exits when there is no AOF).
    ddiff.run("""
        SET k v
        DEBUG RELOAD NOFLUSH MERGE
        DEBUG RELOAD NOSAVE NOFLUSH MERGE
        DEBUG RELOAD
        DEBUG RELOAD nosave
        GET k
        CONFIG SET zset-max-ziplist-entries 0
        CONFIG SET hash-max-ziplist-entries 0
        CONFIG SET set-max-intset-entries 0
        ZADD z 1 a 2 b
        HSET h f v
        SADD s 1 2
        OBJECT ENCODING z
        OBJECT ENCODING h
        OBJECT ENCODING s
        CONFIG SET zset-max-ziplist-entries 128
        CONFIG SET hash-max-ziplist-entries 512
        CONFIG SET set-max-intset-entries 512
        ZADD z 3 c
        HSET h g w
        SADD s 3
        OBJECT ENCODING z
        OBJECT ENCODING h
        OBJECT ENCODING s
        DEBUG RELOAD
        OBJECT ENCODING z
        OBJECT ENCODING h
        OBJECT ENCODING s
        ZRANGE z 0 -1 WITHSCORES
        GET k
        FLUSHALL
        DEBUG RELOAD NOFLUSH
        FUNCTION LOAD "#!lua name=lib1\\nredis.register_function('f1', function() return 1 end)"
        DEBUG RELOAD NOFLUSH
        DEBUG RELOAD
        FCALL f1 0
        FUNCTION FLUSH
    """)


def test_reload_rebuilds_from_storage(ts_dbg: ServerProcess) -> None:
    """Keys, TTLs, histories, seals and branches survive; the LSN stays; a restart
    after the reload finds the same state."""
    c = RawClient(ts_dbg.port)
    try:
        c.call("FLUSHALL")
        for i in range(5):
            c.call("SET", "hist", f"v{i}")
        c.call("SET", "ttl", "x", "EX", "1000")
        c.call("HSET", "h", "f", "v")
        c.call("RPUSH", "l", "a", "b")
        c.call("XADD", "st", "1-1", "f", "v")
        assert not c.call("TS.SEAL", "before").startswith(b"-")
        assert c.call("TS.BRANCH", "CREATE", "br") == b"+OK\r\n"
        c.call("SELECT", "2")
        c.call("SET", "in2", "yes")
        c.call("SELECT", "0")
        digest = c.call("DEBUG", "DIGEST")
        history = c.call("TS.HISTORY", "hist")
        snapshots = c.call("TS.SNAPSHOTS")
        branches = c.call("TS.BRANCH", "LIST")
        info = c.call("INFO", "persistence")
        lsn = re.search(rb"last_lsn:(\d+)", info)
        assert lsn is not None
        assert c.call("DEBUG", "RELOAD") == b"+OK\r\n"
        assert c.call("DEBUG", "DIGEST") == digest
        assert c.call("TS.HISTORY", "hist") == history
        assert c.call("TS.SNAPSHOTS") == snapshots
        assert c.call("TS.BRANCH", "LIST") == branches
        assert int(c.call("TTL", "ttl")[1:-2]) > 900
        info2 = c.call("INFO", "persistence")
        assert re.search(rb"last_lsn:(\d+)", info2).group(1) == lsn.group(1)  # type: ignore[union-attr]
        # The session still writes into the rebuilt databases (SELECT is kept).
        c.call("SELECT", "2")
        assert c.call("GET", "in2") == b"$3\r\nyes\r\n"
        c.call("SELECT", "0")
        assert c.call("SET", "after", "1") == b"+OK\r\n"
        assert c.call("GET", "after") == b"$1\r\n1\r\n"
        # LOADAOF: no checkpoint, the same rebuild.
        assert c.call("DEBUG", "LOADAOF") == b"+OK\r\n"
        assert c.call("GET", "after") == b"$1\r\n1\r\n"
        assert c.call("TS.HISTORY", "hist") == history
    finally:
        c.close()


def test_reload_refused_inside_exec_and_scripts(ts_dbg: ServerProcess) -> None:
    c = RawClient(ts_dbg.port)
    try:
        c.call("MULTI")
        c.call("SET", "inexec", "1")
        c.call("DEBUG", "RELOAD")
        assert c.call("EXEC") == (
            b"*2\r\n+OK\r\n-ERR DEBUG RELOAD and LOADAOF cannot run inside MULTI/EXEC "
            b"or a script here\r\n"
        )
        assert c.call("GET", "inexec") == b"$1\r\n1\r\n"
        c.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")
        got = c.call("EVAL", "return redis.call('debug', 'loadaof')", "0")
        assert got.startswith(b"-ERR DEBUG RELOAD and LOADAOF cannot run inside")
        c.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
    finally:
        c.close()


def test_reload_watch_and_loading(ts_dbg: ServerProcess) -> None:
    a, b = RawClient(ts_dbg.port), RawClient(ts_dbg.port)
    try:
        a.call("SET", "w", "1")
        assert a.call("WATCH", "w") == b"+OK\r\n"
        assert b.call("DEBUG", "RELOAD") == b"+OK\r\n"
        a.call("MULTI")
        a.call("SET", "w", "2")
        assert a.call("EXEC") == b"*-1\r\n"  # the reload emptied and refilled it
        assert a.call("GET", "w") == b"$1\r\n1\r\n"
    finally:
        a.close()
        b.close()


def test_reload_survives_restart() -> None:
    p = start_temporalstore(DEBUG_ON)
    try:
        c = RawClient(p.port)
        c.call("SET", "a", "1")
        c.call("ZADD", "z", "1", "x")
        assert c.call("DEBUG", "RELOAD") == b"+OK\r\n"
        c.call("SET", "b", "2")
        digest = c.call("DEBUG", "DIGEST")
        c.close()
        p.stop()
        q = start_temporalstore(DEBUG_ON, workdir=p.workdir)
        try:
            c = RawClient(q.port)
            assert c.call("DEBUG", "DIGEST") == digest
            assert c.call("MGET", "a", "b") == b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
            c.close()
        finally:
            q.stop()
    finally:
        p.stop()


def test_other_clients_never_see_a_half_built_store(ts_dbg: ServerProcess) -> None:
    """While the store is dropped and rebuilt, another client's reads are answered
    -LOADING or wait: never a missing key."""
    c = RawClient(ts_dbg.port)
    other = RawClient(ts_dbg.port)
    try:
        c.call("FLUSHALL")
        c.call("DEBUG", "POPULATE", "200000")
        c.send(b"*2\r\n$5\r\nDEBUG\r\n$6\r\nRELOAD\r\n")
        replies = []
        done = False
        c.sock.settimeout(0.001)
        deadline = time.monotonic() + 60
        while not done and time.monotonic() < deadline:
            replies.append(other.call("GET", "key:199999"))
            try:
                c._fill()
                done = b"\r\n" in c.buf
            except TimeoutError:
                pass
        c.sock.settimeout(30)
        assert c.read_reply() == b"+OK\r\n"
        assert replies and all(
            r == b"$12\r\nvalue:199999\r\n" or r.startswith(b"-LOADING") for r in replies
        ), {r[:40] for r in replies}
        assert other.call("GET", "key:199999") == b"$12\r\nvalue:199999\r\n"
        c.call("FLUSHALL")
    finally:
        c.close()
        other.close()


def test_store_reset_and_undo() -> None:
    """Store.reset empties the store in place (sessions keep their Database objects);
    the function it returns puts everything back."""
    s, _sink = make_session()
    run(s, "SET", "a", "1")
    run(s, "HSET", "h", "f", "v")
    run(s, "EXPIRE", "a", "100")
    store = s.store
    dbs = list(store.dbs)
    lsn = store.lsn
    undo = store.reset()
    assert store.dbs == dbs and all(a is b for a, b in zip(store.dbs, dbs, strict=True))
    assert store.lsn == 0 and not store.dbs[0].data and not store.dbs[0].expires
    undo()
    assert store.lsn == lsn
    assert run(s, "GET", "a") == b"1" and run(s, "TTL", "a") > 90
    assert run(s, "HGET", "h", "f") == b"v"


def test_reload_without_storage_and_failed_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without storage DEBUG RELOAD round-trips a checkpoint image in memory; a rebuild
    that fails answers an error and leaves the data as it was."""
    s, _sink = make_session()
    s.server.config.params["enable-debug-command"] = "yes"
    run(s, "SET", "a", "1")
    run(s, "RPUSH", "l", "x", "y")
    digest = run(s, "DEBUG", "DIGEST")
    assert run(s, "DEBUG", "RELOAD") == b"OK"
    assert run(s, "DEBUG", "DIGEST") == digest
    assert run(s, "LRANGE", "l", "0", "-1") == [b"x", b"y"]

    def broken(self: object, head: object, items: object) -> int:
        raise ValueError("unreadable image")

    monkeypatch.setattr(Store, "import_image", broken)
    assert run(s, "DEBUG", "RELOAD") == b"ERR Error trying to load the RDB dump"
    assert not s.server.loading
    assert run(s, "DEBUG", "DIGEST") == digest
    assert run(s, "GET", "a") == b"1"


def test_reload_with_storage_down_keeps_the_data() -> None:
    """Storage unreachable: RELOAD's checkpoint fails (-ERR, as a failed save), and
    RELOAD NOSAVE's rebuild fails after the drop (Redis' load error): either way the
    data in memory is what it was and the server goes on."""
    p = start_temporalstore([*DEBUG_ON, "--fault-injection", "yes"])
    try:
        c = RawClient(p.port)
        c.call("SET", "a", "1")
        c.call("ZADD", "z", "1", "m")
        digest = c.call("DEBUG", "DIGEST")
        assert c.call("TS.WAITDURABLE", "5000").startswith(b":")
        assert c.call("TS.FAULT", "OUTAGE", "ON") == b"+OK\r\n"
        assert c.call("DEBUG", "RELOAD") == b"-ERR\r\n"
        assert c.call("DEBUG", "RELOAD", "NOSAVE") == b"-ERR Error trying to load the RDB dump\r\n"
        assert c.call("DEBUG", "DIGEST") == digest
        assert c.call("GET", "a") == b"$1\r\n1\r\n"
        assert c.call("TS.FAULT", "OUTAGE", "OFF") == b"+OK\r\n"
        assert c.call("DEBUG", "RELOAD") == b"+OK\r\n"
        assert c.call("DEBUG", "DIGEST") == digest
        c.close()
    finally:
        p.stop()


def test_object_address_follows_redis_objects(ddiff: Differ) -> None:
    """DEBUG OBJECT's at: cannot be redis-server's pointer, but it keeps the identities
    Redis' objects have, on both servers: INCR changes an integer in place (same
    address) unless the result is a shared small integer, and every key holding the
    same shared integer shows the same object."""

    def addr(c: RawClient, key: str) -> bytes:
        line = c.call("DEBUG", "OBJECT", key)
        m = re.search(rb"at:(0x[0-9a-f]+) ", line)
        assert m is not None, line
        return m.group(1)

    def same_on_both(*steps: tuple[str, ...]) -> list[bool]:
        seen = []
        for c in (ddiff.ref, ddiff.ours):
            c.call("DEL", "foo", "bar")
            before = None
            kept = []
            for step in steps:
                c.call(*step)
                now = addr(c, "foo")
                if before is not None:
                    kept.append(now == before)
                before = now
            kept.append(addr(c, "bar") == before if c.call("EXISTS", "bar") == b":1\r\n" else False)
            seen.append(kept)
        assert seen[0] == seen[1], seen
        return seen[0]

    kept = same_on_both(
        ("SET", "foo", "20000"),
        ("INCR", "foo"),
        ("INCRBY", "foo", "-30000"),  # -9999: still in place
        ("DECR", "foo"),
    )
    assert kept == [True, True, True, False]
    # INCRBYFLOAT writes a string Redis does not change in place: the INCR after it
    # makes a new object, and the next one changes that in place again.
    kept = same_on_both(
        ("SET", "foo", "20000"),
        ("INCR", "foo"),
        ("INCRBYFLOAT", "foo", "1"),
        ("INCR", "foo"),
        ("INCR", "foo"),
    )
    assert kept == [True, False, False, True, False]
    kept = same_on_both(("SET", "foo", "7"), ("INCR", "foo"), ("SET", "bar", "8"))
    assert kept == [False, True, True]  # 7 and 8 are shared objects, whoever holds them
    ddiff.check("OBJECT", "REFCOUNT", "foo")


def test_object_address_of_counters_incremented_in_turn(ddiff: Differ) -> None:
    """Counters in two databases changed in place in turn, DEBUG OBJECT read only now
    and then (an in-place INCR's bookkeeping is held until another key's INCR or a
    reader needs it): each keeps its address, on both servers, until INCRBYFLOAT."""

    def addr(c: RawClient, key: str) -> bytes:
        m = re.search(rb"at:(0x[0-9a-f]+) ", c.call("DEBUG", "OBJECT", key))
        assert m is not None
        return m.group(1)

    for c in (ddiff.ref, ddiff.ours):
        c.call("SELECT", "1")
        c.call("SET", "foo", "40000")
        in_1 = addr(c, "foo")
        c.call("SELECT", "0")
        c.call("SET", "foo", "20000")
        c.call("SET", "bar", "30000")
        foo, bar = addr(c, "foo"), addr(c, "bar")
        for key in ("foo", "foo", "bar", "foo", "bar", "bar"):
            c.call("INCR", key)
        c.call("SELECT", "1")
        c.call("INCR", "foo")
        c.call("INCR", "foo")
        c.call("SELECT", "0")
        c.call("INCR", "foo")
        assert (addr(c, "foo"), addr(c, "bar")) == (foo, bar)
        c.call("SELECT", "1")
        assert addr(c, "foo") == in_1
        c.call("SELECT", "0")
        c.call("INCRBYFLOAT", "foo", "1")
        c.call("INCR", "foo")
        c.call("INCR", "bar")
        assert addr(c, "foo") != foo and addr(c, "bar") == bar
        assert c.call("MGET", "foo", "bar") == b"*2\r\n$5\r\n20006\r\n$5\r\n30004\r\n"
