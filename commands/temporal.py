"""The TS.* verbs: versions, history, time travel, snapshots.

Wherever <at> appears it is one of
    VERSION <lsn>      the state just after that LSN
    TIME <unix-ms>     the state at that wall-clock time
    SNAPSHOT <name>    a sealed snapshot
    BACK <n>           (key-scoped verbs only) n versions before the key's latest

TS.VERSION                         the current LSN
TS.ASOF key <at>                   the key's value then, in its type's read shape
TS.HISTORY key [FROM <at>] [TO <at>] [COUNT n] [REV] [AUTHOR name] [WITHVALUES]
TS.META AUTHOR name [MESSAGE text] | TS.META RESET
TS.SEAL name [TRIGGER text] [META field value ...]   seal a snapshot (O(1)); replies its LSN
TS.SNAPSHOTS                       name, version, time, trigger, meta of each snapshot
TS.UNSEAL name                     drop a snapshot (1, or 0 if there was none)
TS.SHARDSEAL, TS.SHARDUNSEAL       the same on this node only (cluster mode: TS.SEAL and
                                   TS.UNSEAL send them to every other shard)
TS.CHECKOUT AT <at> | HEAD         this connection's reads answer as of <at>
TS.DIFF <at> <at> [MATCH pattern] [COUNT n] [AFTER key]   keys in order; AFTER pages on
TS.REVERT key <at>                 write the key's old value as a new version
TS.RESTORE <at> [MATCH pattern]    TS.REVERT every matching key; replies the count

A point in time is an LSN plus the clock at which expiry is judged: a TIME point
reads with the clock at that time, any other point with the clock at its LSN's
commit (or now, for the newest LSN, which is the present state). A key whose
expiry time has passed by then does not exist at that point, even though its
`expired` deletion is committed a little later.

One commit (a MULTI/EXEC block, or a command touching a key twice such as LMOVE
with one list) may leave several chain entries with the same LSN for a key; these
verbs count and show them as one version.

In cluster mode (`--cluster-enabled yes`) TS.SEAL seals every shard and records the
cluster snapshot in etcd (`ServerState.cluster_snapshots`, proxy.cluster_time);
TS.CHECKOUT AT SNAPSHOT then reads each shard at its own seal, and keys whose slots
moved here since as of the old owner's seal time (`_key_times`).

The full reference is docs/temporal.md.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from commands.branch_lookup import checkout_branch, get_branch
from commands.common import history_keys
from commands.config_table import config_get_value
from commands.errors import SYNTAX, CommandError
from commands.glob import match_filter
from commands.limits import OOM
from commands.parsing import get_int
from commands.points import (
    NEGATIVE,
    Point,
    base_lsn,
    chains_and_floors,
    clock_of,
    entry_lsn,
    parse_at,
    parse_point,
    pruned,
    state_as_of,
)
from commands.registry import Flag, command
from commands.replies import OK, Encoded, ErrorReply, Reply, deferred
from commands.resp import encode_reply
from commands.session import ClusterSnapshots, Session
from commands.slices import each_in_slices, map_in_slices, run_sliced, sliced, write_in_slices
from store import V_CMD, V_LSN, V_META, V_TIME, PrunedError, Store, VersionEntry, WriteMeta, now_ms
from store.ops import RESTORE
from store.slots import key_slot
from store.stream import MAX_ID, MIN_ID, Stream
from store.values import ZSet
from store.views import KeyTimes

SNAPSHOT_EXISTS = "ERR snapshot '{}' already exists"
PINNED_CAP = (
    "ERR pinned history is {} bytes, at or past max-pinned-history ({} bytes): "
    "TS.UNSEAL a snapshot, drop a branch or raise the limit"
)
TABLE_PINNED_CAP = (
    "ERR pinned history of table '{}' is {} bytes, at or past its MAXPINNED ({} bytes): "
    "TS.UNSEAL a snapshot, drop a branch or raise the limit"
)

RO = Flag.READONLY
W = Flag.WRITE | Flag.DENYOOM


def read_shape(s: Session, value: Any) -> Reply:
    """A value as its type's natural read command answers: GET, HGETALL,
    LRANGE 0 -1, SMEMBERS, ZRANGE 0 -1 WITHSCORES, XRANGE - +."""
    if value is None:
        return None
    t = type(value)
    if t is bytes:
        return value
    if t is bytearray:
        return bytes(value)
    if isinstance(value, dict):
        return dict(value)
    if t is deque:
        return list(value)
    if isinstance(value, set):
        return set(value)
    if t is ZSet:
        if s.resp == 3:
            return [[m, sc] for sc, m in value.order]
        out: list[Reply] = []
        for sc, m in value.order:
            out.append(m)
            out.append(sc)
        return out
    if t is Stream:
        # By ID, as XRANGE walks it (the entries dict is not in ID order once an
        # XDEL has been undone).
        return value.range(MIN_ID, MAX_ID)
    raise CommandError("ERR unsupported value type")


# The values one TS.HISTORY WITHVALUES reply may carry, as for one bulk string.
HISTORY_TOO_LARGE = (
    "ERR TS.HISTORY values would be larger than proto-max-bulk-len ({} bytes): "
    "page them with COUNT and FROM"
)


def _versions(
    chain: Sequence[VersionEntry],
    lo: int,
    hi: int,
    rev: bool = False,
    count: int | None = None,
    author: bytes | None = None,
) -> list[list[VersionEntry]]:
    """The chain's entries with lo <= LSN <= hi, grouped by LSN (one group per
    version), oldest first (newest first with `rev`), only `author`'s, stopping at
    `count` groups: O(log n + what is listed)."""
    start = bisect_right(chain, lo - 1, key=entry_lsn)
    stop = bisect_right(chain, hi, key=entry_lsn)
    span = range(stop - 1, start - 1, -1) if rev else range(start, stop)
    groups: list[list[VersionEntry]] = []
    for i in span:
        e = chain[i]
        if groups and groups[-1][0][V_LSN] == e[V_LSN]:
            groups[-1].append(e)
            continue
        if count is not None and len(groups) >= count:
            break
        if author is not None and (e[V_META] is None or e[V_META].author != author):
            continue
        groups.append([e])
    if rev:
        for g in groups:
            g.reverse()
    return groups


@command("ts.version", 1, RO | Flag.FAST | Flag.LOADING)
def cmd_ts_version(s: Session, argv: list[bytes]) -> Reply:
    return s.store.lsn


@command("ts.asof", 4, RO, 1, 1, 1)
def cmd_ts_asof(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    point, end = parse_point(s, argv, 2, key)
    if end != len(argv):
        raise CommandError(SYNTAX)
    try:
        return read_shape(s, state_as_of(s, key, point)[0])
    except CommandError as e:
        dur = s.server.durability
        if not e.text.startswith(b"PRUNED") or dur is None or s.in_exec or s.branch is not None:
            raise
    # Retention dropped it from memory: read it back from object storage (slow).

    async def from_storage() -> Reply:
        assert dur is not None
        try:
            value, expire = await dur.read_as_of(s.dbi, key, point.lsn)
        except PrunedError as e:
            return ErrorReply(str(e).encode())
        if value is not None and expire is not None and expire <= point.at_ms:
            value = None
        return read_shape(s, value)

    return deferred(from_storage)


@command("ts.history", -2, RO, 1, 1, 1)
def cmd_ts_history(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    base = base_lsn(s)
    lo, hi = 0, base
    count: int | None = None
    rev = False
    author: bytes | None = None
    withvalues = False
    i = 2
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"from":
            lo, i = parse_at(s, argv, i + 1, key)
        elif opt == b"to":
            hi, i = parse_at(s, argv, i + 1, key)
        elif opt == b"count" and i + 1 < len(argv):
            count = get_int(argv[i + 1])
            if count < 0:
                raise CommandError(NEGATIVE)
            i += 2
        elif opt == b"author" and i + 1 < len(argv):
            author = argv[i + 1]
            i += 2
        elif opt == b"rev":
            rev = True
            i += 1
        elif opt == b"withvalues":
            withvalues = True
            i += 1
        else:
            raise CommandError(SYNTAX)
    chain = chains_and_floors(s)[0].get(key, [])
    groups = _versions(chain, lo, min(hi, base), rev, count, author)
    if not withvalues or not groups:
        return _history_entries(groups, None)
    # Walk back from the newest listed version, one version's undo per step, over a
    # copy of that stretch of the chain (writes between slices may trim the chain).
    lsns = sorted((g[0][V_LSN] for g in groups), reverse=True)
    first = bisect_right(chain, lsns[-1] - 1, key=entry_lsn)
    stretch = chain[first : bisect_right(chain, lsns[0], key=entry_lsn)]
    states = s.store.states_back(s.db.ident, key, stretch, lsns)
    budget = [s.server.limits.proto_max_bulk]

    def encode(lsn_state: tuple[int, tuple[Any, int | None]]) -> tuple[int, Encoded]:
        lsn, (value, expire) = lsn_state
        if value is not None and expire is not None and expire <= clock_of(s, lsn):
            value = None
        enc = Encoded(encode_reply(read_shape(s, value), s.resp))
        budget[0] -= len(enc)
        if budget[0] < 0:
            raise CommandError(HISTORY_TOO_LARGE.format(s.server.limits.proto_max_bulk))
        return lsn, enc

    walk = zip(lsns, states, strict=True)
    head = encode(next(walk))  # the as-of read happens now, before any other write
    if not sliced(s, len(lsns)):
        return _history_entries(groups, dict([head, *map(encode, walk)]))

    async def work() -> Reply:
        values = dict([head, *await map_in_slices(encode, walk)])
        # The reply too is encoded entry by entry in slices, then joined: one array.
        resp = s.resp
        parts = await map_in_slices(lambda g: encode_reply(_history_entry(g, values), resp), groups)
        return Encoded(b"*%d\r\n" % len(parts) + b"".join(parts))

    return run_sliced(work)


def _history_entry(g: list[VersionEntry], values: dict[int, Encoded] | None) -> dict[bytes, Reply]:
    e = g[0]
    cmds = dict.fromkeys(x[V_CMD] for x in g)
    item: dict[bytes, Reply] = {
        b"version": e[V_LSN],
        b"time": e[V_TIME],
        b"command": ",".join(cmds).encode(),
        b"author": e[V_META].author if e[V_META] is not None else None,
        b"message": e[V_META].message if e[V_META] is not None else None,
    }
    if values is not None:
        item[b"value"] = values[e[V_LSN]]
    return item


def _history_entries(groups: list[list[VersionEntry]], values: dict[int, Encoded] | None) -> Reply:
    return [_history_entry(g, values) for g in groups]


@command("ts.meta", -2, Flag.FAST | Flag.LOADING)
def cmd_ts_meta(s: Session, argv: list[bytes]) -> Reply:
    opt = argv[1].lower()
    if opt == b"reset" and len(argv) == 2:
        s.meta = None
        return OK
    if opt != b"author" or len(argv) not in (3, 5):
        raise CommandError(SYNTAX)
    message = None
    if len(argv) == 5:
        if argv[3].lower() != b"message":
            raise CommandError(SYNTAX)
        message = argv[4]
    s.meta = WriteMeta(s.id, argv[2], message)
    return OK


def _check_pinned_caps(s: Session) -> None:
    """A seal is refused while pinned history is at or past max-pinned-history, or a
    table's pinned history at or past its MAXPINNED."""
    s.store.settle_trims()
    mem = s.store.mem
    cap = int(config_get_value(s.server, "max-pinned-history"))
    if cap and mem.pinned_bytes >= cap:
        raise CommandError(PINNED_CAP.format(mem.pinned_bytes, cap))
    for table, policy in s.store.tables.items():
        pinned = mem.pinned_tables.get(table, 0)
        if policy.max_pinned and pinned >= policy.max_pinned:
            name = table.decode("utf-8", "replace")
            raise CommandError(TABLE_PINNED_CAP.format(name, pinned, policy.max_pinned))


