"""The stream value type and its ops.

A `Stream` keeps its live entries in a dict (ID -> (ID as reply bytes, flat
field/value tuple)) and, alongside, the layout Redis would give them: a list of
`Node`s standing for the radix tree's listpacks. Each node knows its master ID
and fields, every ID appended to it (deleted ones stay as tombstones, as in
Redis), its live/deleted counts and its exact listpack size in bytes. The layout
decides when XADD opens a new node (stream-node-max-entries, default 100;
stream-node-max-bytes, default 4096) and what approximate trimming (`~`) may remove: only
whole nodes, exactly as Redis does. Ordered reads walk the nodes.

Ops (each apply returns the ops that undo it):
    ("xadd", id, fields)          append one entry (the ID is already resolved)
    ("xadd", id, fields, max entries, max bytes)  the same under node sizes other
                                  than the defaults (what CONFIG SET stream-node-max-*
                                  was when XADD ran: replay lays nodes out the same)
    ("xdel", ids)                 delete these existing entries, in this order
    ("xtrim", nodes, marked)      drop the first `nodes` nodes, then mark the first
                                  `marked` live entries of the new head deleted
    ("xunadd", id, meta, nbytes[, max entries, max bytes])  undo of xadd on an
                                  existing stream
    ("xundel", meta, steps)       undo of xdel
    ("xuntrim", meta, nodes, head, entries)  undo of xtrim: the dropped nodes, the
                                  head's counters before, the entries removed
    ("xgset", group, state)       create, replace or (state None) destroy a consumer
                                  group; its undo is the same op with the prior state
    ("xgupd", group, meta, consumers, pel_set, pel_del)  change a group in place:
                                  meta (last ID, entries read) or None, consumers
                                  ((name, seen ms | None to delete), ...), PEL entries
                                  set ((id, delivery ms, count, consumer), ...) and
                                  removed (id, ...); its undo is another xgupd
    ("xsetmeta", meta)            set last ID, first ID, max deleted ID and entries
                                  added (XSETID); its undo is the same op

A deleted entry stays in its node (a tombstone) until the node goes, as in Redis;
`Stream.dead` keeps its fields meanwhile (only DUMP reads them), filled by xdel and
the marking part of xtrim, emptied when a node is dropped; it takes no part in
equality.

Consumer groups live in the stream value (`Stream.groups`): each `Group` has its
last-delivered ID, entries-read counter (-1: unknown), consumers (name -> seen-time
ms) and PEL (ID -> (delivery ms, delivery count, consumer)). Times are recorded in
the ops, so replay never reads the clock.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import TYPE_CHECKING

from store.ops import CREATED, Op, Undo, register
from store.values import STREAM_NODE_MAX_BYTES, STREAM_NODE_MAX_ENTRIES, TYPE_NAMES

if TYPE_CHECKING:
    from store.database import Database

StreamID = tuple[int, int]
Fields = tuple[bytes, ...]  # field, value, field, value, ...
Entry = tuple[bytes, Fields]  # (b"ms-seq", fields): exactly an XRANGE reply item
Meta = tuple[StreamID, StreamID, StreamID, int]  # last, first, max deleted, entries added
NodeState = tuple[StreamID, Fields, tuple[StreamID, ...], int, int, int]

U64 = (1 << 64) - 1
MIN_ID: StreamID = (0, 0)
MAX_ID: StreamID = (U64, U64)

# Redis 7.0 defaults (store.values.LIMITS holds the ones in force).
NODE_MAX_BYTES = STREAM_NODE_MAX_BYTES  # stream-node-max-bytes
NODE_MAX_ENTRIES = STREAM_NODE_MAX_ENTRIES  # stream-node-max-entries
LISTPACK_MAX_SIZE = 1 << 30

XADD = "xadd"
XDEL = "xdel"
XTRIM = "xtrim"
XUNADD = "xunadd"
XUNDEL = "xundel"
XUNTRIM = "xuntrim"
XGSET = "xgset"
XSETMETA = "xsetmeta"
XGUPD = "xgupd"

INVALID_ENTRIES_READ = -1  # SCG_INVALID_ENTRIES_READ

Nack = tuple[int, int, bytes]  # delivery time ms, delivery count, consumer
GroupState = tuple[StreamID, int, tuple[tuple[bytes, int], ...], tuple[tuple[StreamID, Nack], ...]]


def format_id(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


def incr_id(sid: StreamID) -> StreamID | None:
    """The next ID, or None past the last possible one."""
    ms, seq = sid
    if seq < U64:
        return (ms, seq + 1)
    return (ms + 1, 0) if ms < U64 else None


def decr_id(sid: StreamID) -> StreamID | None:
    ms, seq = sid
    if seq:
        return (ms, seq - 1)
    return (ms - 1, U64) if ms else None


# -- listpack sizes (what a node weighs, to split nodes where Redis does) ----------

_INT_START = frozenset(b"-0123456789")
_LP_INT = re.compile(rb"-?[1-9][0-9]{0,19}|0")


def _int_bytes(v: int) -> int:
    """Bytes of an integer element: encoding plus its 1-byte back length."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -2147483648 <= v <= 2147483647:
        return 6
    return 10


