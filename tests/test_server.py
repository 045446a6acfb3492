"""Server commands against redis-server, RESP2 and RESP3: keyspace-wide commands, CONFIG,
COMMAND (data generated from redis-server itself), INFO's layout, SHUTDOWN."""

from __future__ import annotations

import re
import time
from typing import Any

import commands.families  # noqa: F401  (the command table the server under test has)
from commands.dispatch import DISPATCHER
from commands.introspection import top_commands
from commands.registry import Command
from commands.session import ServerState, Session
from store import Store
from tests.conftest import Differ, ServerProcess, start_redis, start_temporalstore
from tests.resp_client import RawClient, parse

# -- keyspace-wide commands --------------------------------------------------------------------


def test_dbsize_flush(diff: Differ) -> None:
    diff.run("""
        DBSIZE
        SET a 1
        SET b 2
        SELECT 1
        SET c 3
        DBSIZE
        SELECT 0
        DBSIZE
        DBSIZE x
        FLUSHDB x
        FLUSHDB async async
        FLUSHDB ASYNC
        DBSIZE
        SELECT 1
        DBSIZE
        SET d 4
        FLUSHALL foo
        FLUSHALL SYNC x
        FLUSHALL sync
        DBSIZE
        SELECT 0
        SET e 5 PX 100000
        FLUSHDB
        DBSIZE
        FLUSHDB
        FLUSHALL
        FLUSHALL ASYNC
    """)


def test_swapdb(diff: Differ) -> None:
    diff.run("""
        SET k v0
        SELECT 1
        SET k v1
        RPUSH l a b
        SELECT 0
        SWAPDB 0 1
        GET k
        LRANGE l 0 -1
        SELECT 1
        GET k
        SWAPDB 1 1
        GET k
        SWAPDB 1 15
        DBSIZE
        SWAPDB 15 1
        DBSIZE
        SWAPDB 0
        SWAPDB 0 1 2
        SWAPDB a 1
        SWAPDB 1 a
        SWAPDB a b
        SWAPDB 0 16
        SWAPDB 16 0
        SWAPDB -1 0
        SWAPDB 0 99999999999
        SWAPDB 1.0 0
    """)


def test_time(diff: Differ) -> None:
    ref, ours = diff.both("TIME")
    for raw in (ref, ours):
        kind, items = parse(raw)
        assert kind == "*" and [k for k, _ in items] == ["$", "$"]
    r_sec, o_sec = int(parse(ref)[1][0][1]), int(parse(ours)[1][0][1])
    assert abs(r_sec - o_sec) <= 2 and 0 <= int(parse(ours)[1][1][1]) < 1_000_000
    diff.run("TIME x")


def test_lastsave_save(diff: Differ) -> None:
    ref, ours = diff.both("LASTSAVE")
    assert ref.startswith(b":") and ours.startswith(b":")
    assert abs(int(ours[1:]) - time.time()) < 3600
    diff.run("""
        SAVE
        SAVE x
        LASTSAVE x
        BGSAVE x
        BGSAVE a b
        MULTI
        SAVE
        EXEC
    """)
    assert abs(int(diff.ours.call("LASTSAVE")[1:]) - time.time()) <= 2


def test_bgsave(ts_server: ServerProcess) -> None:
    """Not against redis-server: its fork would race the other tests' SAVE."""
    c = RawClient(ts_server.port)
    try:
        assert c.call("BGSAVE") == b"+Background saving started\r\n"
        assert c.call("BGSAVE", "SCHEDULE") == b"+Background saving started\r\n"
        assert b"rdb_last_bgsave_status:ok\r\n" in c.call("INFO", "persistence")
    finally:
        c.close()


def test_debug_refused(diff: Differ) -> None:
    diff.run("""
        DEBUG
        DEBUG SLEEP 0
        DEBUG OBJECT k
        DEBUG foo bar
    """)