def _seal_here(s: Session, argv: list[bytes]) -> int:
    """TS.SEAL on this node's store: the LSN of the seal's version."""
    name, trigger = argv[1], b""
    meta: tuple[bytes, ...] = ()
    rest = argv[2:]
    if len(rest) >= 2 and rest[0].lower() == b"trigger":
        trigger, rest = rest[1], rest[2:]
    if rest:
        # META field value [field value ...]: everything after META, in pairs.
        if rest[0].lower() != b"meta" or len(rest) < 3 or len(rest) % 2 == 0:
            raise CommandError(SYNTAX)
        meta = tuple(rest[1:])
    if name in s.store.snapshots:
        raise CommandError(SNAPSHOT_EXISTS.format(name.decode("utf-8", "replace")))
    _check_pinned_caps(s)
    op = ("seal", name, trigger, meta) if meta else ("seal", name, trigger)
    return s.store.db_op(s.dbi, op)


def _unseal_here(s: Session, name: bytes) -> int:
    if name not in s.store.snapshots:
        return 0
    s.store.db_op(s.dbi, ("unseal", name))
    return 1


def _cluster_wide(s: Session) -> ClusterSnapshots | None:
    """Cluster mode's cluster-wide seals, unless inside MULTI/EXEC (this shard only)."""
    seals = s.server.cluster_snapshots
    return None if seals is None or s.in_exec else seals


