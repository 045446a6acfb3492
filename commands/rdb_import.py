"""Loading a parsed RDB file (`commands.rdb_file`) into an empty store: every key as
its first version (command `restore`), keys already expired skipped, the function
libraries loaded (and compiled first, so a library Redis would refuse stops the
import before anything is written). The CLI (`proxy.rdbimport`) drives it."""

from __future__ import annotations

from collections.abc import Iterator

from commands.errors import CommandError
from commands.lua_state import engine_of
from commands.rdb_file import RdbContents
from commands.session import ServerCore
from store import now_ms
from store.ops import SET

BATCH_KEYS = 1000  # keys per commit (one record): each key still gets its own version


class ImportRefused(Exception):
    """The target cannot take the file (it holds data, or the file does not fit it)."""


def check_target(state: ServerCore, contents: RdbContents) -> dict[bytes, bytes]:
    """Refuse a store that holds anything, or a file it cannot hold; return the file's
    function libraries (name -> code), each compiled once to check it."""
    store = state.store
    if (
        any(db.data or len(db.chains) for db in store.dbs)
        or store.functions
        or store.snapshots
        or store.tables
    ):
        raise ImportRefused(
            "the storage already holds data: an RDB file is imported into a new, empty "
            "storage prefix only"
        )
    used = {dbi for dbi, *_ in contents.keys}
    if used and max(used) >= len(store.dbs):
        raise ImportRefused(
            f"the file has keys in database {max(used)}, the server has {len(store.dbs)} "
            "(--databases)"
        )
    if not contents.functions:
        return {}
    try:
        return engine_of(state).restore_libraries(contents.functions, "append")
    except CommandError as e:
        raise ImportRefused(f"function library refused: {e}") from None


def apply_contents(
    state: ServerCore, contents: RdbContents, libraries: dict[bytes, bytes]
) -> Iterator[tuple[int, int]]:
    """Commit the file's keys in batches, yielding (keys written, keys skipped as
    expired) after each (the caller waits for the flusher there), then the libraries."""
    store = state.store
    dbs = store.dbs
    now = now_ms()
    written = skipped = batch = 0
    for dbi, key, value, expire in contents.keys:
        if expire is not None and expire <= now:
            skipped += 1
            continue
        if not batch:
            store.begin("restore")
        store.apply(dbs[dbi], key, (SET, value, expire))
        written += 1
        batch += 1
        if batch == BATCH_KEYS:
            store.commit()
            batch = 0
            yield written, skipped
    if batch:
        store.commit()
    if libraries:
        store.begin("function")
        store.db_op(0, ("functions", [[n, c] for n, c in libraries.items()]))
        store.commit()
    yield written, skipped
