"""DUMP and RESTORE with Redis 7.0's serialization (`commands.rdb`, `commands.rdb_write`):
a payload from redis-server restores here, and one of ours in redis-server.

RESTORE is one write (one version of the key) and notifies `restore` (after `new`),
as Redis does; a payload whose TTL has already passed deletes a key it REPLACEs
(`del`) and adds nothing. IDLETIME sets the key's idle time under an LRU (or no)
maxmemory-policy, FREQ its LFU counter under an LFU one, as Redis' objectSetLRUOrLFU
(`commands.access.restored`); DEBUG SET-SKIP-CHECKSUM-VALIDATION 1 skips the CRC.
"""

from __future__ import annotations

from commands.access import restored
from commands.errors import (
    BAD_DATA_FORMAT,
    BAD_PAYLOAD,
    BUSYKEY,
    INVALID_FREQ,
    INVALID_IDLETIME,
    INVALID_TTL,
    SYNTAX,
    CommandError,
)
from commands.parsing import get_int
from commands.rdb import RdbError, load_payload, payload_ok
from commands.rdb_write import dump_of
from commands.registry import Flag, command
from commands.replies import OK, Reply
from commands.session import Session
from store import now_ms
from store.ops import DEL, SET


@command("dump", 2, Flag.READONLY, 1, 1, 1)
def cmd_dump(s: Session, argv: list[bytes]) -> Reply:
    value = s.db.get(argv[1])
    if value is None:
        return None
    return dump_of(s, value)


@command("restore", -4, Flag.WRITE | Flag.DENYOOM, 1, 1, 1)
def cmd_restore(s: Session, argv: list[bytes]) -> Reply:
    replace = absttl = False
    idle = freq = -1
    n = len(argv)
    j = 4
    while j < n:
        opt = argv[j].lower()
        more = n - j - 1
        if opt == b"replace":
            replace = True
        elif opt == b"absttl":
            absttl = True
        elif opt == b"idletime" and more >= 1 and freq == -1:
            idle = get_int(argv[j + 1])
            if idle < 0:
                raise CommandError(INVALID_IDLETIME)
            j += 1
        elif opt == b"freq" and more >= 1 and idle == -1:
            freq = get_int(argv[j + 1])
            if freq < 0 or freq > 255:
                raise CommandError(INVALID_FREQ)
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    key = argv[1]
    db = s.db
    exists = db.get(key) is not None
    if exists and not replace:
        raise CommandError(BUSYKEY)
    ttl = get_int(argv[2])
    if ttl < 0:
        raise CommandError(INVALID_TTL)
    payload = argv[3]
    if not payload_ok(payload, s.server.debug.skip_checksum_validation):
        raise CommandError(BAD_PAYLOAD)
    try:
        value = load_payload(payload)
    except RdbError:
        raise CommandError(BAD_DATA_FORMAT) from None
    if ttl and not absttl:
        ttl += now_ms()
    if ttl and ttl <= now_ms():
        if exists:
            s.store.apply(db, key, (DEL,))
        return OK
    s.store.apply(db, key, (SET, value, ttl or None))
    restored(db, key, idle, freq)
    return OK


# RESTORE under the name a cluster node sends between nodes (`commands.migrate`'s doc),
# registered as MIGRATE's module did, right before MIGRATE.
command("restore-asking", -4, Flag.WRITE | Flag.DENYOOM, 1, 1, 1)(cmd_restore)
