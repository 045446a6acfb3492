"""What a command propagates to Redis replicas (`commands.redis_repl`), as redis-server
7.0's call() does: a command that changed the dataset is propagated as the client sent
it, or rewritten where Redis rewrites it (rewriteClientCommandVector, alsoPropagate):

- SET with EX/PX/EXAT/PXAT, SETEX, PSETEX: `SET key value PXAT <ms>`; SET ... GET
  without its GET; GETSET: `SET key value`; INCRBYFLOAT: `SET key <new> KEEPTTL`;
  HINCRBYFLOAT: `HSET key field <new>`.
- EXPIRE, PEXPIRE, EXPIREAT: `PEXPIREAT key <ms>` (their NX/XX/GT/LT kept), PEXPIREAT as
  sent; a time already past: `DEL key` (`UNLINK` with lazyfree-lazy-expire). GETEX:
  `PEXPIREAT key <ms>`, `PERSIST key`, or DEL/UNLINK. GETDEL: `DEL key` (`UNLINK` with
  lazyfree-lazy-user-del). RESTORE with a relative TTL: the absolute time and ABSTTL.
- SPOP key: `SREM key member`; SPOP key count: one `SREM key member` per member, or
  `DEL key` when it took the whole set.
- BLPOP/BRPOP: `LPOP|RPOP key`; BLMOVE: `LMOVE`; BRPOPLPUSH: `RPOPLPUSH`; LMPOP/BLMPOP:
  `LPOP|RPOP key <count popped>`; BZPOPMIN/BZPOPMAX: `ZPOPMIN|ZPOPMAX key`; ZMPOP/BZMPOP:
  `ZPOPMIN|ZPOPMAX key <count popped>` (also when served after blocking).
- GEOADD: the `zadd` it runs, with each position's geohash as the score.
- XADD with an ID to generate (`*`, `ms-*`): the ID it got. XADD and XTRIM (when it
  deleted entries) with an approximate trim (`~`): `=` and the stream's resulting
  length (MAXLEN) or first ID (MINID).
- XREADGROUP: `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID
  id` per new entry delivered; after a NOACK read `XGROUP CREATECONSUMER` (a consumer it
  created) and `XGROUP SETID key group id ENTRIESREAD n`.
- Expired keys (lazily, by a command's lookup, or by active expiry): `DEL key`
  (`UNLINK` with lazyfree-lazy-expire), before the command that found them.
- FLUSHALL, FLUSHDB, SWAPDB and PUBLISH are propagated even when they changed nothing.
- MULTI/EXEC and scripts (EVAL*, FCALL*): their commands' propagation, inside
  `MULTI`/`EXEC` when there are several; the EVAL/FCALL itself is not propagated. One
  command that propagates several (SPOP with a count, a lookup that expired keys) is
  wrapped too, except SCAN and RANDOMKEY (Redis' CMD_TOUCHES_ARBITRARY_KEYS).

- XCLAIM, XAUTOCLAIM: an `XCLAIM ... FORCE JUSTID LASTID` per entry claimed or dropped
  from the PEL (deleted), `XGROUP SETID` when only LASTID moved the group.

Not as Redis (Redis has no such commands): TS.* verbs that change main-line keys
propagate each key's resulting state (`RESTORE key ttl payload REPLACE [ABSTTL]`, or `DEL
key`); writes to branches (`TS.CHECKOUT` a branch) are not propagated (Redis has no such
database); DEBUG is never propagated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from commands.registry import Command
from commands.replies import ErrorReply, Reply
from commands.replstate import ReplStream
from commands.session import Session
from store.stream import XGUPD, format_id

Out = list[tuple[int, list[bytes]]]
Rule = Callable[[Session, list[bytes], list[Any], Reply], Out | None]

# Never propagated themselves (their commands are, or nothing is).
SKIP = frozenset({
    "exec", "multi", "discard", "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall",
    "fcall_ro", "debug", "sync", "psync", "replconf",
})  # fmt: skip
# Propagated even when the dataset did not change (forceCommandPropagation).
FORCED = frozenset({"flushall", "flushdb", "swapdb", "publish"})
EXPIRES = frozenset({"expire", "pexpire", "expireat", "pexpireat"})
# Lookups that may expire any key: their DELs are never wrapped in MULTI/EXEC.
ARBITRARY_KEYS = frozenset({"scan", "randomkey"})


def after_call(
    rs: ReplStream, s: Session, cmd: Command, argv: list[bytes], savepoint: int, reply: Reply
) -> None:
    """The dispatcher's hook after every call while a Redis replica is attached."""
    rs.depth -= 1
    if s.server.repl_stream is not rs:
        return  # the last replica left during the call
    out = command_propagation(s, cmd, argv, savepoint, reply)
    if out:
        rs.pending.extend(out)
    if rs.depth <= 0 and rs.pending:
        ops = rs.pending
        rs.pending = []
        rs.depth = 0
        rs.propagate(s.server, ops, cmd.name not in ARBITRARY_KEYS)
        s.repl_woff = rs.offset  # what WAIT waits for replicas to acknowledge


