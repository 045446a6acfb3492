"""The durable layer's etcd client: who is primary, who could be, and the RAFT-mode log.

This module owns everything a group of nodes keeps in etcd (aetcd, the asyncio etcd v3
client, underneath), under `/<group>/`:

- `/<group>/leader`: the leader key, held by the primary on a lease (`Leadership`). Its
  value names the node and its announce address, plus a nonce unique to the term, so
  "the key still holds my value" is true for one term only. The revision at which a
  node created the key is its `epoch`: it grows with every new leader.
- `/<group>/nodes/<node_id>`: each node's address and applied LSN, on the node's own
  lease (`NodeRegistry`), so a candidate can tell who has the most applied updates
  (`best_candidate`).
- `/<group>/log/<20-digit lsn>`: the RAFT-mode log (`RaftLog`). An append commits only
  while the leader key holds the appender's value (one etcd transaction), so a deposed
  primary cannot append; entries are trimmed once object storage holds them.

Safety rule of the leadership: `Leadership.am_leader()` turns False at a local deadline
that comes strictly before etcd can expire the lease: the time measured (time.monotonic)
just *before* the last successful keep-alive request was sent, plus the TTL etcd
granted, minus a safety margin. etcd starts the TTL when it receives the request, later
than that, and a change of etcd leader only lengthens leases; so while am_leader() is
True no other node can have taken the key. A paused process (SIGSTOP) finds the
deadline passed when it resumes, before any reply could extend it.

Every call takes a timeout (default `DEFAULT_TIMEOUT_S`) and raises `EtcdUnavailable`
when etcd does not answer in time (no quorum, or unreachable) rather than hang. A
write that timed out may still commit later: its outcome is unknown, never a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aetcd
from aetcd import rpc

from store.tasks import cancel_and_wait

log = logging.getLogger("temporalstore")

DEFAULT_TIMEOUT_S = 2.0
"""How long one etcd call may take before it raises EtcdUnavailable."""

LSN_DIGITS = 20
"""Log keys carry the LSN zero-padded to this width, so key order is LSN order."""

MAX_APPEND_BATCH = 127
"""Entries one `RaftLog.append_many` may write: etcd's default --max-txn-ops is 128, and
the transaction also reads or compares the leader key."""

T = TypeVar("T")


class CoordinationError(Exception):
    """Base of the errors this module raises."""


class EtcdUnavailable(CoordinationError):
    """etcd did not answer in time or could not be reached: no quorum, down, or cut off.
    For a write, the outcome is unknown (it may still commit)."""


class EtcdError(CoordinationError):
    """etcd answered with an error (a bad request, a too large value, ...)."""


class NotLeader(CoordinationError):
    """The leader key does not hold the caller's value: another node is primary, or none."""


class LogConflict(CoordinationError):
    """An LSN being appended already holds different data in the log."""


