"""Branches and merges.

TS.BRANCH CREATE <name> [FROM <at>]   fork the main line (now, or at a point); O(1)
TS.BRANCH CREATE <name> FROM BRANCH <parent> [AT <at>]   fork a branch (now, or at a point)
TS.BRANCH DROP <name> [CASCADE]       forget a branch (connections on it go back to HEAD);
                                      CASCADE also drops the branches forked from it
TS.BRANCH LIST                        name, parent, fork version, latest version, keys changed
TS.MERGE <source> [INTO <target>] [STRATEGY FAIL|OURS|THEIRS]
    Apply the source branch's changes since its fork to the target (default: the
    main line, also named `main`; or any other branch: its parent, an ancestor, a
    sibling) as new versions. FAIL (the default) refuses when a key changed on both
    sides to different values, listing the keys; OURS keeps the target's value for
    those keys, THEIRS takes the source's. Replies the number of keys merged.
TS.CHECKOUT <branch> (in commands.temporal) points this connection's reads and
writes at the branch.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, NamedTuple

from commands.branch_lookup import branch_name, get_branch
from commands.errors import SYNTAX, CommandError
from commands.points import parse_at
from commands.registry import Flag, command, container
from commands.replies import OK, Reply
from commands.session import Session
from commands.slices import map_in_slices, run_sliced, sliced, write_in_slices
from store import Database
from store.branches import Branch
from store.keyspace import _entry_lsn
from store.ops import DEL, RESTORE
from store.values import copy_value

MAIN = b"main"
EXISTS = "ERR branch '{}' already exists"
RESERVED = "ERR '{}' is not a valid branch name"
CONFLICT = "ERR CONFLICT merging '{}' into '{}': changed on both sides: {}"
HAS_CHILDREN = (
    "ERR branch '{}' has branches forked from it ({}): drop them first, "
    "or TS.BRANCH DROP ... CASCADE to drop them too"
)

# Branches would fork each shard on its own, with no cluster-wide branch to check out.
IN_CLUSTER = (
    "ERR TS.BRANCH CREATE is not supported in cluster mode: a branch would fork one "
    "shard only; TS.SEAL a cluster snapshot and TS.CHECKOUT AT SNAPSHOT it instead"
)

container("ts.branch", -2)


@command("ts.branch|create", -3, Flag.WRITE | Flag.DENYOOM)
def cmd_branch_create(s: Session, argv: list[bytes]) -> Reply:
    if s.server.cluster is not None:
        raise CommandError(IN_CLUSTER)
    name = argv[2]
    if not name or name.lower() in (MAIN, b"head", b"at") or b" " in name:
        raise CommandError(RESERVED.format(branch_name(name)))
    fork = s.store.lsn
    parent: bytes | None = None
    if len(argv) > 3:
        if argv[3].lower() != b"from":
            raise CommandError(SYNTAX)
        i = 4
        if i + 1 < len(argv) and argv[i].lower() == b"branch":
            parent = argv[i + 1]
            i += 2
            if i < len(argv):
                if argv[i].lower() != b"at":
                    raise CommandError(SYNTAX)
                fork, i = parse_at(s, argv, i + 1)
        else:
            fork, i = parse_at(s, argv, i)
        if i != len(argv):
            raise CommandError(SYNTAX)
    if parent is not None and parent.lower() in (MAIN, b"head"):
        parent = None  # FROM BRANCH main: the main line
    if parent is not None:
        get_branch(s, parent)
    if name in s.store.branches:
        raise CommandError(EXISTS.format(branch_name(name)))
    s.store.db_op(s.dbi, ("branch", name, fork) + (() if parent is None else (parent,)))
    return OK


@command("ts.branch|drop", -3, Flag.WRITE)
def cmd_branch_drop(s: Session, argv: list[bytes]) -> Reply:
    name = argv[2]
    cascade = False
    if len(argv) == 4 and argv[3].lower() == b"cascade":
        cascade = True
    elif len(argv) != 3:
        raise CommandError(SYNTAX)
    get_branch(s, name)
    below = s.store.branches.descendants(name)
    if below and not cascade:
        children = b", ".join(s.store.branches.children(name))
        raise CommandError(HAS_CHILDREN.format(branch_name(name), branch_name(children)))
    for dropped in [*below, name]:  # deepest first: a parent outlives its children
        s.store.db_op(s.dbi, ("dropbranch", dropped))
        for other in [s, *s.server.clients.values()]:
            if other.branch == dropped:
                other.branch = None
                other.select(other.dbi)
    return OK


@command("ts.branch|list", 2, Flag.READONLY)
def cmd_branch_list(s: Session, argv: list[bytes]) -> Reply:
    out: list[Reply] = []
    for name in sorted(s.store.branches):
        b = get_branch(s, name)
        out.append(
            {
                b"name": name,
                b"parent": MAIN if b.parent is None else b.parent,
                b"fork": b.fork_lsn,
                b"latest": b.latest_lsn(),
                b"changed": b.changed_keys(),
            }
        )
    return out


def _state(db: Database, key: bytes) -> tuple[Any, int | None]:
    value = db.data.get(key)
    return value, (db.expires.get(key) if value is not None else None)


def _changed_on_main(db: Database, key: bytes, fork: int) -> bool:
    chain = db.chains.get(key)
    if not chain:
        return False
    return bisect_right(chain, fork, key=_entry_lsn) < len(chain)


@command("ts.merge", -2, Flag.WRITE)
def cmd_ts_merge(s: Session, argv: list[bytes]) -> Reply:
    source = get_branch(s, argv[1])
    target: Branch | None = None
    strategy = b"fail"
    i = 2
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"into" and i + 1 < len(argv):
            if argv[i + 1].lower() not in (MAIN, b"head"):
                target = get_branch(s, argv[i + 1])
            i += 2
        elif opt == b"strategy" and i + 1 < len(argv):
            strategy = argv[i + 1].lower()
            if strategy not in (b"fail", b"ours", b"theirs"):
                raise CommandError(SYNTAX)
            i += 2
        else:
            raise CommandError(SYNTAX)
    if target is source:
        raise CommandError("ERR cannot merge a branch into itself")
    store = s.store
    keys = [
        (src_db, store.dbs[n] if target is None else target.dbs[n], key)
        for n, src_db in enumerate(source.dbs)
        for key in sorted(src_db.chains)
    ]

    # Into an ancestor (the main line, or a branch the source descends from): a key the
    # ancestor changed since the source's line left it is a conflict. Into any other
    # branch: a key that branch changed at all.
    lineage = store.branches.lineage(source.name)
    into = None if target is None else target.name
    diverged = next((b.fork_lsn for b in lineage if b.parent == into), None)

    def compare(item: tuple[Database, Database, bytes]) -> _Merge | None:
        src_db, dst_db, key = item
        theirs = _state(src_db, key)
        if theirs == _state(dst_db, key):
            return None
        if diverged is not None:
            both = _changed_on_main(dst_db, key, diverged)
        else:
            both = key in dst_db.chains
        return _Merge(dst_db, key, theirs[0], theirs[1], both)

    def check(merges: list[_Merge | None]) -> list[_Merge]:
        conflicts = [m.key for m in merges if m is not None and m.both]
        if conflicts and strategy == b"fail":
            shown = b", ".join(conflicts[:20]) + (b", ..." if len(conflicts) > 20 else b"")
            into = MAIN if target is None else target.name
            raise CommandError(
                CONFLICT.format(branch_name(source.name), branch_name(into), branch_name(shown))
            )
        return [m for m in merges if m is not None and not (m.both and strategy == b"ours")]

    def write(m: _Merge) -> bool:
        if m.value is None:
            store.apply(m.db, m.key, (DEL,))
        else:
            store.apply(m.db, m.key, (RESTORE, copy_value(m.value), m.expire))
        return True

    if not sliced(s, len(keys)):
        return sum(write(m) for m in check([compare(k) for k in keys]))

    async def merge() -> Reply:
        plan = check(await map_in_slices(compare, keys))
        return await write_in_slices(s, "ts.merge", plan, write)

    return run_sliced(merge)


class _Merge(NamedTuple):
    """One key TS.MERGE would write: its state on the source branch."""

    db: Database
    key: bytes
    value: Any
    expire: int | None
    both: bool  # changed on both sides since the fork (a conflict)
