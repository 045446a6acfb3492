"""The commit path's common cases in a straight line (issue 13: fewer instructions
per write).

`version_one` appends the version entry of one key write when nothing unusual is in
the way (no tables, a main-line database, `versions:N` or `all` retention, a chain
that already holds a list, no full copy due); `version_key` does every other case
(`Store.commit` and `Store._version` try `version_one` first). `set_string` is
`Store.apply(db, key, (SET, value, None))` for a bytes value written over a string or
nothing, on a database that is not a branch's; `apply_on` is `Store.apply` for a
value the handler has just read.
Both store and count exactly what the general code does (tests/test_commitpath.py
compares them, field by field, with it).

Compiled by mypyc with the store (tools/compiled.py): the module-level callables are
`Final`, so the compiled code keeps them in C statics instead of looking them up in
the module's dict, and the typed locals (`list`, `dict`) make their operations C calls.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Final

from store.accounting import (
    COMPACT_STRING_BYTES,
    ENTRY_BYTES,
    FIELD_BYTES,
    PACKED_BYTES,
    REPLACED_STRING_BYTES,
    entry_bytes,
)
from store.chains import V_META, V_TIME, V_UNDO, StoredUndo, VersionEntry, _entry_time, compact_undo
from store.core import TRIM_STEP, StoreCore
from store.dataset import STRING_KEY_BYTES, counted_apply_on
from store.ops import CREATED, HSETF, POP_ONE_LEFT, POP_ONE_RIGHT, RESTORE, SET, Op, Undo
from store.records import WriteMeta
from store.values import copy_value

if TYPE_CHECKING:
    from store.database import Database

_dict_get: Final = dict.get
UNREAD: Final = object()  # set_string's `read` when the caller has not read the key


class _OneCmd:
    """The commands tuple `one_cmd` gave last, by its command's name."""

    def __init__(self) -> None:
        self.cmd: object = None
        self.cmds: tuple[str, ...] = ()


_LAST_ONE: Final = _OneCmd()
_ONE_CMDS: Final[dict[str, tuple[str, ...]]] = {}


def one_cmd(cmd: str) -> tuple[str, ...]:
    """`(cmd,)`, the commands of a commit by one command: one tuple per name (a bounded
    set; a tuple per commit cost its allocation and release), the last one at hand (an
    identity test, not a dict lookup: a batch's commits mostly repeat their command)."""
    last = _LAST_ONE
    if cmd is last.cmd:
        return last.cmds
    found = _ONE_CMDS.get(cmd)
    if found is None:
        found = _ONE_CMDS[cmd] = (cmd,)
    last.cmd = cmd
    last.cmds = found
    return found


def version_one(
    store: StoreCore,
    dbi: Any,
    key: bytes,
    undo: Undo,
    cmd: str,
    lsn: Any,
    t: Any,
    meta: WriteMeta | None,
) -> bool:
    """Append the version entry of `key`'s write (and trim its chain) as
    `Store._version` does, when it is the common case; False, having done nothing,
    when it is not."""
    if store.tables or type(dbi) is not int:
        return False
    keep = store.history
    kind = keep.kind
    counted = kind == "versions"  # `versions:N` (compared once: a str comparison)
    if not counted and kind != "all":
        return False
    db: Database = store.dbs[dbi]
    # Typed as a dict: compiled, `get` is dict's own lookup, a C call (mypyc's
    # CPyDict_Get, which a subclass' `get` does not replace); in pure Python it is
    # `Chains.get`, which unpacks a packed first version into a new list. Either way
    # a packed first version is left to `version_key` (the test of `n == 1` below).
    chains: dict[bytes, Any] = db.chains
    chain = chains.get(key)
    if type(chain) is not list:  # a new key, or a packed first version (compiled)
        return False
    if store.tiered and chain is not _dict_get(db.chains, key):
        return False  # pure Python: `Chains.get` read entries back from the spill file
    versions: list[VersionEntry] = chain
    every = store.snapshot_every
    n = len(versions)
    if n % every == every - 1:  # a full copy may be due
        return False
    if n == 1 and versions[0][V_UNDO] is CREATED and versions[0][V_META] is None:
        return False  # maybe a packed first version, unpacked (pure Python)
    size = 0
    stored: StoredUndo = undo
    ops = len(undo)  # tested apart, as in entry_bytes
    if undo is POP_ONE_LEFT or undo is POP_ONE_RIGHT:  # a push of one item
        size = ENTRY_BYTES  # entry_bytes' figure for a count, without the call
    elif ops == 1:
        # compact_undo and entry_bytes' common case (a replaced string) inline: no
        # call per write.
        u = undo[0]
        width = len(u)
        name: str = u[0]  # typed: a str comparison, not a generic one
        if width == 3 and type(u[1]) is bytes:
            old: bytes = u[1]
            exp = u[2]
            if name == RESTORE:
                if exp is None:
                    stored = old
                    size = COMPACT_STRING_BYTES + len(old)
                elif type(exp) is int:
                    size = REPLACED_STRING_BYTES + len(old)
            elif name == HSETF and type(exp) is bytes:  # a field's old value (HSET)
                was: bytes = exp
                size = FIELD_BYTES + len(old) + len(was)
    entry: VersionEntry = (lsn, t, cmd, stored, meta, None)
    versions.append(entry)
    if not size:
        size = entry_bytes(entry)
    mem = store.mem
    mem.main_bytes += size
    mem.main_versions += 1
    if counted and n >= 2 * keep.limit:  # trim_versions' first test, inline
        store.trim_versions(db, key, versions, keep.limit)
    return True