# Denied past maxmemory, like writes: a seal pins history from then on.
@command("ts.seal", -2, Flag.WRITE | Flag.DENYOOM)
def cmd_ts_seal(s: Session, argv: list[bytes]) -> Reply:
    lsn = _seal_here(s, argv)
    seals = _cluster_wide(s)
    if seals is None:
        return lsn
    name, args = argv[1], argv[2:]

    # Cluster mode: the other shards seal it too, then etcd records the cluster
    # snapshot (proxy.cluster_time); if that fails, this shard's seal is dropped again.
    async def every_shard() -> Reply:
        try:
            await seals.seal(name, args, lsn)
        except Exception as exc:
            snap = s.store.snapshots.get(name)
            if snap is not None and snap.lsn == lsn:
                s.store.begin("ts.unseal", s)
                s.store.db_op(s.dbi, ("unseal", name))
                s.store.commit()
            return ErrorReply(f"ERR {exc}".encode())
        return lsn

    return deferred(every_shard)


@command("ts.unseal", 2, Flag.WRITE | Flag.ADMIN)
def cmd_ts_unseal(s: Session, argv: list[bytes]) -> Reply:
    name = argv[1]
    seals = _cluster_wide(s)
    known = seals is not None and seals.recorded(name) is not None
    dropped = _unseal_here(s, name)
    if seals is None:
        return dropped

    async def every_shard() -> Reply:
        await seals.unseal(name)
        return int(dropped or known)

    return deferred(every_shard)