def command_propagation(
    s: Session, cmd: Command, argv: list[bytes], savepoint: int, reply: Reply
) -> Out:
    name = cmd.name
    if name in SKIP:
        return []
    own = [p for p in s.store.pending[savepoint:] if p[4] != "expired"]
    if not own:
        if type(reply) is ErrorReply or type(s.dbi) is not int:
            return []
        if name in FORCED:
            return [(s.dbi, argv)]
        if name in EXPIRES and reply == 1:
            # The same expiry again: nothing changed here, but Redis counts it a change.
            return _expire(s, argv, own, reply) or []
        return []
    if not any(type(p[0]) is int for p in own) or type(s.dbi) is not int:
        return []  # only a branch's databases changed
    if name.startswith("ts."):  # each touched key's resulting state
        stream = s.server.repl_stream
        return [] if stream is None or stream.effects is None else stream.effects(s, own)
    rule = RULES.get(name)
    if rule is not None:
        out = rule(s, argv, own, reply)
        if out is not None:
            return out
    return [(s.dbi, argv)]


def _lazy(s: Session, option: str) -> bytes:
    return b"UNLINK" if s.server.config.params.get(option, "no") == "yes" else b"DEL"


def _one(s: Session, *argv: bytes) -> Out:
    return [(s.dbi, list(argv))]


