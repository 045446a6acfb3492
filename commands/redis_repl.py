"""Redis' own replica protocol, served to Redis replicas (`redis-server --replicaof`,
`redis-cli --replica`, the Redis suite's `attach_to_replication_stream`).

SYNC · PSYNC replid offset
    A full resynchronization: PSYNC answers `+FULLRESYNC <replid> <offset>` (never
    `+CONTINUE`: there is no byte backlog to continue from), then both send the
    dataset as an RDB file (`$<len>\\r\\n` and the file, no CRLF after it), and from
    then on every write as redis-server 7.0 propagates it (`commands.propagate`), a
    `SELECT` before a command of another database than the one before, PINGs every
    `repl-ping-replica-period` seconds. The connection answers nothing more (as a
    replica's client in Redis); `REPLCONF ACK <offset>` records the replica's offset.

Our own replicas (`TS.FOLLOW`, `proxy.replication`) stream records, not commands; both
kinds can be attached at once. INFO replication's `master_repl_offset` is the LSN (the
offset our own replicas use) until a Redis replica first attaches; from there on it
moves with every byte sent to Redis replicas.

While no Redis replica is attached `ServerState.repl_stream` is None and the
dispatcher's one test per command skips all of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from commands.encodings import object_encoding
from commands.errors import CommandError
from commands.geohash import encode as geo_encode
from commands.limits import rss_bytes
from commands.notify import set_expiry_hook
from commands.ops_state import REPLY_OFF
from commands.propagate import RULES, Out
from commands.rdb_write import _compress, _fill, dump_payload, rdb_file, serialize
from commands.registry import Flag, command
from commands.replies import NO_REPLY, Encoded, Reply
from commands.replstate import PING_ARGV, RedisReplica, ReplStream
from commands.session import Session

REDIS_VER = b"7.0.15"
NO_MASTER_LINK = "NOMASTERLINK Can't SYNC while not connected with my master"
PENDING_OUTPUT = "ERR SYNC and PSYNC are invalid with pending output"


def attach(s: Session) -> ReplStream:
    """Make the session a Redis replica of this server; the stream exists from now on."""
    server = s.server
    rs = server.repl_stream
    if rs is None:
        rs = server.repl_stream = server.redis_repl
        if not rs.offset:
            rs.offset = s.store.lsn  # master_repl_offset goes on from the LSN it showed
        rs.effects = effects
        set_expiry_hook(server)  # the store's expiry hook now also feeds the stream
        if rs.pinger is None or rs.pinger.done():
            with contextlib.suppress(RuntimeError):  # no loop: in-process tests
                rs.pinger = asyncio.get_running_loop().create_task(_ping(server))
    rs.seldb = -1  # as replicationSetupSlaveForFullResync: the stream selects again
    ip = s.repl_ip or s.addr.rsplit(":", 1)[0]
    rs.replicas[s.id] = RedisReplica(s, ip, s.repl_port)
    return rs


async def _ping(server: Any) -> None:
    """replicationCron: a PING into the stream every repl-ping-replica-period seconds
    (in the database last selected: no SELECT for it)."""
    last = time.monotonic()
    while server.repl_stream is not None:
        await asyncio.sleep(1)
        rs = server.repl_stream
        if rs is None:
            return
        try:
            period = int(server.config.params.get("repl-ping-replica-period", "10"))
        except ValueError:
            period = 10
        if time.monotonic() - last >= period:
            last = time.monotonic()
            if rs.replicas and not rs.depth:
                rs.feed(server, rs.seldb, PING_ARGV)


def effects(s: Session, own: list[Any]) -> Out:
    """Each main-line key the command changed, as its state now: RESTORE or DEL."""
    out: Out = []
    seen: set[tuple[int, bytes]] = set()
    store = s.store
    for dbi, key, *_rest in own:
        if type(dbi) is not int or key is None or (dbi, key) in seen:
            continue
        seen.add((dbi, key))
        db = store.dbs[dbi]
        value = db.data.get(key)
        if value is None:
            out.append((dbi, [b"DEL", key]))
            continue
        payload = dump_payload(value, _compress(s), _fill(s), object_encoding(value))
        at = db.ttl_ms(key)
        args = [b"RESTORE", key, b"%d" % (at or 0), payload, b"REPLACE"]
        out.append((dbi, [*args, b"ABSTTL"] if at else args))
    return out


def _geoadd(s: Session, argv: list[bytes], own: list[Any], reply: Reply) -> Out | None:
    """GEOADD is propagated as the ZADD it runs (`zadd`, as geoaddCommand names it):
    the options, then each member's score, the 52-bit geohash of its position."""
    i = 2
    while i < len(argv) and argv[i].lower() in (b"nx", b"xx", b"ch"):
        i += 1
    out = [b"zadd", *argv[1:i]]
    for j in range(i, len(argv) - 2, 3):
        lon, lat = float(argv[j]), float(argv[j + 1])
        out += (b"%d" % geo_encode(lon, lat), argv[j + 2])
    return [(s.dbi, out)]


RULES["geoadd"] = _geoadd


def snapshot(s: Session) -> bytes:
    """The dataset as an RDB file: every database's live keys with their expiries,
    and the function libraries."""
    store = s.store
    compress, fill = _compress(s), _fill(s)
    dbs = []
    for db in store.dbs:
        keys = []
        live = db.keys()  # without the expired ones
        for key in live:
            value = db.data.get(key)
            if value is None:
                continue
            ser = serialize(value, compress, fill, object_encoding(value))
            keys.append((key, ser, db.expires.get(key)))
        dbs.append((db.index, keys))
    rs = s.server.redis_repl
    aux = [
        (b"redis-ver", REDIS_VER),
        (b"redis-bits", b"64"),
        (b"ctime", b"%d" % int(time.time())),
        (b"used-mem", b"%d" % rss_bytes()),
        (b"repl-stream-db", b"0"),
        (b"repl-id", s.server.replid.encode()),
        (b"repl-offset", b"%d" % rs.offset),
        (b"aof-base", b"0"),
    ]
    return rdb_file(aux, list(store.functions.values()), dbs)


def _full_sync(s: Session, psync: bool) -> Reply:
    server = s.server
    if server.replication.is_replica:
        # As Redis while its own link is down: our replicas serve no Redis replicas.
        raise CommandError(NO_MASTER_LINK)
    if s.batch_out:
        # Replies to commands sent before it in the same read are not written yet
        # (Redis' clientHasPendingReplies): the RDB would overtake them.
        raise CommandError(PENDING_OUTPUT)
    rs = attach(s)
    rdb = snapshot(s)
    head = b"+FULLRESYNC %s %d\r\n" % (server.replid.encode(), rs.offset) if psync else b""
    s.push(Encoded(head + b"$%d\r\n" % len(rdb) + rdb))
    s.reply_mode = REPLY_OFF  # a replica gets no replies
    s.redis_replica = True  # client-output-buffer-limit's replica class applies
    server.sync_full += 1
    return NO_REPLY


_SYNC_FLAGS = Flag.ADMIN | Flag.NOSCRIPT | Flag.NO_MULTI | Flag.NO_ASYNC_LOADING


@command("sync", 1, _SYNC_FLAGS)
def cmd_sync(s: Session, argv: list[bytes]) -> Reply:
    return _full_sync(s, False)


@command("psync", -3, _SYNC_FLAGS)
def cmd_psync(s: Session, argv: list[bytes]) -> Reply:
    reply = _full_sync(s, True)
    if argv[1] != b"?":
        s.server.sync_partial_err += 1  # asked to continue: there is no backlog to
    return reply