# What a node of a cluster sends the other shards for TS.SEAL and TS.UNSEAL: the
# same verbs on this shard only (an operator may use them too).
@command("ts.shardseal", -2, Flag.WRITE | Flag.DENYOOM)
def cmd_ts_shardseal(s: Session, argv: list[bytes]) -> Reply:
    return _seal_here(s, argv)


@command("ts.shardunseal", 2, Flag.WRITE | Flag.ADMIN)
def cmd_ts_shardunseal(s: Session, argv: list[bytes]) -> Reply:
    return _unseal_here(s, argv[1])


@command("ts.snapshots", 1, RO)
def cmd_ts_snapshots(s: Session, argv: list[bytes]) -> Reply:
    store = s.store
    store.settle_trims()
    seals = s.server.cluster_snapshots
    out: list[Reply] = []
    for snap in sorted(store.snapshots.values(), key=lambda x: x.lsn):
        # The commit time of the seal's version, as the time index (and a restart)
        # has it; a seal not yet committed (inside EXEC) has only its own.
        t = store.time_of(snap.lsn) if snap.lsn <= store.lsn else snap.time_ms
        nbytes, versions = store.mem.pinned_between(snap.lsn, _next_pin(store, snap.lsn))
        entry: dict[bytes, Reply] = {
            b"name": snap.name,
            b"version": snap.lsn,
            b"time": t,
            b"trigger": snap.trigger,
            b"pinned_bytes": nbytes,
            b"pinned_versions": versions,
            b"meta": dict(zip(snap.meta[::2], snap.meta[1::2], strict=True)),
        }
        if seals is not None:  # cluster mode: each shard's LSN of a cluster snapshot
            shards = seals.recorded(snap.name) or {}
            entry[b"shards"] = {k.encode(): v for k, v in sorted(shards.items())}
        out.append(entry)
    return out


def _next_pin(store: Store, lsn: int) -> int | None:
    """The LSN of the next seal or branch fork after `lsn` (None: there is none)."""
    pins = [p.lsn for p in store.snapshots.values() if p.lsn > lsn]
    pins.extend(b.fork_lsn for b in store.branches.values() if b.fork_lsn > lsn)
    return min(pins) if pins else None