def test_shutdown_errors(diff: Differ) -> None:
    diff.run("""
        SHUTDOWN ABORT
        SHUTDOWN abort
        SHUTDOWN foo
        SHUTDOWN SAVE NOSAVE
        SHUTDOWN NOSAVE SAVE NOW
        SHUTDOWN ABORT NOW
        SHUTDOWN NOSAVE ABORT
        SHUTDOWN FORCE ABORT
        MULTI
        SHUTDOWN
        EXEC
    """)


def test_shutdown_stops_the_server() -> None:
    for proc in (start_redis(), start_temporalstore()):
        c = RawClient(proc.port)
        try:
            c.send(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
            assert c.read_closed() and c.buf == b""  # no reply, the connection just ends
            assert proc.proc.wait(20) == 0
        finally:
            c.close()
            proc.stop()


# -- CONFIG -------------------------------------------------------------------------------------


def test_config_get(diff: Differ) -> None:
    diff.run("""
        CONFIG GET maxmemory
        CONFIG GET MAXMEMORY
        CONFIG GET maxmemory maxmemory
        CONFIG GET maxmemory MaxMemory
        CONFIG GET nosuch
        CONFIG GET nosuch timeout
        CONFIG GET timeout
        CONFIG GET appendonly
        CONFIG GET maxmemory-policy
        CONFIG GET zset-max-ziplist-entries
        CONFIG GET set-max-intset-entries
        CONFIG GET notify-keyspace-events
        CONFIG GET slowlog-max-len
        CONFIG GET databases
        CONFIG GET watchdog-period
        CONFIG GET requirepass
        ~CONFIG GET maxmemory*
        ~CONFIG GET *max-intset*
        ~CONFIG GET slowlog-* timeout
        ~CONFIG GET lazyfree-lazy-*
        ~CONFIG GET watchdog*
        ~CONFIG GET zset-max-*
        ~CONFIG GET [tm]imeout
        ~CONFIG GET ?imeout
        CONFIG GET
        CONFIG
        CONFIG FOO
        CONFIG HELP
        CONFIG help x
        CONFIG REWRITE
        CONFIG REWRITE x
        CONFIG RESETSTAT x
    """)


def test_config_set(diff: Differ) -> None:
    try:
        diff.run("""
            CONFIG SET maxmemory 1gb
            CONFIG GET maxmemory
            CONFIG SET maxmemory 10MB maxmemory-policy ALLKEYS-LRU
            CONFIG GET maxmemory
            CONFIG GET maxmemory-policy
            CONFIG SET maxmemory 100k
            CONFIG GET maxmemory
            CONFIG SET maxmemory 5B
            CONFIG GET maxmemory
            CONFIG SET maxmemory-policy foo
            CONFIG SET maxmemory abc
            CONFIG SET maxmemory -1
            CONFIG SET maxmemory 1.5gb
            CONFIG SET foo bar
            CONFIG SET foo bar maxmemory 1
            CONFIG SET maxmemory 1 foo bar
            CONFIG SET maxmemory 1 MAXMEMORY 2
            CONFIG SET maxmemory 1 timeout -1
            CONFIG SET timeout -1 foo bar
            CONFIG GET maxmemory
            CONFIG SET daemonize yes
            CONFIG SET databases 4
            CONFIG SET dir /tmp
            CONFIG SET dbfilename x.rdb
            CONFIG SET timeout abc
            CONFIG SET timeout 1.5
            CONFIG SET timeout 99999999999
            CONFIG SET timeout 10
            CONFIG GET timeout
            CONFIG SET a b c
            CONFIG SET a
            CONFIG SET appendfsync ALWAYS
            CONFIG GET appendfsync
            CONFIG SET appendfsync sometimes
            CONFIG SET lazyfree-lazy-eviction maybe
            CONFIG SET lazyfree-lazy-eviction YES
            CONFIG GET lazyfree-lazy-eviction
            CONFIG SET maxmemory-clients 10%
            CONFIG GET maxmemory-clients
            CONFIG SET maxmemory-clients 200%
            CONFIG SET maxmemory-clients 1mb
            CONFIG GET maxmemory-clients
            CONFIG SET maxmemory-clients x
            CONFIG SET maxclients 0
            CONFIG SET slowlog-log-slower-than -2
            CONFIG SET slowlog-log-slower-than -1
            CONFIG GET slowlog-log-slower-than
            CONFIG SET list-max-listpack-size 9999999999
            CONFIG SET zset-max-ziplist-entries 64
            CONFIG GET zset-max-listpack-entries
            CONFIG GET zset-max-ziplist-entries
            CONFIG SET zset-max-listpack-entries 128
            CONFIG SET notify-keyspace-events KEA
            CONFIG GET notify-keyspace-events
            CONFIG SET notify-keyspace-events xgE$
            CONFIG GET notify-keyspace-events
            CONFIG SET notify-keyspace-events Kg$lshzxetdn
            CONFIG GET notify-keyspace-events
            CONFIG SET notify-keyspace-events Q
            CONFIG SET notify-keyspace-events ""
            CONFIG GET notify-keyspace-events
            CONFIG SET shutdown-on-sigint "now SAVE"
            CONFIG GET shutdown-on-sigint
            CONFIG SET shutdown-on-sigint "save nosave"
            CONFIG SET shutdown-on-sigint bogus
            CONFIG SET shutdown-on-sigint default
            CONFIG GET shutdown-on-sigint
            CONFIG SET save "100 10 200"
            CONFIG SET save "100 -1"
            CONFIG SET save "0 1"
            CONFIG SET save "abc 1"
            CONFIG SET save "3600 1 300 100"
            CONFIG GET save
            CONFIG SET save ""
            CONFIG GET save
            CONFIG SET unixsocketperm 700
            CONFIG SET requirepass ""
            CONFIG GET requirepass
            CONFIG RESETSTAT
        """)
    finally:
        for name, value in [
            ("maxmemory", "0"),
            ("maxmemory-policy", "noeviction"),
            ("timeout", "0"),
            ("appendfsync", "everysec"),
            ("lazyfree-lazy-eviction", "no"),
            ("maxmemory-clients", "0"),
            ("slowlog-log-slower-than", "10000"),
            ("zset-max-listpack-entries", "128"),
            ("notify-keyspace-events", ""),
            ("shutdown-on-sigint", "default"),
            ("save", ""),
        ]:
            diff.both("CONFIG", "SET", name, value)


# -- COMMAND -----------------------------------------------------------------------------------

Tagged = Any
NULLS = (("null",), ("_", b""))


def _name(entry: Tagged) -> bytes:
    name: bytes = entry[1][0][1]
    return name


def _info_entry(entry: Tagged, keep: set[bytes]) -> Tagged:
    """A COMMAND INFO entry with its subcommands restricted to `keep`, sorted by name
    (Redis lists them in hash-table order)."""
    if entry in NULLS:
        return ("null",)
    kind, items = entry
    subs = items[9]
    if subs[0] == "*":
        chosen = sorted((s for s in subs[1] if _name(s) in keep), key=_name)
        subs = ("*", [_info_entry(s, keep) for s in chosen])
    return (kind, [*items[:9], subs])


def _docs_map(doc: Tagged, keep: set[bytes]) -> dict[bytes, Tagged]:
    """COMMAND DOCS as {name: doc}, each doc with its subcommands restricted and sorted."""
    kind, items = doc
    assert kind in ("%", "*"), doc
    out = {}
    for k, v in zip(items[0::2], items[1::2], strict=True):
        if k[1] in keep:
            out[k[1]] = _one_doc(v, keep)
    return out


def _one_doc(doc: Tagged, keep: set[bytes]) -> Tagged:
    kind, items = doc
    fields = []
    for k, v in zip(items[0::2], items[1::2], strict=True):
        if k[1] == b"subcommands":
            v = (v[0], sorted(_docs_map(v, keep).items()))
        fields.append((k, v))
    return (kind, fields)


def _ours() -> list[Command]:
    return top_commands()


def _all_ours() -> list[Command]:
    out = []
    for c in _ours():
        out.append(c)
        if c.subcommands is not None:
            out.extend({s.name: s for s in c.subcommands.values()}.values())
    return out


def _our_own_names() -> set[bytes]:
    """Commands a Redis 7.0 server does not have: WAITAOF (7.2), our TS.* verbs, and
    SENTINEL (Redis has it in sentinel mode only; every node of a group answers it)."""
    return {
        c.name.encode()
        for c in _all_ours()
        if c.name == "waitaof" or c.name.startswith(("ts.", "sentinel"))
    }


def _known_to_redis(diff: Differ) -> set[bytes]:
    """Our full command names (subcommands too) that Redis 7.0 also has."""
    names = [c.name for c in _all_ours()]
    raw = diff.ref.call("COMMAND", "INFO", *names)
    entries = parse(raw)[1]
    return {n.encode() for n, e in zip(names, entries, strict=True) if e not in NULLS}


def test_command_count_and_list(diff: Differ) -> None:
    ours = _ours()
    assert diff.ours.call("COMMAND", "COUNT") == b":%d\r\n" % len(ours)
    assert len({c.name for c in ours}) == len(ours)
    listed = parse(diff.ours.call("COMMAND", "LIST"))[1]
    assert sorted(x[1] for x in listed) == sorted(c.name.encode() for c in _all_ours())
    keep = _known_to_redis(diff)
    for args in [
        ("FILTERBY", "PATTERN", "client|*"),
        ("FILTERBY", "PATTERN", "*GET*"),
        ("FILTERBY", "ACLCAT", "string"),
        ("FILTERBY", "ACLCAT", "Admin"),
        ("FILTERBY", "ACLCAT", "nosuch"),
        ("FILTERBY", "MODULE", "nosuch"),
    ]:
        ref, ours_raw = diff.both("COMMAND", "LIST", *args)
        r = sorted(x[1] for x in parse(ref)[1] if x[1] in keep)
        o = sorted(x[1] for x in parse(ours_raw)[1] if x[1] in keep)
        assert r == o, args
    diff.run("""
        COMMAND LIST FILTERBY
        COMMAND LIST FILTERBY pattern
        COMMAND LIST FILTERBY foo bar
        COMMAND LIST foo
        COMMAND LIST FILTERBY pattern a b
        COMMAND LIST FILTERBY PATTERN a FILTERBY PATTERN get
        COMMAND COUNT x
        COMMAND FOO
        COMMAND HELP
        COMMAND help x
    """)


def test_command_info_matches_redis(diff: Differ) -> None:
    """COMMAND INFO of every command we have equals redis-server's, restricted to the
    subcommands we have."""
    keep = _known_to_redis(diff)
    names = [c.name for c in _ours()] + ["client|list", "CONFIG|GET", "nosuch", "get|x", "a|b|c"]
    ref, ours = diff.both("COMMAND", "INFO", *names)
    r_entries, o_entries = parse(ref)[1], parse(ours)[1]
    assert len(r_entries) == len(o_entries) == len(names)
    for name, r, o in zip(names, r_entries, o_entries, strict=True):
        if r in NULLS and name.encode() in _our_own_names():
            assert o not in NULLS, name  # ours (WAITAOF, TS.*): described from our table
            continue
        assert _info_entry(o, keep) == _info_entry(r, keep), name
    ref, ours = diff.both("COMMAND")
    o_all = {_name(e): _info_entry(e, keep) for e in parse(ours)[1]}
    assert len(o_all) == len(_ours())
    r_all = {_name(e): _info_entry(e, keep) for e in parse(ref)[1] if _name(e) in o_all}
    assert {k: v for k, v in o_all.items() if k in keep} == r_all
    assert parse(diff.ours.call("COMMAND", "INFO"))[1] == parse(ours)[1]
    diff.run("""
        COMMAND INFO get set nosuch
        COMMAND INFO GET get
        COMMAND INFO client|list client|nosuch client|list|x
    """)


def test_command_docs_match_redis(diff: Differ) -> None:
    keep = _known_to_redis(diff)
    names = [c.name for c in _ours()] + ["client|list", "nosuch", "config|get"]
    ref, ours = diff.both("COMMAND", "DOCS", *names)
    assert _docs_map(parse(ours), keep) == _docs_map(parse(ref), keep)
    ref, ours = diff.both("COMMAND", "DOCS")
    o_all = _docs_map(parse(ours), keep)
    assert len(parse(ours)[1]) == 2 * len(_ours())
    assert o_all == {k: v for k, v in _docs_map(parse(ref), keep).items() if k in o_all}
    diff.run("""
        COMMAND DOCS get
        COMMAND DOCS get nosuch set
        COMMAND DOCS get GET
        COMMAND DOCS nosuch
        COMMAND DOCS client|list
    """)


def test_commands_redis_lacks_are_described(diff: Differ) -> None:
    known = _known_to_redis(diff)
    missing = [c for c in _all_ours() if c.name.encode() not in known]
    assert missing  # CLIENT SETINFO at least (Redis 7.2)
    for c in missing:
        (entry,) = parse(diff.ours.call("COMMAND", "INFO", c.name))[1]
        assert entry[0] == "*" and _name(entry) == c.name.encode()
        assert entry[1][1] == (":", str(c.arity).encode())
        docs = parse(diff.ours.call("COMMAND", "DOCS", c.name))
        assert docs[1][0][1] == c.name.encode()


def test_command_table_matches_redis(redis_ref: ServerProcess) -> None:
    """Every command we declare has Redis' arity, key positions and flags."""
    ref = RawClient(redis_ref.port)
    try:
        mismatches = []
        hidden = {b"movablekeys", b"module", b"asking"}  # computed or not ours to declare
        from commands.introspection import FLAG_NAMES

        for c in _all_ours():
            (entry,) = parse(ref.call("COMMAND", "INFO", c.name))[1]
            if entry in NULLS:
                continue  # not in Redis 7.0 (CLIENT SETINFO is 7.2)
            items = entry[1]
            arity, first, last, step = (int(items[i][1]) for i in (1, 3, 4, 5))
            if (arity, first, last, step) != (c.arity, c.first_key, c.last_key, c.step):
                mismatches.append((c.name, (arity, first, last, step)))
            flags = {f[1] for f in items[2][1]} - hidden
            declared = {n.encode() for f, n in FLAG_NAMES if c.flags & f}
            if flags != declared:
                mismatches.append((c.name, sorted(flags ^ declared)))
        assert not mismatches
    finally:
        ref.close()


def test_command_getkeys(diff: Differ) -> None:
    ours = {c.name for c in _all_ours()}
    lines = [
        "get k",
        "set k v",
        "set k v GET",
        "set k v EX 10 get",
        "mset a 1 b 2",
        "mset a 1 b",
        "mget a b c",
        "del a b",
        "rename a b",
        "getex k",
        "lmove a b LEFT RIGHT",
        "lmpop 2 a b LEFT",
        "lmpop 0 a LEFT",
        "lmpop x a LEFT",
        "lmpop 3 a b LEFT",
        "blmpop 0 2 a b LEFT",
        "zunionstore d 2 a b",
        "zunionstore d 0 a",
        "zunionstore d x a b",
        "zunionstore d 3 a b",
        "zunionstore d 2x a b",
        "zunion 2 a b",
        "zinter 1 a WEIGHTS 2",
        "zdiff 2 a b",
        "zdiffstore d 1 a",
        "zintercard 2 a b LIMIT 1",
        "sintercard 2 a b",
        "zmpop 1 a MIN",
        "bzmpop 0 1 a MIN",
        "zrangestore d s 0 -1",
        "xread STREAMS a b 0 0",
        "xread COUNT 2 STREAMS a 0",
        "xread STREAMS a b 0",
        "blpop a b 0",
        "object encoding k",
        "object help",
        "client list",
        "config get x",
        "ping x",
        "sinterstore d a b",
        "smove a b m",
        "copy a b",
        "publish ch m",
        "subscribe ch",
        "exists a b",
    ]
    script = ["COMMAND GETKEYS " + line for line in lines if line.split()[0] in ours]
    script += ["COMMAND GETKEYSANDFLAGS " + line for line in lines if line.split()[0] in ours]
    assert len(script) > 60
    diff.run("\n".join(script))
    diff.run("""
        COMMAND GETKEYS
        COMMAND GETKEYS get
        COMMAND GETKEYS nosuch a
        COMMAND GETKEYS get a b
        COMMAND GETKEYS GET a
        COMMAND GETKEYSANDFLAGS get
        COMMAND GETKEYSANDFLAGS nosuch x
    """)


# -- INFO ---------------------------------------------------------------------------------------


def _sections(raw: bytes) -> list[tuple[str, list[str]]]:
    """INFO as [(header, [field names])], checking the layout on the way."""
    kind, value = parse(raw)
    text = value[4:].decode() if kind == "=" else value.decode()
    if not text:
        return []
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", "")
    out = []
    for block in text[:-2].split("\r\n\r\n"):
        lines = block.split("\r\n")
        assert lines[0].startswith("# "), block
        names = [re.sub(r":.*", "", line) for line in lines[1:]]
        assert all(":" in line for line in lines[1:]), block
        out.append((lines[0], names))
    return out


# Sections whose lines depend on counters the dispatcher does not keep yet.
_COUNTER_SECTIONS = {"# Commandstats", "# Errorstats", "# Latencystats"}


# Our durable stream's fields, appended to Redis' own in INFO persistence.
_DURABILITY_FIELDS = {
    "durability",
    "storage",
    "writer_epoch",
    "last_lsn",
    "durable_lsn",
    "unflushed_bytes",
    "flush_lag_ms",
    "segments_written",
    "records_written",
    "bytes_written_raw",
    "bytes_written_compressed",
    "object_puts",
    "object_put_failures",
    "puts_in_flight",
    "puts_in_flight_limit",
    "puts_in_flight_lowered",
    "last_flush_status",
    "fenced",
    "last_checkpoint_lsn",
    "last_checkpoint_age_s",
    "last_checkpoint_status",
    "checkpoints_written",
    "checkpoint_in_progress",
    "log_bytes_since_checkpoint",
    "replay_records",
    "replay_segments",
    "replay_seconds",
    "object_requests_put",
    "object_requests_get",
    "object_requests_list",
    "object_requests_delete",
    "object_request_errors",
    "s3_put_cost_per_1000",
    "s3_put_cost_estimate_usd",
}


def _comparable(sections: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    return [
        (h, [] if h in _COUNTER_SECTIONS else [n for n in f if n not in _DURABILITY_FIELDS])
        for h, f in sections
    ]


def test_info_layout(diff: Differ) -> None:
    diff.run("""
        SET a 1
        SET b 2 EX 1000
        SELECT 3
        SET c 3
        INFO nosuch
        INFO cluster
        INFO modules
        INFO module_list Cluster
    """)
    # Redis estimates avg_ttl by sampling in its cron: 0 until the cron has run (so the
    # reply's length line may differ with it too).
    for args in [
        ("keyspace",),
        ("KEYSPACE",),
        ("cluster", "keyspace", "cluster"),
        ("Modules", "Cluster", "keyspace"),
    ]:
        diff.check(
            "INFO",
            *args,
            normalize=lambda r: re.sub(rb"avg_ttl=\d+", b"avg_ttl=", r.partition(b"\r\n")[2]),
        )
    for args in [
        (),
        ("default",),
        ("all",),
        ("ALL",),
        ("server",),
        ("Server", "CLIENTS", "memory"),
        ("keyspace", "server"),
        ("persistence", "stats", "replication", "cpu"),
        ("default", "commandstats"),
        ("all", "server"),
        ("errorstats", "latencystats"),
    ]:
        ref, ours = diff.both("INFO", *args)
        assert _comparable(_sections(ours)) == _comparable(_sections(ref)), args
    ref, ours = diff.both("INFO", "everything")
    r, o = _comparable(_sections(ref)), _comparable(_sections(ours))
    assert o[:-2] == r and [o[-2][0], o[-1][0]] == ["# TemporalStore", "# History"]


def test_info_values(diff: Differ, ts_server: ServerProcess) -> None:
    diff.ours.call("SET", "k", "v")
    text = parse(diff.ours.call("INFO", "everything"))[1]
    text = text[4:].decode() if diff.resp == 3 else text.decode()
    info = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
    assert info["redis_version"] == "7.0.15" and info["redis_mode"] == "standalone"
    assert info["tcp_port"] == str(ts_server.port)
    assert info["process_id"] == str(ts_server.proc.pid)
    assert int(info["connected_clients"]) >= 1 and info["role"] == "master"
    assert int(info["used_memory"]) > 1_000_000 and info["maxmemory_policy"] == "noeviction"
    assert int(info["total_commands_processed"]) >= 2
    assert info["db0"].startswith("keys=1,expires=0,")
    assert int(info["lsn"]) >= 1 and info["history_policy"] == "versions:64"
    assert float(info["used_cpu_user"]) > 0
    for args in [(), ("all",), ("default",)]:
        assert b"# TemporalStore" not in parse(diff.ours.call("INFO", *args))[1]
    only = parse(diff.ours.call("INFO", "TemporalStore"))[1]
    assert only.split(b"\r\n")[0].endswith(b"# TemporalStore")
    history = parse(diff.ours.call("INFO", "history"))[1]
    assert history.split(b"\r\n")[0].endswith(b"# History")
    assert b"\r\nhistory_bytes:" in history and b"\r\nmax_pinned_history:0\r\n" in history


# -- per-server state -----------------------------------------------------------------------


def test_two_servers_in_one_process_share_no_state() -> None:
    """LASTSAVE/INFO counters, SCAN's snapshots and SSCAN's member orders live on each
    `ServerState`, not in module-level tables."""
    a, b = Session(ServerState(Store(2))), Session(ServerState(Store(2)))

    def call(s: Session, *args: str) -> Any:
        return DISPATCHER.execute(s, [x.encode() for x in args])

    for s in (a, b):
        for i in range(20):
            call(s, "SET", f"k{i}", "v")
        call(s, "SADD", "big", *(f"m{i}" for i in range(300)))
    call(a, "SAVE")
    assert b"rdb_saves:1\r\n" in call(a, "INFO", "persistence")
    assert b"rdb_saves:0\r\n" in call(b, "INFO", "persistence")
    assert a.server.replid != b.server.replid
    call(a, "SCAN", "0", "COUNT", "5")
    call(a, "SSCAN", "big", "0", "COUNT", "5")
    assert set(a.server.scan_snapshots) == {a.db}
    assert len(a.server.set_scan_orders) == 1
    assert not b.server.scan_snapshots
    assert not b.server.set_scan_orders
    call(a, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    assert call(b, "CONFIG", "GET", "maxmemory-policy") == {b"maxmemory-policy": b"noeviction"}