def _backlen(n: int) -> int:
    if n <= 127:
        return 1
    if n < 16383:
        return 2
    if n < 2097151:
        return 3
    return 4 if n < 268435455 else 5


def _str_bytes(b: bytes) -> int:
    """Bytes of a string element; listpacks store integer-looking strings as integers."""
    n = len(b)
    if n < 21 and n and b[0] in _INT_START and _LP_INT.fullmatch(b) is not None:
        v = int(b)
        if -(1 << 63) <= v < (1 << 63):
            return _int_bytes(v)
    enc = 1 + n if n < 64 else (2 + n if n < 4096 else 5 + n)
    return enc + _backlen(enc)


def _delta(a: int, b: int) -> int:
    """a - b as the int64 Redis stores (unsigned difference reinterpreted)."""
    d = (a - b) & U64
    return d - (1 << 64) if d >> 63 else d


def _entry_bytes(sid: StreamID, master: StreamID, fv: Fields, same: bool) -> int:
    n = len(fv) >> 1
    size = 2 + _int_bytes(_delta(sid[0], master[0])) + _int_bytes(_delta(sid[1], master[1]))
    if same:
        size += sum(map(_str_bytes, fv[1::2]))
        return size + _int_bytes(n + 3)
    size += _int_bytes(n) + sum(map(_str_bytes, fv))
    return size + _int_bytes(2 * n + 4)


class Node:
    """One listpack of the radix tree: master ID and fields, every ID appended
    (tombstones included), live and deleted counts, size in bytes. `start` is a
    hint, not state: every ID before it is a tombstone (trims mark from the front,
    so reads and trims skip them at once)."""

    __slots__ = ("deleted", "fields", "ids", "live", "master", "nbytes", "start")

    def __init__(
        self,
        master: StreamID,
        fields: Fields,
        ids: list[StreamID],
        live: int,
        deleted: int,
        nbytes: int,
    ) -> None:
        self.master = master
        self.fields = fields
        self.ids = ids
        self.live = live
        self.deleted = deleted
        self.nbytes = nbytes
        self.start = 0

    @classmethod
    def first(cls, sid: StreamID, fv: Fields) -> Node:
        fields = fv[0::2]
        nbytes = (
            7  # header and terminator
            + _int_bytes(1)
            + _int_bytes(0)
            + _int_bytes(len(fields))
            + sum(map(_str_bytes, fields))
            + _int_bytes(0)
            + _entry_bytes(sid, sid, fv, True)
        )
        return cls(sid, fields, [sid], 1, 0, nbytes)

    def state(self) -> NodeState:
        return (self.master, self.fields, tuple(self.ids), self.live, self.deleted, self.nbytes)

    @classmethod
    def from_state(cls, st: NodeState) -> Node:
        return cls(st[0], st[1], list(st[2]), st[3], st[4], st[5])

    def __reduce__(self) -> tuple[object, tuple[NodeState, int]]:
        # Pickled (history frozen or spilled, store.coldhistory): compiled, the default
        # would call __init__ without its arguments.
        return (_node_of, (self.state(), self.start))

    def copy(self) -> Node:
        n = Node(self.master, self.fields, self.ids.copy(), self.live, self.deleted, self.nbytes)
        n.start = self.start
        return n

    def skip_tombstones(self, entries: dict[StreamID, Entry]) -> None:
        ids = self.ids
        j = self.start
        while j < len(ids) and ids[j] not in entries:
            j += 1
        self.start = j

    def mark_deleted(self, n: int) -> None:
        """n more entries flagged deleted: the two header counters change size."""
        live, deleted = self.live, self.deleted
        self.nbytes += (
            _int_bytes(live - n) - _int_bytes(live) + _int_bytes(deleted + n) - _int_bytes(deleted)
        )
        self.live = live - n
        self.deleted = deleted + n


