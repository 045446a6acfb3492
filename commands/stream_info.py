"""XINFO (STREAM [FULL], GROUPS, CONSUMERS, HELP) and XSETID: what a stream and its
consumer groups hold, and setting its last ID (consumer groups themselves:
`commands.stream_groups`)."""

from __future__ import annotations

from commands.common import help_reply
from commands.errors import CommandError
from commands.parsing import get_int
from commands.registry import Flag, command, container
from commands.replies import OK, Reply
from commands.session import Session
from commands.stream_args import _has_tombstones, _nogroup, _subcommand_syntax, get_stream, parse_id
from store import now_ms
from store.stream import (
    INVALID_ENTRIES_READ,
    MAX_ID,
    MIN_ID,
    XSETMETA,
    Group,
    Stream,
    StreamID,
    estimate_entries_read,
    format_id,
)

# -- XINFO GROUPS|CONSUMERS|HELP, XSETID ----------------------------------------------

NO_SUCH_KEY = "ERR no such key"
XINFO_HELP = [
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
]

container("xinfo", -2)


def _xinfo_stream(s: Session, key: bytes) -> Stream:
    st = get_stream(s, key)
    if st is None:
        raise CommandError(NO_SUCH_KEY)
    return st


def _lag(st: Stream, g: Group) -> int | None:
    """streamReplyWithCGLag: entries added minus entries read, when it is known."""
    if not st.entries_added:
        return 0
    if g.entries_read != INVALID_ENTRIES_READ and not _has_tombstones(st, g.last_id):
        return st.entries_added - g.entries_read
    read = estimate_entries_read(st, g.last_id)
    return None if read == INVALID_ENTRIES_READ else st.entries_added - read


@command("xinfo|groups", 3, Flag.READONLY, 2, 2, 1)
def cmd_xinfo_groups(s: Session, argv: list[bytes]) -> Reply:
    st = _xinfo_stream(s, argv[2])
    out: list[Reply] = []
    for name in sorted(st.groups):
        g = st.groups[name]
        read = None if g.entries_read == INVALID_ENTRIES_READ else g.entries_read
        out.append(
            {
                b"name": name,
                b"consumers": len(g.consumers),
                b"pending": len(g.pel),
                b"last-delivered-id": format_id(g.last_id),
                b"entries-read": read,
                b"lag": _lag(st, g),
            }
        )
    return out


@command("xinfo|consumers", 4, Flag.READONLY, 2, 2, 1)
def cmd_xinfo_consumers(s: Session, argv: list[bytes]) -> Reply:
    st = _xinfo_stream(s, argv[2])
    g = st.groups.get(argv[3])
    if g is None:
        raise _nogroup(argv[3], argv[2])
    counts: dict[bytes, int] = {}
    for nack in g.pel.values():
        counts[nack[2]] = counts.get(nack[2], 0) + 1
    now = now_ms()
    return [
        {b"name": c, b"pending": counts.get(c, 0), b"idle": max(now - g.consumers[c], 0)}
        for c in sorted(g.consumers)
    ]


@command("xinfo|help", 2, Flag.LOADING | Flag.STALE)
def cmd_xinfo_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], XINFO_HELP)


@command("xsetid", -3, Flag.WRITE | Flag.DENYOOM | Flag.FAST, 1, 1, 1)
def cmd_xsetid(s: Session, argv: list[bytes]) -> Reply:
    sid = parse_id(argv[2])
    entries_added = -1
    max_del = MIN_ID
    i = 3
    n = len(argv)
    while i < n:
        low = argv[i].lower()
        if low == b"entriesadded" and n - 1 - i:
            entries_added = get_int(argv[i + 1])
            if entries_added < 0:
                raise CommandError("ERR entries_added must be positive")
        elif low == b"maxdeletedid" and n - 1 - i:
            max_del = parse_id(argv[i + 1])
            if sid < max_del:
                raise CommandError(
                    "ERR The ID specified in XSETID is smaller than the provided "
                    "max_deleted_entry_id"
                )
        else:
            raise CommandError("ERR syntax error")
        i += 2
    st = _xinfo_stream(s, argv[1])
    if st.entries:
        if sid < st.last_valid_id():
            raise CommandError(
                "ERR The ID specified in XSETID is smaller than the target stream top item"
            )
        if entries_added != -1 and len(st.entries) > entries_added:
            raise CommandError(
                "ERR The entries_added specified in XSETID is smaller than the target stream length"
            )
    meta = (
        sid,
        st.first_id,
        max_del if max_del != MIN_ID else st.max_deleted_id,
        entries_added if entries_added != -1 else st.entries_added,
    )
    s.store.apply(s.db, argv[1], (XSETMETA, meta))
    return OK