def _key_times(s: Session, kind: bytes, arg: bytes, lsn: int) -> KeyTimes | None:
    """In cluster mode, what a checkout reads each key as of by time (None: the LSN
    alone): a cluster snapshot's seal time on the shard that served the key's slot
    then, or a TIME point's time; so keys whose slot moved here since read as they
    were (store.moves keeps their versions' times). A snapshot recorded without seal
    times (before they were kept) reads at this shard's LSN only."""
    seals = s.server.cluster_snapshots
    if seals is None or lsn >= s.store.lsn:
        return None
    if kind == b"snapshot":
        per_slot = seals.slot_times(arg)
        if per_slot is None:
            return None
        name = ("snapshot", arg, id(per_slot))
        return KeyTimes(name, lambda key: per_slot[key_slot(key)], True)
    if kind == b"time":
        t = int(arg)
        return KeyTimes(("time", t), lambda key: t, False)
    return None


# Refused inside MULTI: EXEC runs queued commands without the READONLY check, so a
# queued checkout followed by a write would write into the historical view.
@command("ts.checkout", -2, Flag.LOADING | Flag.NO_MULTI)
def cmd_ts_checkout(s: Session, argv: list[bytes]) -> Reply:
    opt = argv[1].lower()
    if opt == b"head" and len(argv) == 2:
        s.view_lsn = None
        s.branch = None
        s.select(s.dbi)
        return OK
    if opt == b"at":
        lsn, end = parse_at(s, argv, 2)
        if end != len(argv):
            raise CommandError(SYNTAX)
        if s.server.over_maxmemory:
            raise CommandError(OOM)  # a view holds memory, like a write
        times = _key_times(s, argv[2].lower(), argv[3], lsn)
        try:
            s.store.view(s.dbi, lsn, times)
        except PrunedError as e:
            raise pruned(e) from None
        s.view_lsn = lsn
        s.view_times = times
        s.branch = None  # a view of the main line
        s.select(s.dbi)
        return OK
    if len(argv) == 2:
        checkout_branch(s, argv[1])
        return OK
    raise CommandError(SYNTAX)


def _diff_options(argv: list[bytes], i: int) -> tuple[bytes | None, int | None, bytes | None]:
    """TS.DIFF's [MATCH pattern] [COUNT n] [AFTER key]."""
    pattern: bytes | None = None
    count: int | None = None
    after: bytes | None = None
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"match" and i + 1 < len(argv):
            pattern = argv[i + 1]
        elif opt == b"after" and i + 1 < len(argv):
            after = argv[i + 1]
        elif opt == b"count" and i + 1 < len(argv):
            count = get_int(argv[i + 1])
            if count < 0:
                raise CommandError(NEGATIVE)
        else:
            raise CommandError(SYNTAX)
        i += 2
    return pattern, count, after


def _is_branch(argv: list[bytes], i: int) -> bool:
    return i + 1 < len(argv) and argv[i].lower() == b"branch"


class _Side(NamedTuple):
    """One side of TS.DIFF: a point, or a branch head (BRANCH <name>)."""

    lsn: int  # the main-line LSN its keys are read at, where it did not change them
    changed: set[bytes]  # keys it changed beyond that (a branch's own)
    point: Point | None  # None for a branch head (expiry is not judged there)
    state: Callable[[bytes], tuple[Any, int | None]]


def _side(s: Session, argv: list[bytes], i: int) -> tuple[_Side, int]:
    if _is_branch(argv, i):
        branch = get_branch(s, argv[i + 1])
        db = branch.dbs[s.dbi]

        def head(key: bytes) -> tuple[Any, int | None]:
            return db.data.get(key), db.expires.get(key)

        # A branch of a branch reads its ancestors' changes too, and the main line as of
        # the oldest fork of its line.
        line = s.store.branches.lineage(branch.name)
        changed = set().union(*(b.dbs[s.dbi].changed() for b in line))
        return _Side(min(b.fork_lsn for b in line), changed, None, head), i + 2
    point, end = parse_point(s, argv, i)
    return _Side(point.lsn, set(), point, lambda key: state_as_of(s, key, point)), end


