"""Keyspace notifications (Redis' notify.c): `notify-keyspace-events` and the
`__keyspace@<db>__:<key>` / `__keyevent@<db>__:<event>` messages.

One hook: the dispatcher, after a command's handler ran and only when
`ServerState.notify_flags` is not 0 (the default: one test per command), calls
`notify_after`: `keymiss` for the keys a read found missing (`KEYMISS`), then the
ops the command applied (the store's pending entries after its savepoint) go to
`notify_command`. The event of each op comes from `EVENTS`, a table by command
name: a command not in it emits nothing (rather than a wrong event). Expiries
(lazy and active) reach `expired` through the store's `on_expired`.

Rules taken from Redis 7.0 (db.c, t_*.c): a key the command created gets `new`
(class n) before the command's own event; a key a command leaves empty gets `del`
after it (a DEL op of a "store" command, whose result was empty, gets `del` alone);
a command emits its event once per key it wrote, in the order of its first write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from commands.channels import publish
from store.ops import CREATED, DEL, EXPIRE, KEEP_TTL, SET

if TYPE_CHECKING:
    from commands.session import ServerCore, Session

# notify.c's class bits.
KEYSPACE = 1 << 0  # K
KEYEVENT = 1 << 1  # E
GENERIC = 1 << 2  # g
STRING = 1 << 3  # $
LIST = 1 << 4  # l
SET_ = 1 << 5  # s
HASH = 1 << 6  # h
ZSET = 1 << 7  # z
EXPIRED = 1 << 8  # x
EVICTED = 1 << 9  # e
STREAM = 1 << 10  # t
KEY_MISS = 1 << 11  # m
MODULE = 1 << 13  # d
NEW = 1 << 14  # n
ALL = GENERIC | STRING | LIST | SET_ | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE

CLASS_BITS = {
    "A": ALL,
    "g": GENERIC,
    "$": STRING,
    "l": LIST,
    "s": SET_,
    "h": HASH,
    "z": ZSET,
    "x": EXPIRED,
    "e": EVICTED,
    "K": KEYSPACE,
    "E": KEYEVENT,
    "t": STREAM,
    "m": KEY_MISS,
    "d": MODULE,
    "n": NEW,
}


def parse_flags(text: str) -> int:
    """keyspaceEventsStringToFlags (the text was validated by CONFIG SET)."""
    flags = 0
    for ch in text:
        flags |= CLASS_BITS.get(ch, 0)
    return flags


def set_flags(server: ServerCore, text: str) -> None:
    """CONFIG SET notify-keyspace-events took `text`: the flags in force, and the
    store's expiry hook (set only while `expired` events are wanted)."""
    flags = parse_flags(text)
    if not flags & (KEYSPACE | KEYEVENT):
        flags = 0  # neither channel kind: nothing can be delivered
    server.notify_flags = flags
    set_expiry_hook(server)


def set_expiry_hook(server: ServerCore) -> None:
    """The store's `on_expired`: `expired` events while they are wanted, and client-side
    caching's invalidation (commands.tracking) once a client has tracked; else None."""
    want = server.notify_flags & EXPIRED

    def hook(dbi: Any, key: bytes) -> None:
        if want:
            notify(server, EXPIRED, b"expired", key, dbi)
        tracking = server.tracking
        if tracking is not None:
            tracking.expired(key)
        stream = server.repl_stream
        if stream is not None:  # Redis replicas attached (commands.redis_repl)
            stream.expired(server, dbi, key)

    # The replication stream to Redis replicas, once one attached: the hook stays (it
    # tests whether one is still attached) rather than be composed again on detach.
    others = (
        server.tracking is not None
        or server.repl_stream is not None
        or server.redis_repl.offset > 0
    )
    server.store.on_expired = hook if want or others else None


def notify(server: ServerCore, cls: int, event: bytes, key: bytes, dbi: Any) -> None:
    """notifyKeyspaceEvent: the keyspace message, then the keyevent one."""
    flags = server.notify_flags
    if not flags & cls or type(dbi) is not int:
        return  # branches' databases (not integers) have no channels in Redis
    if flags & KEYSPACE:
        publish(server, b"__keyspace@%d__:%s" % (dbi, key), event)
    if flags & KEYEVENT:
        publish(server, b"__keyevent@%d__:%s" % (dbi, event), key)


# How a command's DEL op is told: "after" = the command's event, then `del` (a pop or
# trim that emptied the key); "only" = `del` alone (a store whose result was empty, a
# deletion).
AFTER = 0
ONLY = 1

