"""Version chains: one entry per committed version of a key, oldest first.

Most keys are written once; their chain is a single int packing the creating
LSN and a code naming the command, until a second version arrives."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from store.opnames import CREATED, RESTORE, Undo
from store.records import WriteMeta

# What a version entry keeps of its undo: the ops, or (the common retained version,
# a string replaced by a write that left no expiry behind) the replaced bytes alone,
# standing for ((RESTORE, old, None),): two tuples (112 bytes) less per version.
StoredUndo = Undo | bytes


# One version of a key: (lsn, time_ms, cmd, undo, meta, snap), a plain tuple (issue
# 13: a named tuple's construction goes through `tuple.__new__`'s generic call and its
# release through the subclass' deallocator, ~1,000 instructions per write more), read
# with the indexes below. `undo` is what `compact_undo` keeps (`undo_ops` gives the ops
# either way); `snap`, every SNAPSHOT-EVERY versions of a collection, a copy of its
# state after this version, so an as-of read replays at most that many undos.
# The open tail (`*tuple[Any, ...]`, never used: an entry has six items) keeps it a
# boxed tuple in compiled code: mypyc holds a fixed-length tuple type unboxed, item by
# item, and builds a new tuple (and new int objects) each time it stores one in a list.
VersionEntry = tuple[
    int,
    int,
    str,
    StoredUndo,
    "WriteMeta | None",
    "tuple[Any, int | None] | None",
    *tuple[Any, ...],
]
V_LSN: Final = 0
V_TIME: Final = 1
V_CMD: Final = 2
V_UNDO: Final = 3
V_META: Final = 4
V_SNAP: Final = 5


def entry_created(e: VersionEntry) -> bool:
    """This version brought the key into existence (nothing older to read)."""
    undo = e[V_UNDO]
    if isinstance(undo, bytes):
        return False
    return len(undo) == 1 and undo[0][0] == RESTORE and undo[0][1] is None


def compact_undo(undo: Undo) -> StoredUndo:
    """What a version entry keeps of `undo`: the replaced bytes alone for
    ((RESTORE, bytes, None),), else the ops themselves."""
    if len(undo) == 1:
        u = undo[0]
        if len(u) == 3 and u[2] is None and type(u[1]) is bytes and u[0] == RESTORE:
            old: bytes = u[1]
            return old
    return undo


def undo_ops(undo: StoredUndo) -> Undo:
    """The ops of a version entry's stored undo (`compact_undo`'s inverse)."""
    if isinstance(undo, bytes):
        return ((RESTORE, undo, None),)
    return undo


# A key whose only version created it (no metadata) keeps that version packed in
# one int: its LSN shifted past a small code naming the command. The commit time is


def _entry_lsn(e: VersionEntry) -> int:
    return e[V_LSN]


def _entry_time(e: VersionEntry) -> int:
    return e[V_TIME]


# the time index's; the undo is CREATED. Most keys are written once, and this saves
# a list, a VersionEntry and a time per key (most of the history's memory).
_CMD_BITS = 10
_CMD_MASK = (1 << _CMD_BITS) - 1
_cmd_names: list[str] = []
_cmd_codes: dict[str, int] = {}
_dict_get = dict.get


def cmd_code(cmd: str) -> int | None:
    """The packing code of a command name (None once the code space is full)."""
    code = _cmd_codes.get(cmd)
    if code is None and len(_cmd_names) <= _CMD_MASK:
        code = _cmd_codes[cmd] = len(_cmd_names)
        _cmd_names.append(cmd)
    return code


def cmd_names() -> list[str]:
    """The command names packed versions refer to, by code (checkpoints keep them)."""
    return list(_cmd_names)


def translate_codes(names: list[str]) -> list[int | None] | None:
    """This process's codes for another's command `names` (a checkpoint's): None
    when they are the same codes, so packed versions can be taken as they are."""
    table = [cmd_code(name) for name in names]
    return None if all(c == i for i, c in enumerate(table)) else table


class Chains(dict[bytes, Any]):
    """key -> version chain (oldest first). Reads (`get`, `[]`, `items`, `values`)
    always see lists of `VersionEntry`; a packed first version is unpacked on the
    way (and stays packed), and entries moved out of memory (store.coldhistory) are
    read back from `spill` in front of the ones in memory. A slot holds a list, a
    packed creation (an int >= 0), or, for a key whose entries are all out of memory,
    its cold reference negated (an int < 0); a key with entries both in memory and
    out keeps its cold reference in `cold`. Only the commit point writes packed
    entries."""

    __slots__ = ("cold", "spill", "time_of")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.time_of: Callable[[int], int] = _no_time
        self.cold: dict[bytes, int] = {}
        self.spill: Any = None

    def born(self, key: bytes) -> tuple[int, str] | None:
        """(LSN, command) of a key whose chain is one packed creation, else None."""
        v = self.packed(key)
        return None if v is None else (v >> _CMD_BITS, _cmd_names[v & _CMD_MASK])

    def set_born(self, key: bytes, lsn: int, cmd: str) -> bool:
        """Record a key's creating version packed; False where it cannot be."""
        code = cmd_code(cmd)
        if code is None:
            return False
        self[key] = lsn << _CMD_BITS | code
        return True

    def add_born(self, key: bytes, lsn: int, cmd: str) -> None:
        """Record a key's creating version (committed earlier: its time is indexed),
        packed where it can be."""
        if not self.set_born(key, lsn, cmd):
            self[key] = [self._created(lsn, cmd)]

    def _created(self, lsn: int, cmd: str) -> VersionEntry:
        return (lsn, self.time_of(lsn), cmd, CREATED, None, None)

    def packed(self, key: bytes) -> int | None:
        """The packed creating version of `key`, if that is all its chain is."""
        v = _dict_get(self, key)
        return v if type(v) is int and v >= 0 else None

    def raw_many(self, keys: list[bytes]) -> list[Any]:
        """What the slots of `keys` hold: packed ints, lists, negated cold references
        or None."""
        return list(map(_dict_get.__get__(self), keys))

    def add_packed(
        self, keys: Iterable[bytes], packed: Iterable[int], names: list[str], table: Any
    ) -> None:
        """Take packed versions written by a process whose command codes were `names`;
        `table` is `translate_codes(names)` (None: the same codes, no work per key)."""
        if table is None:
            self.update(zip(keys, packed, strict=True))
            return
        for key, v in zip(keys, packed, strict=True):
            self.add_born(key, v >> _CMD_BITS, names[v & _CMD_MASK])

    def unpack(self, v: Any) -> list[VersionEntry]:
        """The entries a slot's `v` stands for, without those in `cold`."""
        if type(v) is not int:
            return v  # type: ignore[no-any-return]
        if v < 0:
            return self.spill.entries(-v)  # type: ignore[no-any-return]
        return [self._created(v >> _CMD_BITS, _cmd_names[v & _CMD_MASK])]

    def whole(self, key: bytes, v: Any) -> Any:
        """The chain of `key` whose slot holds `v`, cold entries read back in front."""
        ref = self.cold.get(key)
        if ref is None:
            return self.unpack(v)
        old: list[VersionEntry] = self.spill.entries(ref)
        return old + v

    def get(self, key: bytes, default: Any = None) -> Any:
        v = _dict_get(self, key, default)
        if type(v) is int:
            return self.unpack(v)
        if self.cold and v is not default:
            return self.whole(key, v)
        return v

    def since(self, key: bytes, lsn: int) -> Any:
        """The entries of `key` newer than `lsn`, oldest first, and maybe older ones
        before them (an as-of read bisects for the first newer one and reads on from
        there): frozen runs older than what it needs are not read back."""
        v = _dict_get(self, key)
        if type(v) is int:
            return self.unpack(v) if v >= 0 else self.spill.since(-v, lsn)
        if v is None:
            return ()
        if self.cold and (not v or v[0][V_LSN] > lsn):
            ref = self.cold.get(key)
            if ref is not None:
                return self.spill.since(ref, lsn) + v
        return v

    def __getitem__(self, key: bytes) -> list[VersionEntry]:
        v = dict.__getitem__(self, key)
        if self.cold and type(v) is not int:
            return self.whole(key, v)  # type: ignore[no-any-return]
        return self.unpack(v)

    def values(self) -> list[list[VersionEntry]]:  # type: ignore[override]
        if self.cold:
            return [
                self.unpack(v) if type(v) is int else self.whole(k, v) for k, v in dict.items(self)
            ]
        return [self.unpack(v) for v in dict.values(self)]

    def items(self) -> list[tuple[bytes, list[VersionEntry]]]:  # type: ignore[override]
        if self.cold:
            return [
                (k, self.unpack(v) if type(v) is int else self.whole(k, v))
                for k, v in dict.items(self)
            ]
        return [(k, self.unpack(v)) for k, v in dict.items(self)]


def _no_time(lsn: int) -> int:
    return 0