def _diff_candidates(s: Session, a: _Side, b: _Side) -> tuple[set[bytes], set[bytes]]:
    """(keys that may differ because something wrote them, keys that may differ only
    because the two clocks judge one committed state's expiry differently)."""
    store = s.store
    lo, hi = min(a.lsn, b.lsn), max(a.lsn, b.lsn)
    written = store.keys_written(s.dbi, lo, hi)
    if written is None:  # not known from the index: every key of the database
        db = store.dbs[s.dbi]
        written = set(db.data) | set(db.chains)
    written |= a.changed | b.changed
    clocked: set[bytes] = set()
    if a.point is not None and b.point is not None and a.point.at_ms != b.point.at_ms:
        # A key not written in between may have had a TTL at `hi` that one clock
        # passed: it has a TTL now, or was written since.
        db = store.dbs[s.dbi]
        since = store.keys_written(s.dbi, hi, store.lsn)
        clocked = set(db.expires) | (set(db.data) | set(db.chains) if since is None else since)
        clocked -= written
    return written, clocked


@command("ts.diff", -5, RO)
def cmd_ts_diff(s: Session, argv: list[bytes]) -> Reply:
    a, i = _side(s, argv, 1)
    b, i = _side(s, argv, i)
    pattern, count, after = _diff_options(argv, i)
    written, clocked = _diff_candidates(s, a, b)
    match = match_filter(pattern)
    keys = sorted(
        k for k in written | clocked if (after is None or k > after) and (match is None or match(k))
    )
    hi = max(a.lsn, b.lsn)
    floors = s.store.dbs[s.dbi].floors
    out: dict[bytes, Reply] = {}

    def step(key: bytes) -> bool:
        """Compare one key; False once COUNT keys are listed."""
        if count is not None and len(out) >= count:
            return False
        if key in written:
            old, old_exp = a.state(key)
            new, new_exp = b.state(key)
        else:
            assert a.point is not None and b.point is not None
            floor = floors.get(key)
            if floor is not None and min(a.lsn, b.lsn) < floor:
                raise pruned(PrunedError(min(a.lsn, b.lsn), key))
            # One committed state, alive or not by each clock.
            old, old_exp = new, new_exp = state_as_of(s, key, Point(hi, 0))
            if old is not None and old_exp is not None:
                if old_exp <= a.point.at_ms:
                    old, old_exp = None, None
                if new_exp is not None and new_exp <= b.point.at_ms:
                    new, new_exp = None, None
        if old is None and new is None:
            return True
        if old is None:
            out[key] = b"added"
        elif new is None:
            out[key] = b"removed"
        elif type(old) is not type(new) or old != new or old_exp != new_exp:
            out[key] = b"changed"
        return True

    if not sliced(s, len(keys)):
        all(map(step, keys))
        return out

    async def work() -> Reply:
        async for key in each_in_slices(keys):
            if not step(key):
                break
        return out

    return run_sliced(work)


def _revert(s: Session, key: bytes, value: Any, expire: int | None) -> bool:
    """Write an old state (from `state_as_of`) as the key's new version; False if the
    key already holds it."""
    if expire is not None and expire <= now_ms():
        value, expire = None, None  # its time has passed: restoring it would delete it
    current = s.db.get(key)
    if current == value and (value is None or s.db.expires.get(key) == expire):
        if value is None or type(current) is type(value):
            return False
    s.store.apply(s.db, key, (RESTORE, value, expire))
    return True


@command("ts.revert", 4, W, 1, 1, 1)
def cmd_ts_revert(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    point, end = parse_point(s, argv, 2, key)
    if end != len(argv):
        raise CommandError(SYNTAX)
    return int(_revert(s, key, *state_as_of(s, key, point)))


@command("ts.restore", -3, W)
def cmd_ts_restore(s: Session, argv: list[bytes]) -> Reply:
    point, i = parse_point(s, argv, 1)
    pattern: bytes | None = None
    if i < len(argv):
        if argv[i].lower() != b"match" or i + 2 != len(argv):
            raise CommandError(SYNTAX)
        pattern = argv[i + 1]
    keys = history_keys(s, pattern)
    # Read every old state first, so a PRUNED key fails the command before any write.
    if not sliced(s, len(keys)):
        states = [(key, *state_as_of(s, key, point)) for key in keys]
        return sum(_revert(s, key, value, expire) for key, value, expire in states)

    async def restore() -> Reply:
        states = await map_in_slices(lambda key: (key, *state_as_of(s, key, point)), keys)
        return await write_in_slices(s, "ts.restore", states, lambda st: _revert(s, *st))

    return run_sliced(restore)