Entry = tuple[int, bytes, int]
Special = Callable[["ServerCore", "Session", list[bytes], list[Any]], None]

EVENTS: dict[str, Entry] = {}
SPECIAL: dict[str, Special] = {}


def _table(cls: int, mode: int, pairs: dict[str, str]) -> None:
    for name, event in pairs.items():
        EVENTS[name] = (cls, event.encode(), mode)


_table(
    STRING,
    AFTER,
    {
        "set": "set",
        "setnx": "set",
        "setex": "set",
        "psetex": "set",
        "getset": "set",
        "mset": "set",
        "msetnx": "set",
        "append": "append",
        "setrange": "setrange",
        "incr": "incrby",
        "decr": "incrby",
        "incrby": "incrby",
        "decrby": "incrby",
        "incrbyfloat": "incrbyfloat",
        "setbit": "setbit",
        "bitfield": "setbit",
        "pfadd": "pfadd",
    },
)
_table(STRING, ONLY, {"bitop": "set", "pfmerge": "pfadd"})
_table(GENERIC, ONLY, {"del": "del", "unlink": "del", "getdel": "del", "migrate": "del"})
_table(
    LIST,
    AFTER,
    {
        "lpush": "lpush",
        "lpushx": "lpush",
        "rpush": "rpush",
        "rpushx": "rpush",
        "linsert": "linsert",
        "lset": "lset",
        "lpop": "lpop",
        "rpop": "rpop",
        "blpop": "lpop",
        "brpop": "rpop",
        "ltrim": "ltrim",
        "lrem": "lrem",
    },
)
_table(
    HASH,
    AFTER,
    {
        "hset": "hset",
        "hmset": "hset",
        "hsetnx": "hset",
        "hdel": "hdel",
        "hincrby": "hincrby",
        "hincrbyfloat": "hincrbyfloat",
    },
)
_table(SET_, AFTER, {"sadd": "sadd", "srem": "srem", "spop": "spop"})
_table(
    SET_,
    ONLY,
    {"sinterstore": "sinterstore", "sunionstore": "sunionstore", "sdiffstore": "sdiffstore"},
)
_table(
    ZSET,
    AFTER,
    {
        "zadd": "zadd",
        "zincrby": "zincr",
        "zrem": "zrem",
        "zremrangebyscore": "zremrangebyscore",
        "zremrangebyrank": "zremrangebyrank",
        "zremrangebylex": "zremrangebylex",
        "zpopmin": "zpopmin",
        "zpopmax": "zpopmax",
        "bzpopmin": "zpopmin",
        "bzpopmax": "zpopmax",
        "geoadd": "zadd",
    },
)
_table(
    ZSET,
    ONLY,
    {
        "zunionstore": "zunionstore",
        "zinterstore": "zinterstore",
        "zdiffstore": "zdiffstore",
        "zrangestore": "zrangestore",
        "georadius": "georadiusstore",
        "georadiusbymember": "georadiusstore",
        "geosearchstore": "geosearchstore",
    },
)
_table(
    GENERIC,
    ONLY,
    {"sort": "sortstore", "restore": "restore", "restore-asking": "restore", "copy": "copy_to"},
)


# Commands whose every op is an event (MSET a 1 a 2: `set` twice).
EVERY_OP = frozenset(("mset", "msetnx"))

# Commands that delete the key they replace, then add it (dbDelete, dbAdd): `new` even
# when the key existed.
ALWAYS_NEW = frozenset(("restore", "restore-asking", "copy"))


# Commands whose keys Redis looks up for reading (lookupKeyRead): a key missing
# after the command was a miss, `keymiss` (class m). Positions: the command's keys,
# or those given here (the sources of a store).
KEYMISS: dict[str, slice | None] = dict.fromkeys(
    [
        "get",
        "getrange",
        "substr",
        "strlen",
        "getbit",
        "bitcount",
        "bitpos",
        "mget",
        "exists",
        "type",
        "ttl",
        "pttl",
        "expiretime",
        "pexpiretime",
        "touch",
        "hget",
        "hmget",
        "hgetall",
        "hkeys",
        "hvals",
        "hlen",
        "hexists",
        "hstrlen",
        "hrandfield",
        "lrange",
        "llen",
        "lindex",
        "lpos",
        "smembers",
        "sismember",
        "smismember",
        "scard",
        "srandmember",
        "sinter",
        "sunion",
        "sdiff",
        "zrange",
        "zrangebyscore",
        "zrevrangebyscore",
        "zrangebylex",
        "zrevrangebylex",
        "zrevrange",
        "zscore",
        "zmscore",
        "zcard",
        "zcount",
        "zlexcount",
        "zrank",
        "zrevrank",
        "xrange",
        "xrevrange",
        "xlen",
    ]
)
KEYMISS.update(dict.fromkeys(("sinterstore", "sunionstore", "sdiffstore"), slice(2, None)))


