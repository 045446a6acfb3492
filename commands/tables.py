"""TS.TABLE: tables own every key under "<namespace>:<table>:" and give them their own
durability, history retention and full-copy frequency. Keys outside any table
belong to the default table, set by the server flags (--durability, --history).

TS.TABLE CREATE <namespace>:<table> [DURABILITY ASYNC|SYNC] [RETAIN ALL|VERSIONS n|MS ms]
                [SNAPSHOT-EVERY n] [MAXPINNED bytes]
TS.TABLE ALTER <namespace>:<table> [the same options]   changes only what is given
TS.TABLE INFO <namespace>:<table>    policy, keys, versions held in memory, durable LSN,
                                     flush lag
TS.TABLE LIST                        every table and its policy
TS.TABLE DROP <namespace>:<table>    forget the table (its keys stay, under the default)

A write to a SYNC table is acknowledged only once durable in object storage;
writes to ASYNC tables on the same server are not held back by it.

In cluster mode TS.TABLE has no key: it acts on the shard of the node it is sent to
(a slot move brings the moved keys' tables: store.moves). RAFT needs the raft log of
a group, so a shard of one node (no --group) refuses it.
"""

from __future__ import annotations

from typing import Any

from commands.errors import SYNTAX, CommandError
from commands.limits import memtoull
from commands.parsing import get_int
from commands.registry import Flag, command, container
from commands.replies import OK, Reply
from commands.session import Session
from store import HistoryPolicy, TablePolicy

BAD_NAME = "ERR table name must be <namespace>:<table>"
EXISTS = "ERR table '{}' already exists"
NO_TABLE = "ERR no such table '{}'"
NOT_POSITIVE = "ERR value is out of range, must be positive"
BAD_MEMORY = "ERR MAXPINNED must be a memory value (bytes, or 100mb, 1gb, ...)"

container("ts.table", -2)


def table_name(b: bytes) -> bytes:
    parts = b.split(b":")
    if len(parts) != 2 or not all(parts):
        raise CommandError(BAD_NAME)
    return b


def _positive(b: bytes) -> int:
    n = get_int(b)
    if n <= 0:
        raise CommandError(NOT_POSITIVE)
    return n


RAFT_NEEDS_ETCD = (
    "ERR DURABILITY RAFT needs etcd: start the server with --etcd-endpoints "
    "(a group whose etcd cluster holds the raft tables' log)"
)
# In cluster mode a shard of one node has no group, hence no raft log to write to.
RAFT_NEEDS_GROUP = (
    "ERR DURABILITY RAFT needs a replicated shard: in cluster mode start this shard's "
    "nodes with --group NAME (the raft log is its group's, in etcd)"
)


def parse_policy(argv: list[bytes], i: int, base: TablePolicy) -> TablePolicy:
    durability, retain, every, max_pinned = base
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"durability" and i + 1 < len(argv):
            mode = argv[i + 1].lower()
            if mode not in (b"async", b"sync", b"raft"):
                raise CommandError(SYNTAX)
            durability = mode.decode()
            i += 2
        elif opt == b"retain" and i + 1 < len(argv):
            kind = argv[i + 1].lower()
            if kind == b"all":
                retain = HistoryPolicy("all", 0)
                i += 2
            elif kind in (b"versions", b"ms") and i + 2 < len(argv):
                retain = HistoryPolicy(kind.decode(), _positive(argv[i + 2]))
                i += 3
            else:
                raise CommandError(SYNTAX)
        elif opt == b"snapshot-every" and i + 1 < len(argv):
            every = _positive(argv[i + 1])
            i += 2
        elif opt == b"maxpinned" and i + 1 < len(argv):
            n = memtoull(argv[i + 1].decode("utf-8", "replace"))
            if n is None or n >= 1 << 63:
                raise CommandError(BAD_MEMORY)
            max_pinned = n
            i += 2
        else:
            raise CommandError(SYNTAX)
    return TablePolicy(durability, retain, every, max_pinned)


def _default(s: Session) -> TablePolicy:
    store = s.store
    return TablePolicy(
        "sync" if store.default_sync else "async", store.history, store.snapshot_every
    )


def _commit_policy(s: Session, name: bytes, p: TablePolicy) -> None:
    config = s.server.config
    if p.durability == "raft" and not config.etcd_endpoints:
        raise CommandError(RAFT_NEEDS_GROUP if config.cluster_etcd else RAFT_NEEDS_ETCD)
    op: tuple[Any, ...] = ("table", name, p.durability, str(p.retain), p.snapshot_every)
    if p.max_pinned:
        op += (p.max_pinned,)
    s.store.db_op(s.dbi, op)


def _describe(name: bytes, p: TablePolicy) -> dict[bytes, Any]:
    return {
        b"name": name,
        b"durability": p.durability.encode(),
        b"retain": str(p.retain).encode(),
        b"snapshot-every": p.snapshot_every,
        b"maxpinned": p.max_pinned,
    }


@command("ts.table|create", -3, Flag.WRITE | Flag.ADMIN)
def cmd_table_create(s: Session, argv: list[bytes]) -> Reply:
    name = table_name(argv[2])
    policy = parse_policy(argv, 3, _default(s))
    if name in s.store.tables:
        raise CommandError(EXISTS.format(name.decode("utf-8", "replace")))
    _commit_policy(s, name, policy)
    return OK


@command("ts.table|alter", -3, Flag.WRITE | Flag.ADMIN)
def cmd_table_alter(s: Session, argv: list[bytes]) -> Reply:
    name = table_name(argv[2])
    current = s.store.tables.get(name)
    if current is None:
        raise CommandError(NO_TABLE.format(name.decode("utf-8", "replace")))
    _commit_policy(s, name, parse_policy(argv, 3, current))
    return OK


@command("ts.table|drop", 3, Flag.WRITE | Flag.ADMIN)
def cmd_table_drop(s: Session, argv: list[bytes]) -> Reply:
    name = table_name(argv[2])
    if name not in s.store.tables:
        raise CommandError(NO_TABLE.format(name.decode("utf-8", "replace")))
    s.store.db_op(s.dbi, ("droptable", name))
    return OK


@command("ts.table|list", 2, Flag.READONLY)
def cmd_table_list(s: Session, argv: list[bytes]) -> Reply:
    return [_describe(name, p) for name, p in sorted(s.store.tables.items())]


@command("ts.table|info", 3, Flag.READONLY)
def cmd_table_info(s: Session, argv: list[bytes]) -> Reply:
    name = table_name(argv[2])
    policy = s.store.tables.get(name)
    if policy is None:
        raise CommandError(NO_TABLE.format(name.decode("utf-8", "replace")))
    prefix = name + b":"
    keys = versions = 0
    for db in s.store.dbs:
        keys += sum(1 for k in db.data if k.startswith(prefix))
        versions += sum(len(c) for k, c in db.chains.items() if k.startswith(prefix))
    dur = s.server.durability
    info = _describe(name, policy)
    info[b"keys"] = keys
    info[b"versions_in_memory"] = versions
    s.store.settle_trims()
    info[b"pinned_bytes"] = s.store.mem.pinned_tables.get(name, 0)
    info[b"durable_lsn"] = s.store.lsn if dur is None else dur.durable_lsn
    info[b"flush_lag_ms"] = 0 if dur is None else int(dur.info().get("flush_lag_ms", 0))
    # Freshness on this node: a replica applies records in order, so every table is
    # as fresh as the node.
    info[b"applied_lsn"] = s.store.lsn
    info[b"replica_lag_ms"] = s.server.replication.lag_ms()
    return info
