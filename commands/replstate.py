"""A node's replication state: its role, its primary (as a replica) or its replica
links (as a primary), and the waits on acknowledgements and applied LSNs. Kept
apart from `commands.replication` (the commands) so the server state can hold one
without importing the commands."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from commands.replies import Encoded, Reply

PING_ARGV = [b"PING"]
GETACK_ARGV = [b"REPLCONF", b"GETACK", b"*"]


@dataclass
class GroupView:
    """What a node knows of its group, for the Sentinel protocol (commands.sentinel)."""

    name: str
    my_id: str
    primary: tuple[str, int] | None = None  # the primary's announced address
    primary_id: str = ""
    epoch: int = 0  # the writer epoch of the primary's term
    replicas: list[tuple[str, int, str, int]] = field(default_factory=list)  # host, port, id, lsn
    nodes: list[tuple[str, int, str]] = field(default_factory=list)  # every node: host, port, id
    down_after_ms: int = 5000


@dataclass
class ReplicaLink:
    """A replica connected to this primary."""

    session_id: int
    ip: str
    port: int
    acked: int = 0  # the last LSN it said it applied
    last_ack: float = field(default_factory=time.time)


@dataclass
class ReplicationState:
    """This node's replication role and links (one per server)."""

    role: str = "master"  # "master" or "slave", as Redis names them
    master_host: str = ""
    master_port: int = 0
    link_up: bool = False
    sync_in_progress: bool = False
    last_io: float = 0.0
    link_down_since: float = field(default_factory=time.time)
    links: dict[int, ReplicaLink] = field(default_factory=dict)
    apply_delay_ms: int = 0  # the newest applied record: primary commit to applied here
    # min-replicas-to-write and min-replicas-max-lag (seconds), as CONFIG SET leaves them.
    min_replicas: int = 0
    min_replicas_lag: int = 10
    group: GroupView | None = None  # --group: what the Sentinel protocol answers
    # Installed by the proxy: start streaming to a link (called with the link's Session,
    # which this module, below the server state, does not name); switch role (host
    # None: NO ONE).
    follow: Callable[[Any, int], Reply] | None = None
    switch: Callable[[str | None, int], None] | None = None
    _acked: asyncio.Event | None = None
    _applied: asyncio.Event | None = None

    @property
    def is_replica(self) -> bool:
        return self.role == "slave"

    def ack(self, session_id: int, lsn: int) -> None:
        link = self.links.get(session_id)
        if link is not None:
            link.acked = max(link.acked, lsn)
            link.last_ack = time.time()
            if self._acked is not None:
                self._acked.set()

    def lag_ms(self) -> int:
        """How far behind its primary this node's data is: on a replica with its link
        up, how long the newest record took from the primary's commit to here; with
        the link down, plus how long it has been down; 0 on a primary."""
        if not self.is_replica:
            return 0
        if self.link_up:
            return self.apply_delay_ms
        return self.apply_delay_ms + int((time.time() - self.link_down_since) * 1000)

    def applied(self, commit_ms: int = 0) -> None:
        """The node applied records up to one committed at `commit_ms` (the
        replica's follower calls this)."""
        self.last_io = time.time()
        if commit_ms:
            self.apply_delay_ms = max(0, int(self.last_io * 1000) - commit_ms)
        if self._applied is not None:
            self._applied.set()

    def good_replicas(self, redis: ReplStream | None = None) -> int:
        """Replicas whose last acknowledgement is at most min-replicas-max-lag seconds
        old (Redis' refreshGoodSlavesCount, in whole seconds as Redis counts them): ours,
        and with `redis` the stream's Redis replicas."""
        acks = [link.last_ack for link in self.links.values()]
        if redis is not None:  # the replicas whose connection is still open
            acks += [
                r.last_ack
                for r in redis.replicas.values()
                if r.session.id in r.session.server.clients
            ]
        return self._good(acks)

    def _good(self, acks: list[float]) -> int:
        now = int(time.time())
        return sum(1 for last in acks if now - int(last) <= self.min_replicas_lag)

    def replicas_short(self, redis: ReplStream | None = None) -> bool:
        """A primary with min-replicas-to-write set and fewer good replicas than that:
        writes are refused with -NOREPLICAS (Redis' checkGoodReplicasStatus)."""
        return (
            not self.is_replica
            and self.min_replicas > 0
            and self.min_replicas_lag > 0
            and self.good_replicas(redis) < self.min_replicas
        )

    def configure(self, name: str, value: str) -> None:
        """CONFIG SET of min-replicas-to-write or min-replicas-max-lag."""
        if name == "min-replicas-to-write":
            self.min_replicas = int(value)
        elif name == "min-replicas-max-lag":
            self.min_replicas_lag = int(value)

    def count_acked(self, lsn: int, redis: ReplStream | None = None, offset: int = 0) -> int:
        """Replicas that acknowledged `lsn` (ours), and with `redis` the stream's Redis
        replicas that acknowledged `offset` (their byte offset)."""
        n = sum(1 for link in self.links.values() if link.acked >= lsn)
        if redis is not None:
            n += sum(1 for rep in redis.replicas.values() if rep.acked >= offset)
        return n

    def acked(self) -> None:
        """A replica acknowledged: WAITs look again."""
        if self._acked is not None:
            self._acked.set()

    async def wait_acked(
        self, n: int, lsn: int, timeout: float | None, redis: ReplStream | None, offset: int
    ) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (got := self.count_acked(lsn, redis, offset)) < n:
            if self._acked is None:
                self._acked = asyncio.Event()
            self._acked.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return got
            try:
                async with asyncio.timeout(left):
                    await self._acked.wait()
            except TimeoutError:
                return self.count_acked(lsn, redis, offset)
        return got

    async def wait_applied(self, current: Callable[[], int], lsn: int, t: float | None) -> int:
        deadline = None if t is None else time.monotonic() + t
        while current() < lsn:
            if self._applied is None:
                self._applied = asyncio.Event()
            self._applied.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            try:
                async with asyncio.timeout(left):
                    await self._applied.wait()
            except TimeoutError:
                break
        return current()

    def info(self, lsn: int, redis_replicas: list[tuple[str, int, int, float]]) -> str:
        """INFO replication's fields, as Redis 7.0 lays them out; `redis_replicas`
        (ip, port, acked offset, last ack) are the replicas of the Redis protocol."""
        now = time.time()
        lines: list[str] = [f"role:{self.role}"]
        if self.is_replica:
            lines += [
                f"master_host:{self.master_host}",
                f"master_port:{self.master_port}",
                f"master_link_status:{'up' if self.link_up else 'down'}",
                f"master_last_io_seconds_ago:{int(now - self.last_io) if self.last_io else -1}",
                f"master_sync_in_progress:{int(self.sync_in_progress)}",
                f"slave_read_repl_offset:{lsn}",
                f"slave_repl_offset:{lsn}",
            ]
            if not self.link_up:
                lines.append(f"master_link_down_since_seconds:{int(now - self.link_down_since)}")
            lines += ["slave_priority:100", "slave_read_only:1", "replica_announced:1"]
        lines.append(f"connected_slaves:{len(self.links) + len(redis_replicas)}")
        links = [(x.ip, x.port, x.acked, x.last_ack) for x in self.links.values()]
        if self.min_replicas and self.min_replicas_lag:
            good = self._good([last for _, _, _, last in links + redis_replicas])
            lines.append(f"min_slaves_good_slaves:{good}")
        for i, (ip, port, acked, last) in enumerate(links + redis_replicas):
            lag = int(now - last)
            lines.append(f"slave{i}:ip={ip},port={port},state=online,offset={acked},lag={lag}")
        return "\r\n".join(lines) + "\r\n"


