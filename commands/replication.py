"""Replication as clients see it: roles, replica links, and waiting for replicas.

ROLE                              master: ["master", lsn, [[ip, port, acked], ...]];
                                  replica: ["slave", host, port, state, applied lsn]
REPLICAOF host port | NO ONE      follow a primary / become one (SLAVEOF: the same)
REPLCONF listening-port p | ip-address a | capa x | ACK lsn
                                  what a replica tells its primary (ACK gets no reply)
WAIT numreplicas timeout-ms       replicas that applied this connection's last write
TS.LASTLSN                        the LSN this connection's last write got (0: none)
TS.WAITLSN lsn timeout-ms         wait until this node has applied `lsn`; replies
                                  the LSN it has applied (compare: below `lsn` is a
                                  timeout)
TS.FOLLOW lsn                     (replicas only) turn this connection into a replica
                                  link that receives every record from `lsn` on

Offsets are LSNs: a replica's offset is the last LSN it applied, the primary's is
its last committed LSN. The state lives in `ReplicationState`; what needs the
network (streaming records to a link, switching roles) is done by the proxy
(`proxy.replication`) through the callables it installs here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from commands.errors import READONLY, SYNTAX, CommandError
from commands.parsing import get_range_long, string2ll, timeout_ms
from commands.registry import Flag, command
from commands.replies import OK, Frames, Reply, Simple, _deferred
from commands.replstate import ReplicationState
from commands.session import Session

NOT_REPLICA_LINK = "ERR TS.FOLLOW is for replicas (this node is a replica itself)"
INVALID_LSN = "ERR value is not an integer or out of range"


def replication(s: Session) -> ReplicationState:
    """This node's replication state."""
    return s.server.replication


@command("role", 1, Flag.NOSCRIPT | Flag.LOADING | Flag.STALE | Flag.FAST)
def cmd_role(s: Session, argv: list[bytes]) -> Reply:
    r = replication(s)
    if r.is_replica:
        state = b"connected" if r.link_up else b"connect"
        return [b"slave", r.master_host.encode(), r.master_port, state, s.store.lsn]
    links: list[Reply] = [
        [link.ip.encode(), str(link.port).encode(), str(link.acked).encode()]
        for link in r.links.values()
    ]
    stream = s.server.repl_stream  # Redis replicas (commands.redis_repl): byte offsets
    if stream is not None:
        clients = s.server.clients
        links += [
            [rep.ip.encode(), str(rep.port).encode(), str(rep.acked).encode()]
            for cid, rep in stream.replicas.items()
            if cid in clients
        ]
    # The offset INFO replication's master_repl_offset shows.
    return [b"master", s.server.redis_repl.offset or s.store.lsn, links]


def _replicaof(s: Session, argv: list[bytes]) -> Reply:
    r = replication(s)
    host, port = argv[1], argv[2]
    if host.lower() == b"no" and port.lower() == b"one":
        if r.is_replica and r.switch is not None:
            r.switch(None, 0)
        return OK
    n = string2ll(port)
    if n is None or not 0 <= n <= 65535:
        raise CommandError("ERR Invalid master port")
    if r.switch is None:
        raise CommandError("ERR this server cannot become a replica (no object storage)")
    if r.is_replica and r.master_host == host.decode() and r.master_port == n:
        return Simple(b"OK Already connected to specified master")
    r.switch(host.decode(), n)
    return OK


@command("replicaof", 3, Flag.ADMIN | Flag.NOSCRIPT | Flag.STALE | Flag.NO_ASYNC_LOADING)
def cmd_replicaof(s: Session, argv: list[bytes]) -> Reply:
    return _replicaof(s, argv)


@command("slaveof", 3, Flag.ADMIN | Flag.NOSCRIPT | Flag.STALE | Flag.NO_ASYNC_LOADING)
def cmd_slaveof(s: Session, argv: list[bytes]) -> Reply:
    return _replicaof(s, argv)


@command("replconf", -1, Flag.ADMIN | Flag.NOSCRIPT | Flag.LOADING | Flag.STALE | Flag.ALLOW_BUSY)
def cmd_replconf(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) % 2 == 0:
        raise CommandError(SYNTAX)
    r = replication(s)
    for i in range(1, len(argv), 2):
        opt, value = argv[i].lower(), argv[i + 1]
        if opt == b"ack":
            n = string2ll(value)
            if n is not None:
                stream = s.server.repl_stream  # a Redis replica (commands.redis_repl)?
                if stream is not None and stream.ack(s.id, n):
                    r.acked()
                else:
                    r.ack(s.id, n)
            return Frames([])  # an ACK has no reply
        if opt == b"listening-port":
            s.repl_port = get_range_long(value, 0, 65535)
        elif opt == b"ip-address":
            s.repl_ip = value.decode(errors="replace")
        elif opt not in (b"capa", b"getack", b"rdb-only", b"rdb-filter-only"):
            raise CommandError(
                f"ERR Unrecognized REPLCONF option: {argv[i].decode(errors='replace')}"
            )
    return OK


@command("wait", 3, Flag.NOSCRIPT)
def cmd_wait(s: Session, argv: list[bytes]) -> Reply:
    n = string2ll(argv[1])
    if n is None:
        raise CommandError(INVALID_LSN)
    timeout = timeout_ms(argv[2])
    r = replication(s)
    if r.is_replica:
        raise CommandError(
            "ERR WAIT cannot be used with replica instances. Please also note "
            "that since Redis 4.0 if a replica is configured to be writable "
            "(which is not the default) writes to replicas are just local and "
            "are not propagated."
        )
    lsn = s.last_write_lsn
    # Redis replicas (SYNC/PSYNC) count once they acknowledged the stream's offset just
    # after this connection's last write (Redis' c->woff).
    stream, woff = s.server.repl_stream, s.repl_woff
    got = r.count_acked(lsn, stream, woff)
    if got >= n or s.in_exec:
        return got
    if stream is not None:
        stream.request_acks(s.server)  # replicationRequestAckFromSlaves

    async def run() -> Reply:
        return await r.wait_acked(n, lsn, timeout, s.server.repl_stream, woff)

    return _deferred(lambda: asyncio.get_running_loop().create_task(run()))


@command("ts.lastlsn", 1, Flag.FAST | Flag.LOADING | Flag.STALE)
def cmd_ts_lastlsn(s: Session, argv: list[bytes]) -> Reply:
    return s.last_write_lsn


@command("ts.waitlsn", 3, Flag.NOSCRIPT | Flag.STALE)
def cmd_ts_waitlsn(s: Session, argv: list[bytes]) -> Reply:
    lsn = string2ll(argv[1])
    if lsn is None or lsn < 0:
        raise CommandError(INVALID_LSN)
    timeout = timeout_ms(argv[2])
    store = s.store
    if store.lsn >= lsn or s.in_exec:
        return store.lsn
    r = replication(s)

    async def run() -> Reply:
        return await r.wait_applied(lambda: store.lsn, lsn, timeout)

    return _deferred(lambda: asyncio.get_running_loop().create_task(run()))


@command("ts.follow", 2, Flag.ADMIN | Flag.NOSCRIPT)
def cmd_ts_follow(s: Session, argv: list[bytes]) -> Reply:
    lsn = string2ll(argv[1])
    if lsn is None or lsn < 1:
        raise CommandError(INVALID_LSN)
    r = replication(s)
    if r.is_replica or r.follow is None:
        raise CommandError(NOT_REPLICA_LINK)
    return r.follow(s, lsn)


__all__: list[Any] = ["READONLY"]
