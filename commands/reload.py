"""DEBUG RELOAD and DEBUG LOADAOF (`commands.debug` describes them): the options, the
rebuild from storage (or, without storage, from a checkpoint image in memory), and
what follows it as it follows a load in Redis: values take the encodings Redis gives
on load, sessions see the new databases, watchers of every non-empty database are
told, and LRU/LFU tracking starts afresh.

Unlike Redis, they are refused inside MULTI/EXEC and scripts (IN_EXEC): the block's
writes so far are applied in memory but committed only when it ends, so storage
cannot hold them for the rebuild.
"""

from __future__ import annotations

import logging
from typing import Any

from commands.access import policy_changed
from commands.errors import CommandError
from commands.replies import OK, ErrorReply, Reply, deferred
from commands.session import ServerCore, Session
from store import PrunedError, Store
from store.values import LIMITS, HashSet, HashTable, ZSet, is_int_member

log = logging.getLogger("temporalstore")

RELOAD_OPTIONS = "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
LOAD_FAILED = b"ERR Error trying to load the RDB dump"
_OPTIONS = {b"merge", b"noflush", b"nosave"}
IN_EXEC = "ERR DEBUG RELOAD and LOADAOF cannot run inside MULTI/EXEC or a script here"


def reload_reply(s: Session, argv: list[bytes]) -> Reply:
    """DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE], or DEBUG LOADAOF (no new checkpoint)."""
    if s.in_exec:
        # Inside EXEC (or a script) the block's writes are applied but not committed:
        # storage cannot hold them yet, so a rebuild from it would lose them.
        raise CommandError(IN_EXEC)
    aof = argv[1].lower() == b"loadaof"  # LOADAOF takes no options (Redis ignores any)
    opts = set() if aof else {opt.lower() for opt in argv[2:]}
    if not opts <= _OPTIONS:
        raise CommandError(RELOAD_OPTIONS)
    save = not aof and b"nosave" not in opts
    flush, merge = b"noflush" not in opts, b"merge" in opts
    store = s.store
    if not flush and not merge and (store.functions or any(db.data for db in store.dbs)):
        # Loading over what is in memory would meet every key and library again:
        # Redis refuses a library that exists (and stops at a duplicate key).
        log.warning("DEBUG RELOAD NOFLUSH: the data to load is already in memory")
        return ErrorReply(LOAD_FAILED)
    server = s.server

    async def run() -> Reply:
        nonempty = [i for i, db in enumerate(store.dbs) if db.data]
        try:
            await _rebuild(server, store, save)
        except Exception as e:  # storage unreachable, fenced: the data stays as it was
            log.error("DEBUG RELOAD failed: %s", e)
            # Redis: -ERR when the save fails, its load error when the load does.
            return ErrorReply(LOAD_FAILED if server.loading else b"ERR")
        finally:
            server.loading = False
        after_load(server, nonempty)
        return OK

    return deferred(run)


async def _rebuild(server: ServerCore, store: Store, save: bool) -> None:
    dur = server.durability

    def dropping() -> None:
        server.loading = True  # other clients get -LOADING until the rebuild is done

    if dur is not None:
        await dur.reload(save, dropping)
        return
    items = iter(list(store.export_image()))  # no storage: a checkpoint image in memory
    head: Any = next(items)
    dropping()
    undo = store.reset()
    try:
        store.import_image(head, items)
    except BaseException:
        undo()
        raise


def after_load(server: ServerCore, nonempty: list[int]) -> None:
    store = server.store
    for db in store.dbs:
        data = db.data
        for key, value in data.items():
            loaded = load_encoding(value)
            if loaded is not value:
                data[key] = loaded
    policy_changed(store.dbs, server.config.params)
    for s in list(server.clients.values()):
        try:
            s.select(s.dbi)
        except PrunedError:  # a view whose point retention has since dropped
            s.view_lsn = None
            s.select(s.dbi)
    for dbi in nonempty:
        store.touch_db(dbi)


def load_encoding(v: Any) -> Any:
    """The value with the encoding Redis gives it when DEBUG RELOAD saves and loads it
    (rdbLoadObject): a compact value (listpack, intset) is saved as such and converted
    only if it has more entries than the limit now allows; a converted one is loaded
    compact again when it fits the limits (entries, and element lengths), and an intset
    needs integers."""
    t = type(v)
    if t is dict:
        return HashTable(v) if len(v) > LIMITS.hash_entries else v
    if t is HashTable:
        limit = LIMITS.hash_value
        if len(v) <= LIMITS.hash_entries and all(
            len(f) <= limit and len(x) <= limit for f, x in v.items()
        ):
            return dict(v)
    elif t is set:
        return HashSet(v) if len(v) > LIMITS.set_entries else v
    elif t is HashSet:
        if len(v) <= LIMITS.set_entries and all(map(is_int_member, v)):
            return set(v)
    elif t is ZSet:
        if v.big:
            v.big = not (
                len(v) <= LIMITS.zset_entries and all(len(m) <= LIMITS.zset_value for m in v.scores)
            )
        else:
            v.big = len(v) > LIMITS.zset_entries
    return v