class Group:
    """A consumer group: last-delivered ID, entries read, consumers and the PEL."""

    __slots__ = ("consumers", "entries_read", "last_id", "pel")

    def __init__(self, last_id: StreamID, entries_read: int) -> None:
        self.last_id = last_id
        self.entries_read = entries_read
        self.consumers: dict[bytes, int] = {}  # name -> seen time ms
        self.pel: dict[StreamID, Nack] = {}

    def state(self) -> GroupState:
        return (
            self.last_id,
            self.entries_read,
            tuple(self.consumers.items()),
            tuple(self.pel.items()),
        )

    @classmethod
    def from_state(cls, st: GroupState) -> Group:
        g = cls(st[0], st[1])
        g.consumers = dict(st[2])
        g.pel = dict(st[3])
        return g

    def __reduce__(self) -> tuple[object, tuple[GroupState]]:
        return (_group_of, (self.state(),))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Group)
            and (other.last_id, other.entries_read) == (self.last_id, self.entries_read)
            and other.consumers == self.consumers
            and other.pel == self.pel
        )

    __hash__ = None  # type: ignore[assignment]

    def sorted_pel(self) -> list[StreamID]:
        return sorted(self.pel)

    def pending_of(self, consumer: bytes) -> int:
        return sum(1 for n in self.pel.values() if n[2] == consumer)


def _master(n: Node) -> StreamID:
    return n.master


def _node_of(st: NodeState, start: int) -> Node:
    """A pickled `Node` back."""
    n = Node.from_state(st)
    n.start = start
    return n


def _group_of(st: GroupState) -> Group:
    """A pickled `Group` back."""
    return Group.from_state(st)


