"""`temporalstore import --rdb FILE` and `temporalstore serve --import-rdb FILE`: a Redis
RDB file becomes the first versions of a new store.

The file is read and parsed whole, and its CRC-64 checked, before storage is touched
(`read_rdb`, a progress bar of bytes read on stderr): a corrupt or truncated file is
refused with nothing written. Then the server takes over its storage as usual and
`import_rdb` refuses a storage that already holds data, commits the keys in batches
(waiting for the flusher when its backlog is full; a second bar counts keys) and
waits until every record is durable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from commands.rdb import RdbError
from commands.rdb_file import RdbContents, parse_rdb
from commands.rdb_import import ImportRefused, apply_contents, check_target
from commands.session import ServerCore

if TYPE_CHECKING:
    from proxy.replication import Node

log = logging.getLogger("temporalstore")

CAPACITY_WAIT_S = 60.0


class RdbImportError(Exception):
    """The import cannot go on; the message says why."""


def read_rdb(path: str) -> RdbContents:
    """Read and check the whole file (RdbImportError naming what is wrong)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        with _bar("reading " + os.path.basename(path), len(data), "B") as bar:

            def progress(pos: int) -> None:
                bar.update(pos - bar.n)

            contents = parse_rdb(data, progress)
    except OSError as e:
        raise RdbImportError(f"cannot read {path}: {e.strerror or e}") from None
    except RdbError as e:
        raise RdbImportError(f"{path} is not a valid RDB file, nothing imported: {e}") from None
    log.info(
        "%s: RDB version %d, %d keys, %d function libraries%s",
        path,
        contents.version,
        len(contents.keys),
        len(contents.functions),
        "" if contents.checksum else " (saved without a checksum: nothing to verify)",
    )
    if contents.empty_keys:
        log.warning("%s: %d empty keys skipped (as Redis skips them)", path, contents.empty_keys)
    return contents


def _bar(desc: str, total: int, unit: str) -> Any:
    """A progress bar on stderr (a tqdm)."""
    from tqdm import tqdm

    scale = unit == "B"
    return tqdm(
        desc=desc,
        total=total,
        unit=unit,
        unit_scale=scale,
        unit_divisor=1024 if scale else 1000,
        file=sys.stderr,
        disable=False,  # also when stderr is not a terminal: an import is a one-off
        mininterval=0.5,
    )


async def import_rdb(state: ServerCore, node: Node, contents: RdbContents, path: str) -> None:
    """Write the file's keys and functions into the (new) store and wait until they
    are durable (RdbImportError when refused or when storage does not take them)."""
    try:
        libraries = check_target(state, contents)
    except ImportRefused as e:
        raise RdbImportError(f"{path}: {e}") from None
    durable = node.durable
    if durable is None:
        raise RdbImportError("an RDB file is imported by a primary only (not a replica)")
    written = skipped = 0
    with _bar("importing", len(contents.keys), " keys") as bar:
        for written, skipped in apply_contents(state, contents, libraries):
            bar.update(written + skipped - bar.n)
            await asyncio.sleep(0)  # the flusher (and -LOADING replies) run between batches
            while durable.over_capacity():
                if not await durable.wait_capacity(CAPACITY_WAIT_S):
                    raise RdbImportError(f"storage does not keep up: {durable.last_error()}")
    if not await durable.wait_durable(state.store.lsn):
        raise RdbImportError(f"storage did not take the import: {durable.last_error()}")
    log.info(
        "imported %s: %d keys (%d already expired, skipped), %d function libraries, up to LSN %d",
        path,
        written,
        skipped,
        len(libraries),
        state.store.lsn,
    )