# -- Redis replicas (commands.redis_repl) ---------------------------------------------


def encode_command(argv: list[bytes]) -> bytes:
    """A command as a client sends it and the replication stream carries it: a RESP
    array of bulk strings (also MIGRATE's to its target)."""
    out = [b"*%d\r\n" % len(argv)]
    for a in argv:
        out.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(out)


class ReplicaClient(Protocol):
    """What the stream uses of a Redis replica's connection, a `Session` (the server
    state that holds this module's state holds the sessions too: it is above)."""

    @property
    def id(self) -> int: ...

    @property
    def push(self) -> Callable[[Reply], None]: ...

    @property
    def server(self) -> Any: ...  # its `clients`: whether the connection is still open


@dataclass
class RedisReplica:
    session: ReplicaClient
    ip: str
    port: int
    acked: int = 0  # REPLCONF ACK: the offset the replica says it processed
    last_ack: float = field(default_factory=time.time)


@dataclass
class ReplStream:
    """The replication stream to Redis replicas: their links, the byte offset, the
    database the stream last selected, and the commands of the call under way."""

    offset: int = 0
    replicas: dict[int, RedisReplica] = field(default_factory=dict)
    seldb: int = -1  # Redis' slaveseldb: -1 makes the next command start with SELECT
    depth: int = 0  # calls under way (nested: EXEC's commands, a script's redis.call)
    pending: list[tuple[int, list[bytes]]] = field(default_factory=list)
    pinger: asyncio.Task[None] | None = None
    # The state of the keys a command changed, as RESTORE/DEL commands (for commands
    # propagated by their effects; set by commands.redis_repl, which can import DUMP).
    effects: Callable[[Any, list[Any]], list[tuple[int, list[bytes]]]] | None = None

    def feed(self, server: Any, dbi: int, argv: list[bytes]) -> None:
        """replicationFeedSlaves: SELECT if the database changed, then the command."""
        clients = server.clients
        for cid in [cid for cid in self.replicas if cid not in clients]:
            del self.replicas[cid]  # its connection closed
        if not self.replicas:
            # No Redis replica is left: the dispatcher stops feeding the stream (and
            # the offset stops, where Redis' moves on while its backlog lives).
            server.repl_stream = None
            self.pending.clear()
            self.depth = 0
            return
        data = encode_command(argv)
        if dbi != self.seldb:
            db = b"%d" % dbi
            data = b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%b\r\n" % (len(db), db) + data
            self.seldb = dbi
        self.offset += len(data)
        for rep in self.replicas.values():
            rep.session.push(Encoded(data))

    def propagate(self, server: Any, ops: list[tuple[int, list[bytes]]], wrap: bool) -> None:
        """propagatePendingCommands: `ops` in order, inside MULTI/EXEC when `wrap` and
        there are several (MULTI in the first's database, EXEC in the last's)."""
        wrap = wrap and len(ops) > 1
        if wrap:
            self.feed(server, ops[0][0], [b"MULTI"])
        for dbi, argv in ops:
            self.feed(server, dbi, argv)
            if server.repl_stream is None:
                return  # the last replica went away
        if wrap:
            self.feed(server, ops[-1][0], [b"EXEC"])

    def expired(
        self, server: Any, dbi: Any, key: bytes, lazy_param: str = "lazyfree-lazy-expire"
    ) -> None:
        """A key expired (lazily, inside a call; or by active expiry) or was evicted
        (`lazy_param` lazyfree-lazy-eviction): its DEL (UNLINK when `lazy_param` is yes)
        is propagated with the call's commands, or at once (propagateDeletion)."""
        if type(dbi) is not int:
            return  # a branch's database: nothing in Redis' keyspace
        lazy = server.config.params.get(lazy_param, "no") == "yes"
        argv = [b"UNLINK" if lazy else b"DEL", key]
        if self.depth:
            self.pending.append((dbi, argv))
        else:
            self.propagate(server, [(dbi, argv)], False)

    def request_acks(self, server: Any) -> None:
        """REPLCONF GETACK * into the stream: replicas answer with REPLCONF ACK at once."""
        self.feed(server, self.seldb, GETACK_ARGV)

    def ack(self, session_id: int, offset: int) -> bool:
        """REPLCONF ACK from a Redis replica (False: the session is not one)."""
        rep = self.replicas.get(session_id)
        if rep is None:
            return False
        rep.acked = max(rep.acked, offset)
        rep.last_ack = time.time()
        return True
