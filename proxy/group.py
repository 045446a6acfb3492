"""A node of a group on etcd (`--etcd-endpoints`): leadership, failover, raft tables.

Nodes of one group share one storage prefix. Each registers its announce address and
applied LSN (`flusher.coordination.NodeRegistry`); one holds the leader key on an etcd
lease (`Leadership`) and is the primary, the others follow it as replicas. Every
`POLL_S` a node looks at the leader key:

- someone else holds it: follow that node (a primary that finds another leader
  steps down first);
- nobody holds it: the node with the most applied updates (ties: the smallest id)
  campaigns; the others wait for it, or campaign themselves once the group has been
  leaderless for `LEADERLESS_S`. The winner catches up from object storage, applies
  the raft log beyond it and writes those records to storage, takes the prefix over
  with the next writer epoch (`replay.startup.take_over`: manifest fencing stays the
  last line of defence) and serves writes.

A leader refuses writes from a local deadline strictly before its lease can have
expired (`Leadership.deadline`: renewal time + TTL - margin, measured before the
renewal was sent), checked on every write in the dispatcher, so a paused process
acknowledges nothing once resumed. When it cannot renew in time it refuses writes
(-TRYAGAIN while etcd cannot be reached, keeping its clients: `_hold_on`); once another
node holds the key, or a newer writer took object storage over, it closes its clients,
flushes what it can (fenced if another node took over) and rejoins as a replica; when
etcd answers again and the key is free, it takes the key again and serves writes on
the same connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from commands.errors import READONLY, TRYAGAIN_NO_QUORUM
from commands.replstate import GroupView
from commands.sentinel import set_group
from commands.session import ServerCore
from flusher.backlog import Backlog
from flusher.codec import records_from
from flusher.coordination import (
    CoordinationError,
    LeaderInfo,
    Leadership,
    NodeInfo,
    NodeRegistry,
    RaftLog,
    best_candidate,
    etcd_client,
)
from flusher.durable import DurableStore
from flusher.raft import RaftAppender
from replay.replay import replay_body
from store import Store
from store.tasks import cancel_and_wait


class GroupNode(Protocol):
    """What a group member needs of its node (`proxy.replication.Node`, which makes the
    member: the node owns the member, the member only sees this)."""

    state: ServerCore
    store: Store
    durable: DurableStore | None
    backlog: Backlog | None
    unstored: list[tuple[int, int, bytes]]
    announce: tuple[str, int]

    async def follow(self, host: str, port: int) -> None: ...

    async def prepare_to_lead(self, extra: Callable[[], Awaitable[None]] | None = None) -> None: ...

    async def become_primary(self) -> None: ...

    async def step_down(self) -> None: ...


log = logging.getLogger("temporalstore")

LEASE_TTL_S = 3
POLL_S = 0.2
LEADERLESS_S = 3 * LEASE_TTL_S


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


class GroupMember:
    def __init__(self, node: GroupNode, endpoints: str, group: str) -> None:
        self.node = node
        self.group = group
        self.me = node.state.run_id
        host, port = node.announce
        self.addr = f"{host}:{port}"
        self.client = etcd_client(endpoints)
        self.leadership = Leadership(
            self.client, group, self.me, self.addr, LEASE_TTL_S, on_lost=self._lost
        )
        self.registry = NodeRegistry(self.client, group, self.me, self.addr, LEASE_TTL_S)
        self.raft = RaftLog(self.client, group)
        self.appender: RaftAppender | None = None
        self.leader: LeaderInfo | None = None
        self.nodes: list[NodeInfo] = []
        self._task: asyncio.Task[None] | None = None
        self._leaderless_since: float | None = None

    async def start(self) -> None:
        await self.registry.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        if self.appender is not None:
            await self.appender.stop()
        with contextlib.suppress(CoordinationError):
            if self.leadership.am_leader():
                await self.leadership.resign()
        with contextlib.suppress(CoordinationError):
            await self.registry.close()
        with contextlib.suppress(CoordinationError):
            await self.leadership.close()

    # -- the loop --------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except CoordinationError as e:
                log.warning("etcd: %s", e)
            except Exception:
                log.exception("group %s: unexpected error", self.group)
            await asyncio.sleep(POLL_S)

    async def _step(self) -> None:
        node = self.node
        state = node.state
        self.registry.set_applied(node.store.lsn)
        if self.leadership.am_leader():
            state.write_deadline = self.leadership.deadline
            self.nodes = await self.registry.nodes()
            self._publish_view()
            return
        if node.durable is not None:
            if await self._hold_on():
                return
            await self._step_down("the leader key is not ours")
        leader = await self.leadership.leader()
        self.leader = leader
        self.nodes = await self.registry.nodes()
        if leader is not None:
            self._leaderless_since = None
            if leader.node_id != self.me:
                host, port = _addr(leader.addr)
                await node.follow(host, port)
            self._publish_view()
            return
        now = time.monotonic()
        if self._leaderless_since is None:
            self._leaderless_since = now
        best = best_candidate(self.nodes)
        mine = best is None or best.node_id == self.me
        if not mine and now - self._leaderless_since < LEADERLESS_S:
            return  # the best candidate goes first
        if await self.leadership.try_acquire():
            try:
                await self._lead()
            except Exception:
                log.exception("group %s: taking the lead failed; resigning", self.group)
                state.read_only = READONLY
                state.write_deadline = 0.0
                with contextlib.suppress(CoordinationError):
                    await self.leadership.resign()
                raise

    # -- becoming the primary ------------------------------------------------------------

    async def _lead(self) -> None:
        node = self.node
        state = node.state
        log.info(
            "group %s: %s takes the lead (epoch %s)", self.group, self.me, self.leadership.epoch
        )
        await node.prepare_to_lead(self._apply_raft_log)
        await node.become_primary()
        durable, backlog = node.durable, node.backlog
        assert durable is not None and backlog is not None
        appender = RaftAppender(
            self.raft, backlog, lambda: self.leadership.key_value, lambda: durable.durable_lsn
        )
        appender.start()
        durable.raft = self.appender = appender
        state.write_deadline = self.leadership.deadline
        self._publish_view()

    async def _apply_raft_log(self) -> None:
        """Apply what etcd's log holds beyond this node's records (they are stored with
        the rest this node has beyond storage)."""
        store = self.node.store
        start = store.lsn + 1
        entries = await self.raft.entries_after(store.lsn)
        data = records_from(b"".join(body for _last, body in entries), start)
        if data:
            first, last = replay_body(store, data)
            self.node.unstored.append((first, last, data))
            log.info("group %s: records %d..%d applied from the raft log", self.group, first, last)

    # -- losing etcd ------------------------------------------------------------------

    async def _hold_on(self) -> bool:
        """A primary whose lease lapsed: True while it stays primary, refusing writes
        with TRYAGAIN_NO_QUORUM and keeping its clients, because etcd cannot be
        reached (no quorum, or this node is cut off) and no newer writer has taken
        object storage over; or because etcd is back, the leader key is free (or still
        our lapsed term's) and this node took it again, unchallenged: then it serves
        writes again on the same connections. False: another node leads, or a newer
        writer took storage over: step down."""
        node, state = self.node, self.node.state
        durable = node.durable
        assert durable is not None
        if await durable.superseded():
            return False
        try:
            leader = await self.leadership.leader()
        except CoordinationError as e:
            if state.read_only != TRYAGAIN_NO_QUORUM:
                log.warning("group %s: etcd unreachable (%s): writes wait for it", self.group, e)
            state.read_only = TRYAGAIN_NO_QUORUM
            state.write_deadline = 0.0
            return True
        if leader is not None:
            # Our lapsed term's key stays until etcd expires its lease.
            return leader.node_id == self.me
        if not await self.leadership.try_acquire():
            return False
        if durable.fenced is not None or await durable.superseded():
            with contextlib.suppress(CoordinationError):
                await self.leadership.resign()
            return False
        state.write_deadline = self.leadership.deadline
        state.read_only = ""
        log.warning(
            "group %s: %s leads again (epoch %s): writes accepted",
            self.group,
            self.me,
            self.leadership.epoch,
        )
        self._publish_view()
        return True

    # -- stepping down -----------------------------------------------------------------

    def _lost(self, reason: str) -> None:
        """The lease could not be renewed in time: refuse writes now."""
        state = self.node.state
        # Not renewed in time: etcd is slow or unreachable (or this process was
        # paused), and nobody may lead yet; otherwise another node holds the key.
        unrenewed = "could not be renewed" in reason
        state.read_only = TRYAGAIN_NO_QUORUM if unrenewed else READONLY
        state.write_deadline = 0.0
        log.warning("group %s: leadership lost (%s): writes refused", self.group, reason)

    async def _step_down(self, reason: str) -> None:
        log.warning("group %s: stepping down: %s", self.group, reason)
        if self.appender is not None:
            await self.appender.stop()
            self.appender = None
        self.node.state.write_deadline = 0.0
        await self.node.step_down()

    # -- the Sentinel view -------------------------------------------------------------

    def _publish_view(self) -> None:
        node = self.node
        view = GroupView(self.group, self.me)
        leader_id = (
            self.me if self.leadership.am_leader() else (self.leader.node_id if self.leader else "")
        )
        for n in self.nodes:
            host, port = _addr(n.addr)
            view.nodes.append((host, port, n.node_id))
            if n.node_id == leader_id:
                view.primary = (host, port)
                view.primary_id = n.node_id
            else:
                view.replicas.append((host, port, n.node_id, n.applied_lsn))
        if view.primary is None and self.leader is not None:
            view.primary = _addr(self.leader.addr)
            view.primary_id = self.leader.node_id
        view.epoch = (
            (self.leadership.epoch or 0)
            if leader_id == self.me
            else (self.leader.epoch if self.leader else 0)
        )
        view.down_after_ms = LEASE_TTL_S * 1000
        set_group(node.state, view)