def notify_after(s: Session, cmd: Any, argv: list[bytes], savepoint: int) -> None:
    """The dispatcher's hook (called only when some class is on): `keymiss` for the
    keys a read found missing, then the events of what the command wrote."""
    server = s.server
    if server.notify_flags & KEY_MISS and cmd.name in KEYMISS:
        where = KEYMISS[cmd.name]
        data = s.db.data
        for key in cmd.keys(argv) if where is None else argv[where]:
            if key not in data:
                notify(server, KEY_MISS, b"keymiss", key, s.db.ident)
    pending = s.store.pending
    if len(pending) > savepoint:
        notify_command(s, cmd.name, argv, pending[savepoint:])


def notify_command(s: Session, name: str, argv: list[bytes], applied: list[Any]) -> None:
    """Publish the events of command `name`, which applied `applied` (the store's
    pending entries (db, key, op, undo, cmd) it added)."""
    server = s.server
    special = SPECIAL.get(name)
    if special is not None:
        special(server, s, argv, applied)
        return
    entry = EVENTS.get(name)
    if entry is None:
        return
    cls, event, mode = entry
    if name == "zadd" and any(a.lower() == b"incr" for a in argv[2:]):
        event = b"zincr"
    elif name in ("zmpop", "bzmpop"):
        event = b"zpopmin" if b"min" in (a.lower() for a in argv) else b"zpopmax"
    per_key(server, name, cls, event, mode, applied)


def per_key(
    server: ServerCore, name: str, cls: int, event: bytes | None, mode: int, applied: list[Any]
) -> None:
    """The events of a command that writes each key once: `new` for a key it created,
    its event (None: the op's name), then `del` for a key it left empty."""
    seen: set[tuple[Any, bytes]] = set()
    every = name in EVERY_OP
    for dbi, key, op, undo, _cmd in applied:
        if key is None or (dbi, key) in seen:
            continue
        if not every:
            seen.add((dbi, key))
        if op[0] == DEL:
            if mode == AFTER and event is not None:
                notify(server, cls, event, key, dbi)
            if undo[0][1] is not None:
                notify(server, GENERIC, b"del", key, dbi)
            continue
        if undo == CREATED or name in ALWAYS_NEW:
            notify(server, NEW, b"new", key, dbi)
        notify(server, cls, op[0].encode() if event is None else event, key, dbi)
        if op[0] == SET and (
            name in ("setex", "psetex")
            or (op[2] is not None and op[2] != KEEP_TTL and name == "set")
        ):
            notify(server, GENERIC, b"expire", key, dbi)
        elif mode == AFTER and key not in server.store.db_of(dbi).data:
            notify(server, GENERIC, b"del", key, dbi)