class Stream:
    """A Redis stream: entries by ID plus the node layout and the metadata."""

    __slots__ = (
        "dead",
        "entries",
        "entries_added",
        "first_id",
        "groups",
        "last_id",
        "max_deleted_id",
        "nodes",
    )

    def __init__(self) -> None:
        self.groups: dict[bytes, Group] = {}
        self.entries: dict[StreamID, Entry] = {}
        self.nodes: list[Node] = []
        self.last_id: StreamID = MIN_ID
        self.first_id: StreamID = MIN_ID
        self.max_deleted_id: StreamID = MIN_ID
        self.entries_added = 0
        # The fields of deleted entries still inside a node (Redis keeps them in the
        # listpack until the node goes): only DUMP reads them. Not part of equality.
        self.dead: dict[StreamID, Fields] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def copy(self) -> Stream:
        s = Stream()
        s.entries = dict(self.entries)
        s.nodes = [n.copy() for n in self.nodes]
        s.set_meta(self.meta())
        s.groups = {k: Group.from_state(g.state()) for k, g in self.groups.items()}
        s.dead = dict(self.dead)
        return s

    @classmethod
    def rebuilt(
        cls,
        entries: list[tuple[StreamID, Fields]],
        meta: Meta,
        groups: tuple[tuple[bytes, GroupState], ...],
    ) -> Stream:
        """A stream holding `entries` (in ID order) with the given metadata and consumer
        groups, laid out in nodes as appending them would (an import: deleted entries
        leave no tombstones)."""
        s = cls()
        for sid, fv in entries:
            s._append(sid, fv)
        s.set_meta(meta)
        s.set_groups_state(groups)
        return s

    def bury(self, node: Node) -> None:
        """Forget the deleted entries' fields of a node that goes."""
        dead = self.dead
        if dead:
            for sid in node.ids:
                dead.pop(sid, None)

    def groups_state(self) -> tuple[tuple[bytes, GroupState], ...]:
        return tuple((k, g.state()) for k, g in self.groups.items())

    def set_groups_state(self, st: tuple[tuple[bytes, GroupState], ...]) -> None:
        self.groups = {k: Group.from_state(g) for k, g in st}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Stream)
            and other.entries == self.entries
            and other.meta() == self.meta()
            and [n.state() for n in other.nodes] == [n.state() for n in self.nodes]
            and other.groups == self.groups
        )

    __hash__ = None  # type: ignore[assignment]

    def meta(self) -> Meta:
        return (self.last_id, self.first_id, self.max_deleted_id, self.entries_added)

    def set_meta(self, m: Meta) -> None:
        self.last_id, self.first_id, self.max_deleted_id, self.entries_added = m

    # -- reading ---------------------------------------------------------------------

    def iter_ids(self, start: StreamID, end: StreamID, rev: bool = False) -> Iterator[StreamID]:
        """Live IDs in [start, end], ascending (or descending when rev)."""
        nodes = self.nodes
        entries = self.entries
        if not rev:
            i = max(bisect_right(nodes, start, key=_master) - 1, 0)
            for node in nodes[i:]:
                ids = node.ids
                for j in range(max(bisect_left(ids, start), node.start), len(ids)):
                    sid = ids[j]
                    if sid > end:
                        return
                    if sid in entries:
                        yield sid
        else:
            i = bisect_right(nodes, end, key=_master) - 1
            while i >= 0:
                node = nodes[i]
                ids = node.ids
                for j in range(bisect_right(ids, end) - 1, node.start - 1, -1):
                    sid = ids[j]
                    if sid < start:
                        return
                    if sid in entries:
                        yield sid
                i -= 1

    def range(
        self, start: StreamID, end: StreamID, count: int = 0, rev: bool = False
    ) -> list[Entry]:
        """Entries in [start, end] (count 0: all), as XRANGE replies them."""
        out: list[Entry] = []
        if start > end or not self.entries:
            return out
        entries = self.entries
        for sid in self.iter_ids(start, end, rev):
            out.append(entries[sid])
            if len(out) == count:
                break
        return out

    def last_valid_id(self) -> StreamID:
        """The greatest live ID (0-0 when empty)."""
        for sid in self.iter_ids(MIN_ID, MAX_ID, True):
            return sid
        return MIN_ID

    def _first_valid_id(self) -> StreamID:
        for sid in self.iter_ids(MIN_ID, MAX_ID):
            return sid
        return MIN_ID

    def plan_trim(
        self, maxlen: int | None, minid: StreamID, approx: bool, limit: int
    ) -> tuple[int, int, int]:
        """Redis' streamTrim as a plan: (whole nodes to drop, live entries of the next
        node to mark deleted, entries removed in all). `maxlen` None: trim by `minid`."""
        length = len(self.entries)
        deleted = 0
        dropped = 0
        marked = 0
        entries = self.entries
        for node in self.nodes:
            if maxlen is not None and length <= maxlen:
                break
            live = node.live
            if limit and deleted + live > limit:
                break
            if maxlen is not None:
                whole = length - live >= maxlen
            else:
                whole = node.ids[-1] < minid
            if whole:
                dropped += 1
                length -= live
                deleted += live
                continue
            if approx:
                break
            ids = node.ids
            for j in range(node.start, len(ids)):
                sid = ids[j]
                if (length <= maxlen) if maxlen is not None else (sid >= minid):
                    break
                if sid in entries:
                    marked += 1
                    length -= 1
            deleted += marked
            break
        return dropped, marked, deleted

    # -- changing (only through the ops below) -----------------------------------------

    def _append(
        self,
        sid: StreamID,
        fv: Fields,
        max_entries: int = NODE_MAX_ENTRIES,
        max_bytes: int = NODE_MAX_BYTES,
    ) -> None:
        """streamAppendItem's fill rule: a new node when the tail would reach
        `max_bytes` (0: the listpack limit) or holds `max_entries` entries, deleted
        ones included (0: no count limit)."""
        nodes = self.nodes
        tail = nodes[-1] if nodes else None
        if max_bytes <= 0 or max_bytes > LISTPACK_MAX_SIZE:
            max_bytes = LISTPACK_MAX_SIZE
        if tail is not None and (
            tail.nbytes + sum(map(len, fv)) >= max_bytes
            or (max_entries and tail.live + tail.deleted >= max_entries)
        ):
            tail = None
        if tail is None:
            nodes.append(Node.first(sid, fv))
        else:
            live = tail.live
            same = fv[0::2] == tail.fields
            tail.nbytes += (
                _int_bytes(live + 1) - _int_bytes(live) + _entry_bytes(sid, tail.master, fv, same)
            )
            tail.live = live + 1
            tail.ids.append(sid)
        self.entries[sid] = (format_id(sid), fv)
        self.entries_added += 1
        self.last_id = sid
        if len(self.entries) == 1:
            self.first_id = sid

    def _node_index(self, sid: StreamID) -> int:
        return bisect_right(self.nodes, sid, key=_master) - 1

    def _refresh_first(self) -> None:
        self.first_id = self._first_valid_id() if self.entries else MIN_ID