async def _call(what: str, awaitable: Awaitable[T], timeout: float) -> T:
    """Await one etcd request with a deadline, turning failures into our errors."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError as exc:
        raise EtcdUnavailable(
            f"etcd did not answer {what} within {timeout:g} s (no quorum, or unreachable)"
        ) from exc
    except (aetcd.ConnectionFailedError, aetcd.ConnectionTimeoutError) as exc:
        raise EtcdUnavailable(f"etcd unavailable for {what}: {exc}") from exc
    except aetcd.ClientError as exc:
        raise EtcdError(f"etcd failed {what}: {exc}") from exc
    except rpc.AioRpcError as exc:  # from the requests aetcd has no helper for
        if exc.code() in (rpc.StatusCode.UNAVAILABLE, rpc.StatusCode.DEADLINE_EXCEEDED):
            raise EtcdUnavailable(f"etcd unavailable for {what}: {exc.details()}") from exc
        raise EtcdError(f"etcd failed {what}: {exc.details()}") from exc


# --------------------------------------------------------------------------- client


def _host_port(endpoint: str) -> tuple[str, int]:
    """`http://host:port`, `host:port` or `host` (port 2379) -> (host, port)."""
    endpoint = endpoint.strip()
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", ""):
        raise ValueError(f"etcd endpoint {endpoint!r}: only http:// is supported")
    if not parts.hostname:
        raise ValueError(f"etcd endpoint {endpoint!r} has no host")
    return parts.hostname, parts.port or 2379


def grpc_target(endpoints: str | Sequence[str]) -> str:
    """The gRPC target for one or more etcd endpoints (a comma-separated string or a
    list). Several endpoints must be IP literals of one family: gRPC then spreads
    requests over the members that answer (`ipv4:a:p,b:q`)."""
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    hosts = [_host_port(e) for e in items if e.strip()]
    if not hosts:
        raise ValueError("no etcd endpoint given")
    if len(hosts) == 1:
        host, port = hosts[0]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        ips = [(ipaddress.ip_address(h), p) for h, p in hosts]
    except ValueError as exc:
        raise ValueError(
            "several etcd endpoints must be IP addresses (or give one name that "
            f"resolves to all members): {exc}"
        ) from exc
    if all(ip.version == 4 for ip, _ in ips):
        return "ipv4:" + ",".join(f"{ip}:{p}" for ip, p in ips)
    if all(ip.version == 6 for ip, _ in ips):
        return "ipv6:" + ",".join(f"[{ip}]:{p}" for ip, p in ips)
    raise ValueError("etcd endpoints mix IPv4 and IPv6 addresses")


def etcd_client(endpoints: str | Sequence[str]) -> Any:
    """An `aetcd.Client` for the endpoints (it connects on first use). With several
    endpoints requests go round-robin over the members that accept connections, so
    one member going down does not take the client with it."""
    target = grpc_target(endpoints)
    # aetcd dials f"{host}:{port}": split the target at its last colon.
    host, _, port = target.rpartition(":")
    options = {"grpc.lb_policy_name": "round_robin"} if "," in target else {}
    return aetcd.Client(host=host, port=int(port), options=options)


async def _range(
    client: Any,
    start: bytes,
    end: bytes | None,
    timeout: float,
    *,
    limit: int = 0,
    revision: int = 0,
) -> Any:
    """One linearizable Range request (aetcd's helpers have no limit or revision):
    returns etcd's RangeResponse (header, kvs, more)."""
    request = rpc.RangeRequest(
        key=start,
        range_end=end or b"",
        limit=limit,
        revision=revision,
        sort_order=rpc.RangeRequest.ASCEND,
        sort_target=rpc.RangeRequest.KEY,
    )

    async def go() -> Any:
        await client.connect()
        return await client.kvstub.Range(request, metadata=client.metadata)

    return await _call("a range read", go(), timeout)


def _prefix_end(prefix: bytes) -> bytes:
    return bytes(aetcd.utils.prefix_range_end(prefix))


# --------------------------------------------------------------------------- leases


class _KeptLease:
    """A lease and the task that keeps it alive. `deadline` (time.monotonic) is when
    the lease may first have expired in etcd, less the safety margin: it moves forward
    only from the send time of a keep-alive that etcd answered with a live TTL (and,
    with `check`, whose check passed), and never once it has passed: `alive()` never
    goes from False back to True. `on_expired` runs once, from the task, when the
    deadline passes without renewal or etcd says the lease is gone."""

    def __init__(
        self,
        client: Any,
        ttl_s: int,
        margin_s: float,
        timeout_s: float,
        on_expired: Callable[[str], None],
        check: Callable[[float], Awaitable[bool]] | None = None,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.margin_s = margin_s
        self.timeout_s = timeout_s
        self.on_expired = on_expired
        self.check = check
        if margin_s >= ttl_s / 2:
            raise ValueError(
                f"safety margin {margin_s:g} s must be under half the lease TTL ({ttl_s} s)"
            )
        self.id = 0
        self.granted_ttl_s = ttl_s
        self.deadline = 0.0
        self.expired = False
        self.task: asyncio.Task[None] | None = None

    def alive(self) -> bool:
        return not self.expired and time.monotonic() < self.deadline

    async def grant(self, timeout: float) -> None:
        sent = time.monotonic()
        lease = await _call("a lease grant", self.client.lease(self.ttl_s), timeout)
        self.id = int(lease.id)
        self.granted_ttl_s = int(lease.ttl)  # etcd may raise it to its minimum
        self.deadline = sent + self.granted_ttl_s - self.margin_s

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._keep_alive())

    async def _keep_alive(self) -> None:
        interval = self.granted_ttl_s / 3
        retry = min(0.1, interval / 4)
        next_renewal = time.monotonic() + interval
        while True:
            await asyncio.sleep(max(0.0, next_renewal - time.monotonic()))
            sent = time.monotonic()
            remaining = self.deadline - sent
            if remaining <= 0:
                self._expire("the lease could not be renewed before its deadline")
                return
            try:
                reply = await _call(
                    "a lease keep-alive",
                    self.client.refresh_lease(self.id),
                    min(self.timeout_s, remaining),
                )
                if reply is None or int(reply.TTL) <= 0:
                    self._expire("etcd says the lease has expired")
                    return
                left = self.deadline - time.monotonic()
                if self.check is not None and left > 0:
                    if not await self.check(min(self.timeout_s, left)):
                        self._expire("the leased key no longer holds our value")
                        return
            except CoordinationError as exc:
                log.warning("etcd lease %x: keep-alive failed (%s); retrying", self.id, exc)
                next_renewal = time.monotonic() + retry
                continue
            if time.monotonic() >= self.deadline:
                # Too late, even if etcd renewed it: am_leader() has already said False,
                # and a term that ended never comes back.
                self._expire("the lease could not be renewed before its deadline")
                return
            self.deadline = max(self.deadline, sent + int(reply.TTL) - self.margin_s)
            next_renewal = sent + interval

    def _expire(self, reason: str) -> None:
        if self.expired:
            return
        self.expired = True
        self.on_expired(reason)

    async def stop(self) -> None:
        """Stop renewing (the lease then lapses by itself in etcd)."""
        await cancel_and_wait(self.task)
        self.task = None

    async def revoke(self, timeout: float) -> None:
        """Stop renewing and revoke: keys on the lease go at once. Best effort."""
        await self.stop()
        self.expired = True
        self.deadline = 0.0
        try:
            await _call("a lease revoke", self.client.revoke_lease(self.id), timeout)
        except CoordinationError as exc:
            log.warning("etcd lease %x: revoke failed (%s); it will lapse", self.id, exc)


def default_margin(lease_ttl_s: int) -> float:
    """The safety margin by default: a tenth of the TTL, at least 0.25 s."""
    return max(0.25, lease_ttl_s / 10)


# --------------------------------------------------------------------------- leadership


@dataclass(frozen=True)
class LeaderInfo:
    """Who holds the leader key: node id, announce address ("host:port"), the epoch
    (the revision at which it took the key) and the key's raw value."""

    node_id: str
    addr: str
    epoch: int
    value: bytes


def _decode_leader(kv: Any) -> LeaderInfo:
    value = bytes(kv.value)
    try:
        doc = json.loads(value)
        node_id, addr = str(doc["id"]), str(doc["addr"])
    except (ValueError, KeyError, TypeError):
        node_id, addr = "?", ""
    return LeaderInfo(node_id, addr, int(kv.create_revision), value)


class Leadership:
    """Campaign for `/<group>/leader` and hold it on a lease (see the module docstring
    for the safety rule). One instance per node; it can campaign again after losing.

    `on_lost(reason)` is called once per term when the term ends other than by
    `resign()`: the lease could not be renewed in time, etcd expired it, or the key was
    taken away. By then `am_leader()` is already False."""

    def __init__(
        self,
        client: Any,
        group: str,
        node_id: str,
        addr: str,
        lease_ttl_s: int = 5,
        *,
        on_lost: Callable[[str], None] | None = None,
        safety_margin_s: float | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if lease_ttl_s < 1:
            raise ValueError("lease_ttl_s must be at least 1")
        self.client = client
        self.group = group
        self.node_id = node_id
        self.addr = addr
        self.lease_ttl_s = lease_ttl_s
        self.on_lost = on_lost
        self.margin_s = default_margin(lease_ttl_s) if safety_margin_s is None else safety_margin_s
        self.timeout_s = timeout_s
        self.key = f"/{group}/leader".encode()
        self._lease: _KeptLease | None = None
        self._value: bytes | None = None
        self._epoch: int | None = None

    # -- state

    def am_leader(self) -> bool:
        """True while this node holds the key and its lease surely has not expired."""
        return self._value is not None and self._lease is not None and self._lease.alive()

    @property
    def epoch(self) -> int | None:
        """The revision at which this node took the key (None when not holding it)."""
        return self._epoch if self._value is not None else None

    @property
    def key_value(self) -> bytes | None:
        """The leader key's value for this term: what `RaftLog.append` is fenced on."""
        return self._value

    @property
    def deadline(self) -> float:
        """The time.monotonic() at which am_leader() turns False unless renewed."""
        return self._lease.deadline if self._lease is not None and self._value else 0.0

    # -- campaigning

    async def try_acquire(self, timeout: float | None = None) -> bool:
        """One attempt: take the key if nobody holds it. True if we hold it now."""
        if self.am_leader():
            return True
        timeout = self.timeout_s if timeout is None else timeout
        await self._drop()
        lease = _KeptLease(
            self.client, self.lease_ttl_s, self.margin_s, self.timeout_s, self._lost, self._check
        )
        await lease.grant(timeout)
        value = json.dumps(
            {"id": self.node_id, "addr": self.addr, "term": uuid.uuid4().hex},
            separators=(",", ":"),
        ).encode()
        t = self.client.transactions
        try:
            won, responses = await _call(
                "the leader campaign",
                self.client.transaction(
                    compare=[t.create(self.key) == 0],
                    success=[t.put(self.key, value, lease=lease.id), t.get(self.key)],
                    failure=[],
                ),
                timeout,
            )
        except CoordinationError:
            await lease.revoke(timeout)
            raise
        if not won:
            await lease.revoke(timeout)
            return False
        (_value, kv), *_ = responses[1]
        self._lease, self._value, self._epoch = lease, value, int(kv.create_revision)
        lease.start()
        log.info("etcd: %s is leader of %s at epoch %d", self.node_id, self.group, self._epoch)
        return True

    async def campaign(self, timeout: float | None = None) -> None:
        """Take the key, waiting for it to be free as long as needed (or `timeout`
        seconds, then TimeoutError). Errors from etcd are retried."""
        async with asyncio.timeout(timeout):
            while True:
                try:
                    if await self.try_acquire():
                        return
                except CoordinationError as exc:
                    log.warning("etcd: campaign of %s failed (%s); retrying", self.node_id, exc)
                    await asyncio.sleep(0.5)
                    continue
                with contextlib.suppress(TimeoutError, CoordinationError):
                    # Wake when the key goes; look again now and then in any case.
                    async with (
                        asyncio.timeout(self.lease_ttl_s),
                        contextlib.aclosing(self.watch_leader()) as changes,
                    ):
                        async for info in changes:
                            if info is None:
                                break

    async def _check(self, timeout: float) -> bool:
        """After a keep-alive: does the key still hold this term's value?"""
        reply = await _range(self.client, self.key, None, timeout)
        return bool(reply.kvs) and bytes(reply.kvs[0].value) == self._value

    def _lost(self, reason: str) -> None:
        if self._value is None:
            return
        log.warning("etcd: %s lost the leadership of %s: %s", self.node_id, self.group, reason)
        self._value = None
        if self.on_lost is not None:
            try:
                self.on_lost(reason)
            except Exception:
                log.exception("etcd: on_lost callback failed")

    async def _drop(self) -> None:
        """Forget a term that ended (its lapse may not have been noticed yet)."""
        if self._value is not None:
            self._lost("the lease could not be renewed before its deadline")
        lease, self._lease, self._value = self._lease, None, None
        if lease is not None:
            await lease.stop()

    async def resign(self, timeout: float | None = None) -> None:
        """Give the key up now (delete it if it still holds our value, revoke the
        lease). am_leader() is False from the first line; on_lost is not called."""
        timeout = self.timeout_s if timeout is None else timeout
        lease, value = self._lease, self._value
        self._lease, self._value = None, None
        if lease is None:
            return
        await lease.stop()
        if value is not None:
            t = self.client.transactions
            with contextlib.suppress(CoordinationError):
                await _call(
                    "the leader resignation",
                    self.client.transaction(
                        compare=[t.value(self.key) == value],
                        success=[t.delete(self.key)],
                        failure=[],
                    ),
                    timeout,
                )
        await lease.revoke(timeout)

    async def close(self) -> None:
        """Resign if leader; stop every task."""
        await self.resign()

    # -- reading

    async def leader(self, timeout: float | None = None) -> LeaderInfo | None:
        """The current holder of the leader key, or None."""
        info, _revision = await self._read_leader(timeout)
        return info

    async def _read_leader(self, timeout: float | None) -> tuple[LeaderInfo | None, int]:
        timeout = self.timeout_s if timeout is None else timeout
        reply = await _range(self.client, self.key, None, timeout)
        info = _decode_leader(reply.kvs[0]) if reply.kvs else None
        return info, int(reply.header.revision)

    async def watch_leader(self) -> AsyncGenerator[LeaderInfo | None, None]:
        """The current leader (or None), then each change as it happens. A lost watch
        is set up again from a fresh read; a value is never repeated twice in a row.
        Ends only when the consumer stops iterating."""
        last: LeaderInfo | bool | None = False  # False: nothing yielded yet
        while True:
            try:
                info, revision = await self._read_leader(None)
                if info != last:
                    last = info
                    yield info
                watch = await _call(
                    "a leader watch",
                    self.client.watch(self.key, start_revision=revision + 1),
                    self.timeout_s,
                )
                try:
                    async for event in watch:
                        if event.kind == aetcd.EventKind.DELETE:
                            info = None
                        else:
                            info = _decode_leader(event.kv)
                        if info != last:
                            last = info
                            yield info
                finally:
                    with contextlib.suppress(Exception):
                        await watch.cancel()
            except (CoordinationError, aetcd.ClientError, rpc.AioRpcError) as exc:
                log.warning("etcd: leader watch of %s interrupted (%s)", self.group, exc)
            await asyncio.sleep(0.2)


# --------------------------------------------------------------------------- node registry


@dataclass(frozen=True)
class NodeInfo:
    """A registered node: id, announce address and the LSN it has applied; in cluster
    mode the shard (group) it belongs to, "" for a shard of its own."""

    node_id: str
    addr: str
    applied_lsn: int
    shard: str = ""


def best_candidate(nodes: Iterable[NodeInfo], exclude: Collection[str] = ()) -> NodeInfo | None:
    """The node that should take over: the most applied updates, ties to the smallest
    node id (so every node picks the same one). `exclude`: ids not to pick (the old
    primary, say). None when no node is left."""
    eligible = [n for n in nodes if n.node_id not in exclude]
    if not eligible:
        return None
    return min(eligible, key=lambda n: (-n.applied_lsn, n.node_id))


async def list_nodes(client: Any, group: str, timeout: float = DEFAULT_TIMEOUT_S) -> list[NodeInfo]:
    """Every node registered in the group (live leases only), by node id."""
    prefix = f"/{group}/nodes/".encode()
    reply = await _range(client, prefix, _prefix_end(prefix), timeout)
    nodes = []
    for kv in reply.kvs:
        node_id = bytes(kv.key)[len(prefix) :].decode()
        try:
            doc = json.loads(bytes(kv.value))
            shard = str(doc.get("shard", ""))
            nodes.append(NodeInfo(node_id, str(doc["addr"]), int(doc["lsn"]), shard))
        except (ValueError, KeyError, TypeError):
            log.warning("etcd: unreadable registration of node %s ignored", node_id)
    return nodes


class NodeRegistry:
    """Keeps `/<group>/nodes/<node_id>` = {addr, applied LSN, shard if any} on the
    node's own lease, republished every `publish_interval_s` when the LSN moved. If
    etcd expires the lease (a long outage), the node registers again on a new one."""

    def __init__(
        self,
        client: Any,
        group: str,
        node_id: str,
        addr: str,
        lease_ttl_s: int = 5,
        *,
        publish_interval_s: float = 0.5,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        shard: str = "",
    ) -> None:
        self.client = client
        self.group = group
        self.shard = shard
        self.node_id = node_id
        self.addr = addr
        self.lease_ttl_s = lease_ttl_s
        self.publish_interval_s = publish_interval_s
        self.timeout_s = timeout_s
        self.key = f"/{group}/nodes/{node_id}".encode()
        self.applied_lsn = 0
        self.published_lsn: int | None = None
        self._lease: _KeptLease | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def set_applied(self, lsn: int) -> None:
        """Record the applied LSN; published by the next round (or `publish()`)."""
        self.applied_lsn = lsn

    async def start(self) -> None:
        """Register now (raises if etcd does not answer), then keep it up to date."""
        await self.publish()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def publish(self, timeout: float | None = None) -> None:
        """Put the registration now (on a new lease if the old one is gone)."""
        timeout = self.timeout_s if timeout is None else timeout
        if self._lease is None or not self._lease.alive():
            if self._lease is not None:
                await self._lease.stop()
            lease = _KeptLease(
                self.client,
                self.lease_ttl_s,
                default_margin(self.lease_ttl_s),
                timeout,
                lambda reason: self._wake.set(),
            )
            await lease.grant(timeout)
            lease.start()
            self._lease = lease
            self.published_lsn = None
        lsn = self.applied_lsn
        if lsn == self.published_lsn:
            return
        doc: dict[str, object] = {"addr": self.addr, "lsn": lsn}
        if self.shard:
            doc["shard"] = self.shard
        value = json.dumps(doc, separators=(",", ":")).encode()
        await _call(
            "a node registration", self.client.put(self.key, value, lease=self._lease.id), timeout
        )
        self.published_lsn = lsn

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.publish_interval_s)
            self._wake.clear()
            try:
                await self.publish()
            except CoordinationError as exc:
                log.warning("etcd: registration of %s failed (%s); retrying", self.node_id, exc)

    async def nodes(self, timeout: float | None = None) -> list[NodeInfo]:
        """Every node registered in the group (this one included)."""
        return await list_nodes(
            self.client, self.group, self.timeout_s if timeout is None else timeout
        )

    async def close(self, timeout: float | None = None) -> None:
        """Stop publishing and remove the registration (revokes the lease)."""
        await cancel_and_wait(self._task)
        self._task = None
        if self._lease is not None:
            await self._lease.revoke(self.timeout_s if timeout is None else timeout)
            self._lease = None


# --------------------------------------------------------------------------- RAFT log


class RaftLog:
    """The RAFT-mode log of a group: `/<group>/log/<20-digit lsn>` = the record's bytes.
    Appends are fenced on the leader key's value (`Leadership.key_value`).

    etcd keeps every revision of every key until its history is compacted, and etcd
    3.4 compacts nothing by default: run it with `--auto-compaction-mode=periodic
    --auto-compaction-retention=5m` (or similar), or appends and trims fill its
    database up to its quota (2 GB), after which etcd refuses every write. A record
    must also fit in etcd's request limit (--max-request-bytes, 1.5 MiB by default)."""

    def __init__(
        self,
        client: Any,
        group: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        page_size: int = 512,
    ) -> None:
        self.client = client
        self.group = group
        self.timeout_s = timeout_s
        self.page_size = page_size
        self.prefix = f"/{group}/log/".encode()
        self.leader_key = f"/{group}/leader".encode()

    def key(self, lsn: int) -> bytes:
        if not 0 <= lsn < 10**LSN_DIGITS:
            raise ValueError(f"LSN out of range: {lsn}")
        return self.prefix + f"{lsn:0{LSN_DIGITS}d}".encode()

    async def append(
        self, lsn: int, data: bytes, leader_key_value: bytes, timeout: float | None = None
    ) -> int:
        """Commit one entry; returns etcd's revision. See `append_many`."""
        return await self.append_many([(lsn, data)], leader_key_value, timeout)

    async def append_many(
        self,
        entries: Sequence[tuple[int, bytes]],
        leader_key_value: bytes,
        timeout: float | None = None,
    ) -> int:
        """Commit entries in one etcd transaction, only if the leader key holds
        `leader_key_value` and no entry's LSN is in the log yet; returns etcd's revision.
        Raises NotLeader if the key holds another value (or none); LogConflict if an LSN
        holds other data. Appending entries that are already there with the same data
        succeeds (a retry after a timeout). EtcdUnavailable: outcome unknown."""
        if not entries:
            raise ValueError("nothing to append")
        if len(entries) > MAX_APPEND_BATCH:
            raise ValueError(f"at most {MAX_APPEND_BATCH} entries per append")
        timeout = self.timeout_s if timeout is None else timeout
        t = self.client.transactions
        keys = [self.key(lsn) for lsn, _ in entries]
        compare = [t.value(self.leader_key) == leader_key_value]
        compare += [t.version(k) == 0 for k in keys]
        success = [t.put(k, bytes(data)) for k, (_, data) in zip(keys, entries, strict=True)]
        failure = [t.get(self.leader_key)] + [t.get(k) for k in keys]
        succeeded, responses = await _call(
            "a log append",
            self.client.transaction(compare=compare, success=success, failure=failure),
            timeout,
        )
        if succeeded:
            return int(responses[0].response_put.header.revision)
        leader = responses[0]
        if not leader or bytes(leader[0][0]) != leader_key_value:
            holder = _decode_leader(leader[0][1]).node_id if leader else "nobody"
            raise NotLeader(
                f"not the leader of {self.group} any more ({holder} holds the leader key): "
                "log append refused"
            )
        for (lsn, data), found in zip(entries, responses[1:], strict=True):
            if not found or bytes(found[0][0]) != bytes(data):
                raise LogConflict(f"LSN {lsn} is already in the log of {self.group}")
        return int(leader[0][1].header.revision)

    async def entries_after(
        self, lsn: int, timeout: float | None = None
    ) -> list[tuple[int, bytes]]:
        """Every entry with an LSN above `lsn`, in LSN order, as of one revision (read
        in pages of `page_size`; `timeout` bounds the whole read)."""
        timeout = self.timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        start, end = self.key(lsn + 1), _prefix_end(self.prefix)
        out: list[tuple[int, bytes]] = []
        revision = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EtcdUnavailable(f"reading the log took over {timeout:g} s")
            reply = await _range(
                self.client, start, end, remaining, limit=self.page_size, revision=revision
            )
            revision = revision or int(reply.header.revision)
            for kv in reply.kvs:
                key = bytes(kv.key)
                out.append((int(key[len(self.prefix) :]), bytes(kv.value)))
            if not reply.more or not reply.kvs:
                return out
            start = bytes(reply.kvs[-1].key) + b"\0"

    async def trim_through(self, lsn: int, timeout: float | None = None) -> int:
        """Delete every entry with an LSN up to `lsn` (once object storage holds them);
        returns how many went. Not fenced: trimming what is durable is always safe."""
        timeout = self.timeout_s if timeout is None else timeout
        reply = await _call(
            "a log trim", self.client.delete_range(self.prefix, self.key(lsn + 1)), timeout
        )
        return int(reply.deleted)