def version_key(
    store: StoreCore,
    dbi: Any,
    key: bytes,
    undo: Undo,
    cmd: str,
    lsn: Any,
    t: Any,
    meta: WriteMeta | None,
) -> None:
    """The version entry of one key's write where `version_one` does not apply
    (`Store._version`): tables, branches, `ms:N` retention, a key's first versions,
    full copies."""
    keep = store.history
    every = store.snapshot_every
    if store.tables:
        policy = store.policy_of(key)
        if policy is not None:
            keep = policy.retain
            every = policy.snapshot_every
    db = store.dbs[dbi] if type(dbi) is int else store.db_of(dbi)
    chains = db.chains
    chain = _dict_get(chains, key)
    mem = store.mem
    if chain is None:
        if undo is CREATED and meta is None and chains.set_born(key, lsn, cmd):
            if type(dbi) is int:
                mem.main_bytes += PACKED_BYTES
                mem.main_versions += 1
                mem.main_packed += 1
            else:
                mem.add(dbi, PACKED_BYTES)
            return
        entry: VersionEntry = (lsn, t, cmd, compact_undo(undo), meta, None)
        chains[key] = [entry]
        mem.add(dbi, entry_bytes(entry))
        return
    if type(chain) is int:
        if chain < 0:  # every entry out of memory (store.coldhistory): new ones go here
            chains.cold[key] = -chain
            fresh: list[VersionEntry] = []
            chain = chains[key] = fresh
        else:
            chain = chains[key] = chains.unpack(chain)
            mem.add(dbi, entry_bytes(chain[0]) - PACKED_BYTES, 0)
            if type(dbi) is int:
                mem.main_packed -= 1
    snap = None
    if len(chain) % every == every - 1:
        v = db.data.get(key)
        # A full copy every `every` versions, but never more often than every
        # len/8 versions, so a write costs O(1) amortized even on a huge
        # collection (an as-of read then undoes up to len/8 versions).
        if (
            v is not None
            and type(v) is not bytes
            and (len(v) <= 8 * every or len(chain) % (len(v) // 8) < every)
        ):
            snap = (copy_value(v), db.expires.get(key))
    entry = (lsn, t, cmd, compact_undo(undo), meta, snap)
    chain.append(entry)
    size = entry_bytes(entry)
    if type(dbi) is int:
        mem.main_bytes += size
        mem.main_versions += 1
    else:
        mem.add(dbi, size)
    if keep.kind == "versions":
        store.trim_versions(db, key, chain, keep.limit)
    elif keep.kind == "ms" and chain[0][V_TIME] < t - keep.limit:
        n = len(chain)
        due = db.trim_next.get(key, 0)
        if n >= due or due - n > TRIM_STEP:
            # Commit times never go back, so the versions older than the
            # window are a prefix (the newest version always stays).
            old = bisect_left(chain, t - keep.limit, 0, n - 1, key=_entry_time)
            store._trim(db, key, chain, old)


def set_string(
    store: StoreCore, db: Database, key: bytes, value: bytes, ttl: Any = None, read: Any = UNREAD
) -> None:
    """`store.apply(db, key, (SET, value, ttl))` for a bytes `value` and `ttl` None (the
    key's expiry cleared) or KEEP_TTL: the same op, undo, expiry change and dataset
    size, without the op table's call. `read`: what `db.get(key)` just returned, if
    the caller read it (not looked up again unless the clock is stopped, see
    `apply_on`)."""
    data = db.data
    expires = db.expires
    if db.overlay or type(data) is not dict or type(expires) is not dict:
        store.apply(db, key, (SET, value, ttl))
        return
    d: dict[bytes, Any] = data
    old = d.get(key) if read is UNREAD or db.frozen_ms is not None else read
    if old is not None and type(old) is not bytes:  # a collection's size is sampled
        store.apply(db, key, (SET, value, ttl))
        return
    e: dict[bytes, int] = expires
    oldexp = e.get(key) if e else None
    d[key] = value
    if oldexp is not None and ttl is None:
        del e[key]
    if old is None:
        db.used += STRING_KEY_BYTES + len(key) + len(value)
        undo: Undo = CREATED if oldexp is None else ((RESTORE, None, oldexp),)
    else:
        was: bytes = old
        db.used += len(value) - len(was)
        undo = ((RESTORE, was, oldexp),)
    store.pending.append((db.ident, key, (SET, value, ttl), undo, store.cmd))


def apply_on(store: StoreCore, db: Database, key: bytes, op: Op, old: Any) -> Undo:
    """`store.apply(db, key, op)` where `old` is what `db.get(key)` just returned (a
    handler's read of the value it changes): the op and the dataset's count take it
    instead of looking the key up again (`get` removed an expired key, so it is what
    the lookup would find). Not on a branch's database, nor on one with a stopped
    clock (`frozen_ms`: a read-only view), where `get` answers None for an expired
    value it leaves in place. Returns the op's undo."""
    if db.overlay or db.frozen_ms is not None:
        store.apply(db, key, op)
        undone: Undo = store.pending[-1][3]
        return undone
    undo = counted_apply_on(db, key, op, old)
    store.pending.append((db.ident, key, op, undo, store.cmd))
    return undo