def estimate_entries_read(st: Stream, sid: StreamID) -> int:
    """streamEstimateDistanceFromFirstEverEntry: a group's entries-read counter for
    last-delivered ID `sid` (XGROUP CREATE/SETID, and groups of RDB 9 streams)."""
    if not st.entries_added:
        return 0
    if not st.entries and sid <= st.last_id:
        return st.entries_added
    if sid == st.last_id:
        return st.entries_added
    if sid > st.last_id:
        return INVALID_ENTRIES_READ
    mdel = st.max_deleted_id
    if mdel == MIN_ID or mdel < st.first_id:
        if sid < st.first_id:
            return st.entries_added - len(st.entries)
        if sid == st.first_id:
            return st.entries_added - len(st.entries) + 1
    return INVALID_ENTRIES_READ


def _stream(db: Database, key: bytes) -> Stream:
    s = db.data[key]
    assert type(s) is Stream
    return s


@register(XADD)
def _apply_xadd(db: Database, key: bytes, op: Op) -> Undo:
    s = db.data.get(key)
    if s is None:
        s = Stream()
        db.data[key] = s
        undo: Undo = CREATED
    else:
        tail = s.nodes[-1].nbytes if s.nodes else 0
        undo = ((XUNADD, op[1], s.meta(), tail, *op[3:5]),)
    if len(op) > 3:
        s._append(op[1], op[2], op[3], op[4])
    else:
        s._append(op[1], op[2])
    return undo