def _set(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    key = argv[1]
    opts = [a.lower() for a in argv[3:]]
    if any(o in (b"ex", b"px", b"exat", b"pxat") for o in opts):
        return _set_pxat(s, key, argv[2])
    if b"get" in opts:
        return [(s.dbi, [a for j, a in enumerate(argv) if j < 3 or a.lower() != b"get"])]
    return None


def _set_pxat(s: Session, key: bytes, value: bytes) -> Out | None:
    at = s.db.ttl_ms(key)
    return None if at is None else _one(s, b"SET", key, value, b"PXAT", b"%d" % at)


def _expire(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    op = own[-1][2] if own else ("expire", s.db.ttl_ms(argv[1]))
    if op[0] == "del":
        return _one(s, _lazy(s, "lazyfree-lazy-expire"), argv[1])
    if op[0] != "expire" or op[1] is None:
        return None
    new = list(argv)
    if argv[0].lower() != b"pexpireat":
        new[0] = b"PEXPIREAT"
        new[2] = b"%d" % op[1]
    return [(s.dbi, new)]


def _getex(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    op = own[-1][2]
    if op[0] == "del":
        return _one(s, _lazy(s, "lazyfree-lazy-expire"), argv[1])
    if op[0] == "expire":
        if op[1] is None:
            return _one(s, b"PERSIST", argv[1])
        return _one(s, b"PEXPIREAT", argv[1], b"%d" % op[1])
    return None


def _restore(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    key = argv[1]
    if s.db.data.get(key) is None:
        return _one(s, b"DEL", key)
    if argv[2] == b"0" or any(a.lower() == b"absttl" for a in argv[4:]):
        return None
    at = s.db.ttl_ms(key)
    if at is None:
        return None
    return [(s.dbi, [argv[0], key, b"%d" % at, *argv[3:], b"ABSTTL"])]


def _spop(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    key = argv[1]
    if len(argv) == 2:
        return _one(s, b"SREM", key, reply)
    if s.db.data.get(key) is None:
        return _one(s, b"DEL", key)
    return [(s.dbi, [b"SREM", key, m]) for m in reply]


def _popped(reply: Reply) -> tuple[bytes, int]:
    return reply[0], len(reply[1])


def _where(argv: list[bytes], numkeys_at: int) -> bytes:
    n = int(argv[numkeys_at])
    return argv[numkeys_at + 1 + n].lower()


def _mpop(numkeys_at: int, zset: bool) -> Rule:
    def rule(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
        key, n = _popped(reply)
        where = _where(argv, numkeys_at)
        if zset:
            verb = b"ZPOPMAX" if where == b"max" else b"ZPOPMIN"
        else:
            verb = b"RPOP" if where == b"right" else b"LPOP"
        return _one(s, verb, key, b"%d" % n)

    return rule


def _bpop(verb: bytes) -> Rule:
    def rule(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
        return _one(s, verb, reply[0])

    return rule


def _xreadgroup(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    """streamPropagateXCLAIM per new entry delivered (to the PEL), XGROUP CREATECONSUMER
    for a consumer NOACK created, XGROUP SETID ... ENTRIESREAD after a NOACK read."""
    noack = _noack(argv)
    out: Out = []
    for dbi, key, op, undo, _cmd in own:
        if op[0] != XGUPD or type(dbi) is not int:
            continue
        group = op[1]
        before = undo[0]
        g = s.store.dbs[dbi].data[key].groups[group]
        last = before[2][0] if before[2] is not None else g.last_id
        if noack:
            for name, old in before[3]:
                if old is None:
                    out.append((dbi, [b"XGROUP", b"CREATECONSUMER", key, group, name]))
        if op[2] is None:
            continue  # a re-read of the consumer's history: Redis propagates nothing
        for sid, t, count, consumer in op[4]:
            last = max(last, sid)
            out.append((dbi, _xclaim_argv(key, group, format_id(sid), (t, count, consumer), last)))
        if noack and op[2] is not None:
            last_id, read = op[2]
            out.append(
                (dbi, [b"XGROUP", b"SETID", key, group, format_id(last_id), b"ENTRIESREAD",
                       b"%d" % read])
            )  # fmt: skip
    return out


def _xclaim_argv(key: bytes, group: bytes, sid_arg: bytes, nack: Any, last: Any) -> list[bytes]:
    """streamPropagateXCLAIM: the claim as an idempotent XCLAIM (nack: time, count,
    consumer)."""
    t, count, consumer = nack
    return [b"XCLAIM", key, group, consumer, b"0", sid_arg, b"TIME", b"%d" % t,
            b"RETRYCOUNT", b"%d" % count, b"FORCE", b"JUSTID", b"LASTID",
            format_id(last)]  # fmt: skip


def _claims(s: Session, own: list[Any], order: list[tuple[Any, bytes]] | None) -> Out:
    """XCLAIM/XAUTOCLAIM: an XCLAIM per entry claimed (its new owner, time and count)
    or dropped from the PEL because it was deleted (its old ones), in the order Redis
    meets them (`order`: XCLAIM's IDs as sent; None: the PEL's order); XGROUP SETID
    when only XCLAIM's LASTID moved the group."""
    out: Out = []
    for dbi, key, op, undo, _cmd in own:
        if op[0] != XGUPD or type(dbi) is not int:
            continue
        group = op[1]
        g = s.store.dbs[dbi].data[key].groups[group]
        claimed = {e[0]: e[1:] for e in op[4]}
        old = {e[0]: e[1:] for e in undo[0][4]}
        dropped = {sid: old[sid] for sid in op[5] if sid in old}
        ids = order or [(sid, format_id(sid)) for sid in sorted({*claimed, *dropped})]
        done: set[Any] = set()
        for sid, arg in ids:
            nack = claimed.get(sid) or dropped.get(sid)
            if nack is None or sid in done:
                continue
            done.add(sid)
            out.append((dbi, _xclaim_argv(key, group, arg, nack, g.last_id)))
        if not done and op[2] is not None:
            out.append(
                (dbi, [b"XGROUP", b"SETID", key, group, format_id(g.last_id), b"ENTRIESREAD",
                       b"%d" % g.entries_read])
            )  # fmt: skip
    return out


def _xclaim(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    order = []
    for arg in argv[5:]:
        try:
            ms, _, seq = arg.partition(b"-")
            order.append(((int(ms), int(seq or b"0")), arg))
        except ValueError:
            break  # the options
    return _claims(s, own, order)


def _noack(argv: list[bytes]) -> bool:
    """Whether XREADGROUP's options (before STREAMS) hold NOACK."""
    i = 1
    while i < len(argv):
        a = argv[i].lower()
        if a == b"streams":
            return False
        if a == b"noack":
            return True
        i += 3 if a == b"group" else 2 if a in (b"count", b"block") else 1
    return False


def _trim_options(argv: list[bytes], i: int, out: list[bytes], st: Any) -> int:
    """Copy XADD/XTRIM options from `i` into `out`, an approximate trim (`~`) rewritten
    as the exact one made (`=` and the stream's length, or its first ID), as
    streamRewriteTrimArgument; returns where the options end."""
    while i < len(argv):
        a = argv[i].lower()
        if a == b"nomkstream":
            out.append(argv[i])
            i += 1
        elif a in (b"maxlen", b"minid") and i + 1 < len(argv):
            out.append(argv[i])
            i += 1
            if argv[i] in (b"=", b"~"):
                if argv[i] == b"~" and st is not None:
                    out += (b"=", b"%d" % len(st) if a == b"maxlen" else _first_id(st))
                    i += 2
                    continue
                out.append(argv[i])
                i += 1
            out.append(argv[i])
            i += 1
        elif a == b"limit" and i + 1 < len(argv):
            out += argv[i : i + 2]
            i += 2
        else:
            break
    return i


def _first_id(st: Any) -> bytes:
    if not len(st):
        return b"18446744073709551615-18446744073709551615"  # streamGetEdgeID, empty
    return format_id(st._first_valid_id())


def _xadd(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    out = list(argv[:2])
    i = _trim_options(argv, 2, out, s.db.data.get(argv[1]))
    if i < len(argv) and argv[i].endswith(b"*") and type(reply) is bytes:
        out.append(reply)  # the ID it got
        i += 1
    return [(s.dbi, out + argv[i:])]


def _xtrim(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    out = list(argv[:2])
    i = _trim_options(argv, 2, out, s.db.data.get(argv[1]) if reply else None)
    return [(s.dbi, out + argv[i:])]


RULES: dict[str, Rule] = {
    "set": _set,
    "setex": lambda s, a, o, r: _set_pxat(s, a[1], a[3]),
    "psetex": lambda s, a, o, r: _set_pxat(s, a[1], a[3]),
    "getset": lambda s, a, o, r: _one(s, b"SET", *a[1:]),
    "getdel": lambda s, a, o, r: _one(s, _lazy(s, "lazyfree-lazy-user-del"), a[1]),
    "getex": _getex,
    "incrbyfloat": lambda s, a, o, r: _one(s, b"SET", a[1], r, b"KEEPTTL"),
    "hincrbyfloat": lambda s, a, o, r: _one(s, b"HSET", a[1], a[2], r),
    "expire": _expire,
    "pexpire": _expire,
    "expireat": _expire,
    "pexpireat": _expire,
    "restore": _restore,
    "spop": _spop,
    "blpop": _bpop(b"LPOP"),
    "brpop": _bpop(b"RPOP"),
    "bzpopmin": _bpop(b"ZPOPMIN"),
    "bzpopmax": _bpop(b"ZPOPMAX"),
    "blmove": lambda s, a, o, r: _one(s, b"LMOVE", *a[1:5]),
    "brpoplpush": lambda s, a, o, r: _one(s, b"RPOPLPUSH", a[1], a[2]),
    "lmpop": _mpop(1, False),
    "blmpop": _mpop(2, False),
    "zmpop": _mpop(1, True),
    "bzmpop": _mpop(2, True),
    "xadd": _xadd,
    "xtrim": _xtrim,
    "xreadgroup": _xreadgroup,
    "xclaim": _xclaim,
    "xautoclaim": lambda s, a, o, r: _claims(s, o, None),
}