# -- XINFO STREAM ---------------------------------------------------------------------


def rax_nodes(masters: list[StreamID]) -> int:
    """The node count of the radix tree Redis keys a stream's listpacks by (16-byte
    big-endian master IDs): the maximally compressed trie rax keeps, leaves included."""
    if not masters:
        return 1
    keys = [ms.to_bytes(8, "big") + seq.to_bytes(8, "big") for ms, seq in masters]

    def count(lo: int, hi: int, d: int) -> int:
        if d == 16:
            return 1
        if hi - lo == 1:
            return 2
        a, b = keys[lo], keys[hi - 1]
        p = d
        while a[p] == b[p]:
            p += 1
        n = 2 if p > d else 1
        i = lo
        while i < hi:
            c = keys[i][p]
            j = i + 1
            while j < hi and keys[j][p] == c:
                j += 1
            n += count(i, j, p + 1)
            i = j
        return n

    return count(0, len(keys), 0)


@command("xinfo|stream", -3, Flag.READONLY, 2, 2, 1)
def cmd_xinfo_stream(s: Session, argv: list[bytes]) -> Reply:
    n = len(argv)
    full = n > 3
    count = 10
    if full:
        if argv[3].lower() != b"full" or n not in (4, 6):
            raise _subcommand_syntax(argv)
        if n == 6:
            if argv[4].lower() != b"count":
                raise _subcommand_syntax(argv)
            count = get_int(argv[5])
            if count < 0:
                count = 10
    st = _xinfo_stream(s, argv[2])
    out: dict[bytes, Reply] = {
        b"length": len(st.entries),
        b"radix-tree-keys": len(st.nodes),
        b"radix-tree-nodes": rax_nodes([node.master for node in st.nodes]),
        b"last-generated-id": format_id(st.last_id),
        b"max-deleted-entry-id": format_id(st.max_deleted_id),
        b"entries-added": st.entries_added,
        b"recorded-first-entry-id": format_id(st.first_id),
    }
    if not full:
        out[b"groups"] = len(st.groups)
        first = st.range(MIN_ID, MAX_ID, 1)
        last = st.range(MIN_ID, MAX_ID, 1, True)
        out[b"first-entry"] = first[0] if first else None
        out[b"last-entry"] = last[0] if last else None
        return out
    out[b"entries"] = st.range(MIN_ID, MAX_ID, count)
    groups: list[Reply] = []
    for name in sorted(st.groups):
        g = st.groups[name]
        pel = g.sorted_pel()
        shown = pel[:count] if count else pel
        cons: list[Reply] = []
        for c in sorted(g.consumers):
            mine = [sid for sid in pel if g.pel[sid][2] == c]
            cons.append(
                {
                    b"name": c,
                    b"seen-time": g.consumers[c],
                    b"pel-count": len(mine),
                    b"pending": [
                        [format_id(sid), g.pel[sid][0], g.pel[sid][1]]
                        for sid in (mine[:count] if count else mine)
                    ],
                }
            )
        groups.append(
            {
                b"name": name,
                b"last-delivered-id": format_id(g.last_id),
                b"entries-read": None if g.entries_read == INVALID_ENTRIES_READ else g.entries_read,
                b"lag": _lag(st, g),
                b"pel-count": len(pel),
                b"pending": [[format_id(x), *_nack_reply(g.pel[x])] for x in shown],
                b"consumers": cons,
            }
        )
    out[b"groups"] = groups
    return out


def _nack_reply(nack: tuple[int, int, bytes]) -> list[Reply]:
    return [nack[2], nack[0], nack[1]]