@register(XUNADD)
def _apply_xunadd(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    sid: StreamID = op[1]
    fv = s.entries.pop(sid)[1]
    tail = s.nodes[-1]
    tail.ids.pop()
    if not tail.ids:
        s.nodes.pop()
    else:
        tail.live -= 1
        tail.nbytes = op[3]
    s.set_meta(op[2])
    return ((XADD, sid, fv, *op[4:6]),)


@register(XDEL)
def _apply_xdel(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    meta = s.meta()
    steps: list[tuple[int, StreamID, Entry, int, NodeState | None]] = []
    nodes = s.nodes
    first_gone = False
    for sid in op[1]:
        i = s._node_index(sid)
        node = nodes[i]
        entry = s.entries.pop(sid)
        if node.live == 1:
            steps.append((i, sid, entry, node.nbytes, node.state()))
            del nodes[i]
            s.bury(node)
        else:
            steps.append((i, sid, entry, node.nbytes, None))
            node.mark_deleted(1)
            s.dead[sid] = entry[1]
            if node.ids[node.start] == sid:
                node.skip_tombstones(s.entries)
        if sid == s.first_id:
            first_gone = True
        if sid > s.max_deleted_id:
            s.max_deleted_id = sid
    if not s.entries:
        s.first_id = MIN_ID
    elif first_gone:
        s._refresh_first()
    return ((XUNDEL, meta, tuple(steps)),)


@register(XUNDEL)
def _apply_xundel(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    nodes = s.nodes
    ids = []
    for i, sid, entry, nbytes, state in reversed(op[2]):
        s.entries[sid] = entry
        s.dead.pop(sid, None)
        ids.append(sid)
        if state is not None:
            nodes.insert(i, Node.from_state(state))
        else:
            node = nodes[i]
            node.live += 1
            node.deleted -= 1
            node.nbytes = nbytes
            node.start = min(node.start, bisect_left(node.ids, sid))
    s.set_meta(op[1])
    ids.reverse()
    return ((XDEL, tuple(ids)),)


@register(XTRIM)
def _apply_xtrim(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    meta = s.meta()
    dropped: int = op[1]
    marked: int = op[2]
    entries = s.entries
    removed: list[tuple[StreamID, Entry]] = []
    gone = s.nodes[:dropped]
    del s.nodes[:dropped]
    for node in gone:
        s.bury(node)
        for sid in node.ids:
            e = entries.pop(sid, None)
            if e is not None:
                removed.append((sid, e))
    head: tuple[int, int, int, int] | None = None
    if marked:
        node = s.nodes[0]
        head = (node.live, node.deleted, node.nbytes, node.start)
        ids = node.ids
        j = node.start
        n = 0
        while n < marked:
            sid = ids[j]
            j += 1
            e = entries.pop(sid, None)
            if e is not None:
                removed.append((sid, e))
                s.dead[sid] = e[1]
                n += 1
        node.mark_deleted(marked)
        node.start = j
        node.skip_tombstones(entries)
    if removed:
        s._refresh_first()
    return ((XUNTRIM, meta, tuple(n.state() for n in gone), head, tuple(removed)),)


@register(XUNTRIM)
def _apply_xuntrim(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    head: tuple[int, int, int, int] | None = op[3]
    if head is not None:
        node = s.nodes[0]
        node.live, node.deleted, node.nbytes, node.start = head
    s.nodes[0:0] = [Node.from_state(st) for st in op[2]]
    s.entries.update(op[4])
    for sid, _entry in op[4]:
        s.dead.pop(sid, None)
    s.set_meta(op[1])
    marked = len(op[4]) - sum(st[3] for st in op[2])
    return ((XTRIM, len(op[2]), marked),)


@register(XGSET)
def _apply_xgset(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    name: bytes = op[1]
    old = s.groups.pop(name, None)
    if op[2] is not None:
        s.groups[name] = Group.from_state(op[2])
    return ((XGSET, name, None if old is None else old.state()),)


@register(XGUPD)
def _apply_xgupd(db: Database, key: bytes, op: Op) -> Undo:
    g = _stream(db, key).groups[op[1]]
    meta = None
    if op[2] is not None:
        meta = (g.last_id, g.entries_read)
        g.last_id, g.entries_read = op[2]
    consumers = g.consumers
    undo_cons = []
    for name, seen in op[3]:
        undo_cons.append((name, consumers.get(name)))
        if seen is None:
            del consumers[name]
        else:
            consumers[name] = seen
    pel = g.pel
    undo_set = []
    undo_del = []
    for sid, t, cnt, cons in op[4]:
        old = pel.get(sid)
        if old is None:
            undo_del.append(sid)
        else:
            undo_set.append((sid, *old))
        pel[sid] = (t, cnt, cons)
    for sid in op[5]:
        undo_set.append((sid, *pel.pop(sid)))
    undo_cons.reverse()
    return ((XGUPD, op[1], meta, tuple(undo_cons), tuple(undo_set), tuple(undo_del)),)


@register(XSETMETA)
def _apply_xsetmeta(db: Database, key: bytes, op: Op) -> Undo:
    s = _stream(db, key)
    undo = ((XSETMETA, s.meta()),)
    s.set_meta(op[1])
    return undo


TYPE_NAMES[Stream] = b"stream"

__all__ = [
    "INVALID_ENTRIES_READ",
    "LISTPACK_MAX_SIZE",
    "MAX_ID",
    "MIN_ID",
    "NODE_MAX_BYTES",
    "NODE_MAX_ENTRIES",
    "U64",
    "XADD",
    "XDEL",
    "XGSET",
    "XGUPD",
    "XSETMETA",
    "XTRIM",
    "XUNADD",
    "XUNDEL",
    "XUNTRIM",
    "Entry",
    "Fields",
    "Group",
    "GroupState",
    "Meta",
    "Nack",
    "Node",
    "NodeState",
    "Stream",
    "StreamID",
    "decr_id",
    "format_id",
    "incr_id",
]