def _expire_family(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    for dbi, key, op, undo, _cmd in applied:
        if op[0] == DEL:
            if undo[0][1] is not None:
                notify(server, GENERIC, b"del", key, dbi)
        elif op[0] == EXPIRE:
            notify(server, GENERIC, b"expire" if op[1] is not None else b"persist", key, dbi)


def _list_mpop(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    per_key(server, "lmpop", LIST, None, AFTER, applied)


SPECIAL["lmpop"] = SPECIAL["blmpop"] = _list_mpop
EVENTS["zmpop"] = EVENTS["bzmpop"] = (ZSET, b"zpopmin", AFTER)


def _temporal(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    """TS.REVERT, TS.RESTORE, TS.MERGE (no Redis counterpart; docs/notifications.md
    lists the names): a key brought back to absence gets `del`; any other key `new`
    if it did not exist, then the verb's name (generic class), once per key."""
    name = applied[0][4]
    seen: set[tuple[Any, bytes]] = set()
    for dbi, key, _op, undo, _cmd in applied:
        if key is None or (dbi, key) in seen:
            continue
        seen.add((dbi, key))
        if key not in server.store.db_of(dbi).data:
            notify(server, GENERIC, b"del", key, dbi)
            continue
        if undo == CREATED:
            notify(server, NEW, b"new", key, dbi)
        notify(server, GENERIC, name.encode(), key, dbi)


for _name in ("ts.revert", "ts.restore", "ts.merge", "ts.import"):
    SPECIAL[_name] = _temporal


for _name in ("expire", "pexpire", "expireat", "pexpireat", "persist", "getex"):
    SPECIAL[_name] = _expire_family


def _rename(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    if len(applied) < 2:
        return  # RENAME k k: no change, no event (as Redis)
    dbi = applied[0][0]
    notify(server, NEW, b"new", argv[2], dbi)
    notify(server, GENERIC, b"rename_from", argv[1], dbi)
    notify(server, GENERIC, b"rename_to", argv[2], dbi)


SPECIAL["rename"] = SPECIAL["renamenx"] = _rename


def _move(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    if len(applied) < 2:
        return
    dst, src = applied[0][0], applied[1][0]
    notify(server, NEW, b"new", argv[1], dst)
    notify(server, GENERIC, b"move_from", argv[1], src)
    notify(server, GENERIC, b"move_to", argv[1], dst)


SPECIAL["move"] = _move


def _moves(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    """LMOVE and friends: the push on the destination, then the pop on the source
    (and its `del` if emptied), as lmoveGenericCommand."""
    if len(applied) < 2:
        return
    pop_entry, push_entry = applied[0], applied[1]
    sdbi, src, pop_op, _u, _c = pop_entry
    ddbi, dst, push_op, push_undo, _c2 = push_entry
    if push_undo == CREATED:
        notify(server, NEW, b"new", dst, ddbi)
    notify(server, LIST, push_op[0].encode(), dst, ddbi)
    notify(server, LIST, pop_op[0].encode(), src, sdbi)
    if src not in server.store.db_of(sdbi).data:
        notify(server, GENERIC, b"del", src, sdbi)


for _name in ("lmove", "rpoplpush", "blmove", "brpoplpush"):
    SPECIAL[_name] = _moves


def _smove(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    """srem on the source (and its `del` if emptied), then `sadd` on the destination
    unless it held the member already (smoveCommand)."""
    src = argv[1]
    for dbi, key, _op, undo, _cmd in applied:
        if key == src:
            notify(server, SET_, b"srem", src, dbi)
            if src not in server.store.db_of(dbi).data:
                notify(server, GENERIC, b"del", src, dbi)
            continue
        if undo == CREATED:
            notify(server, NEW, b"new", key, dbi)
        notify(server, SET_, b"sadd", key, dbi)


def _stream(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
    """XADD, XDEL, XTRIM: each stream op is its event (XADD's trimming: xadd, xtrim)."""
    for dbi, key, op, undo, _cmd in applied:
        if undo == CREATED:
            notify(server, NEW, b"new", key, dbi)
        notify(server, STREAM, op[0].encode(), key, dbi)


for _name in ("xadd", "xdel", "xtrim"):
    SPECIAL[_name] = _stream

# Consumer groups: the command's event for each op it applied, after `new` (XGROUP
# CREATE MKSTREAM); a consumer an op created (XREADGROUP, XCLAIM, XAUTOCLAIM,
# CREATECONSUMER) is `xgroup-createconsumer`.
_GROUP_EVENTS = {
    "xgroup|create": b"xgroup-create",
    "xgroup|setid": b"xgroup-setid",
    "xgroup|destroy": b"xgroup-destroy",
    "xgroup|delconsumer": b"xgroup-delconsumer",
    "xsetid": b"xsetid",
}


def _group_special(name: str) -> Special:
    event = _GROUP_EVENTS.get(name)

    def special(server: ServerCore, s: Session, argv: list[bytes], applied: list[Any]) -> None:
        for dbi, key, op, undo, _cmd in applied:
            if undo == CREATED:
                notify(server, NEW, b"new", key, dbi)
            if event is not None:
                notify(server, STREAM, event, key, dbi)
            elif op[0] == "xgupd":
                before = dict(undo[0][3])  # consumer -> seen time before (None: absent)
                for c, seen in op[3]:
                    if seen is not None and before[c] is None:
                        notify(server, STREAM, b"xgroup-createconsumer", key, dbi)

    return special


for _name in (*_GROUP_EVENTS, "xgroup|createconsumer", "xreadgroup", "xclaim", "xautoclaim"):
    SPECIAL[_name] = _group_special(_name)
SPECIAL["smove"] = _smove
