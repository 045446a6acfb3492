"""A node of a Redis Cluster (`--cluster-enabled yes --etcd-endpoints URL`), and
`temporalstore cluster create`.

A node is the primary of its own shard, on its own --storage prefix; or, started with
`--group NAME` too, a node of a replicated shard: the nodes of a group share a
--storage prefix and elect the shard's primary on etcd as any group does
(proxy.group), the others following it as replicas. It registers its announce address
(and group) in etcd and polls the cluster's slot map there, and the registrations,
every `POLL_S` (flusher.slotmap), handing each new map to the commands
(commands.cluster_mode), which route by it and list each shard's replicas from the
registrations. A group's primary that the map does not name (it was just elected)
writes itself into the map as its shard's primary, fenced on its leader key (and
fences first the range a slot move in progress takes from its shard). Until
`cluster create` has written a map, keyed commands answer -CLUSTERDOWN Hash slot not
served. It registers where its update stream lives too, and
does its part in a slot move recorded in etcd (proxy.slotmove; the poll runs every
`MOVE_POLL_S` while one is recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable
from typing import Any

from commands.session import ServerCore
from flusher.coordination import CoordinationError, NodeRegistry, etcd_client
from flusher.objectapi import ObjectStoreError
from flusher.slotmap import SlotMapConflict, even_map, node_id_for, nodes, read_map, registry
from flusher.slotmap import write_map as put_map
from proxy.cluster_time import ClusterTime
from proxy.slotmove import MoveWorker, move_main, show_main
from replay.replay import ReplayError
from store.slots import ClusterView, SlotMap, with_primary
from store.tasks import cancel_and_wait

log = logging.getLogger("temporalstore")

POLL_S = 0.5
MOVE_POLL_S = 0.1


class ClusterNode:
    """This node's registration and its view of the slot map, kept current."""

    def __init__(
        self,
        state: ServerCore,
        endpoints: str,
        cluster: str,
        host: str,
        port: int,
        group: str = "",
        leading: Callable[[], tuple[bytes, bytes] | None] = lambda: None,
    ):
        self.state = state
        self.cluster = cluster
        self.client: Any = etcd_client(endpoints)
        self.view = ClusterView(node_id_for(host, port), host, port, group)
        self.registry: NodeRegistry = registry(self.client, cluster, host, port, group)
        # With a group: its leader key and this term's value while this node is the
        # group's serving primary, else None (proxy.cli wires it to the GroupMember).
        self.leading = leading
        self.revision = 0
        self._task: asyncio.Task[None] | None = None
        # Cluster-wide TS.SEAL and its snapshots (proxy.cluster_time).
        self.time = ClusterTime(state, self.client, cluster, self.view)
        self.mover = MoveWorker(self)

    async def start(self) -> str | None:
        """Route by the map from now on (none yet: every slot unserved), register, and
        poll; or why not (etcd does not answer, the map is malformed)."""
        self.state.cluster = self.view
        try:
            await self.registry.start()
            await self.mover.register_storage()
            await self.refresh()
        except (CoordinationError, ValueError) as exc:
            return f"cluster {self.cluster}: {exc}"
        await self._move_step()  # a source fences again before it serves
        self._task = asyncio.get_running_loop().create_task(self._poll())
        self.state.cluster_snapshots = self.time
        self.time.start()
        log.info("cluster %s: node %s registered", self.cluster, self.view.node_id)
        return None

    async def refresh(self) -> None:
        """Read the map (and the replicas, with groups); apply it if it changed; write
        this node in as its shard's primary if it leads the group and is not named."""
        found, revision = await read_map(self.client, self.cluster)
        if self.view.group or any(s.group for s in (found.shards if found else ())):
            await self._replicas()
        if found is not None and (fence := self.leading()) is not None:
            found, revision = await self._take_shard(found, revision, fence)
        if found is not None and revision != self.revision:
            if self.view.me < 0 and any(s.node_id == self.view.node_id for s in found.shards):
                # About to serve a shard's writes (a group's promoted replica): fence
                # first the range a move in progress takes away from it.
                await self.mover.fence_check()
            self.view.apply(found)
            self.revision = revision
            log.info(
                "cluster %s: slot map epoch %d, %d slots assigned, %s",
                self.cluster,
                found.epoch,
                found.assigned,
                "this node serves a shard" if self.view.me >= 0 else "this node has no slots",
            )

    async def _replicas(self) -> None:
        replicas: dict[str, list[tuple[str, str, int]]] = {}
        for n in sorted(await nodes(self.client, self.cluster), key=lambda n: n.node_id):
            if n.shard:
                host, _, port = n.addr.rpartition(":")
                replicas.setdefault(n.shard, []).append((n.node_id, host, int(port)))
        self.view.replicas = replicas

    async def _take_shard(
        self, found: SlotMap, revision: int, fence: tuple[bytes, bytes]
    ) -> tuple[SlotMap, int]:
        """After a failover: the map with this node as its group's primary, written."""
        view = self.view
        shard = next((s for s in found.shards if s.group == view.group), None)
        if shard is None or shard.node_id == view.node_id:
            return found, revision
        new = with_primary(found, view.group, view.node_id, view.host, view.port)
        try:
            await put_map(self.client, self.cluster, new, revision, fence=fence)
        except SlotMapConflict as exc:
            log.warning("cluster %s: %s", self.cluster, exc)
            return found, revision
        log.info(
            "cluster %s: this node is now the primary of shard %s (was %s:%d)",
            self.cluster,
            view.group,
            shard.host,
            shard.port,
        )
        got, revision = await read_map(self.client, self.cluster)
        return got or new, revision

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(MOVE_POLL_S if self.mover.active else POLL_S)
            try:
                await self.refresh()
            except (CoordinationError, ValueError) as exc:
                log.warning("cluster %s: cannot read the slot map (%s)", self.cluster, exc)
                continue
            await self._move_step()

    async def _move_step(self) -> None:
        try:
            await self.mover.step()
        except (CoordinationError, ValueError, ReplayError, ObjectStoreError) as exc:
            log.warning("cluster %s: slot move: %s (trying again)", self.cluster, exc)

    async def close(self) -> None:
        await self.time.close()
        await cancel_and_wait(self._task)
        with contextlib.suppress(CoordinationError):
            await self.registry.close()
        await self.client.close()


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SystemExit(f"temporalstore cluster: {text!r} is not HOST:PORT")
    return host, int(port)


async def _create(endpoints: str, cluster: str, addresses: list[tuple[str, int]]) -> int:
    client = etcd_client(endpoints)
    try:
        old, revision = await read_map(client, cluster)
        if old is not None:
            print(
                f"temporalstore cluster create: cluster {cluster} has a slot map already "
                f"(epoch {old.epoch}, {len(old.shards)} shards)",
                file=sys.stderr,
            )
            return 1
        registered = {n.addr: n.shard for n in await nodes(client, cluster)}
        missing = [f"{h}:{p}" for h, p in addresses if f"{h}:{p}" not in registered]
        if missing:
            print(
                f"temporalstore cluster create: not registered in cluster {cluster}: "
                f"{', '.join(missing)} (started with --cluster-enabled yes and "
                "--etcd-endpoints, at that announce address?)",
                file=sys.stderr,
            )
            return 1
        new = even_map(addresses, 1)
        for shard in new.shards:
            shard.group = registered[f"{shard.host}:{shard.port}"]
        groups = [s.group for s in new.shards if s.group]
        if len(set(groups)) != len(groups):
            print(
                "temporalstore cluster create: two nodes of one group named: name one "
                "node (its primary) per shard",
                file=sys.stderr,
            )
            return 1
        await put_map(client, cluster, new, revision)
    except (CoordinationError, ValueError) as exc:
        print(f"temporalstore cluster create: {exc}", file=sys.stderr)
        return 1
    finally:
        await client.close()
    for shard in new.shards:
        first, last = shard.ranges[0]
        group = f" group {shard.group}" if shard.group else ""
        print(f"{shard.node_id} {shard.host}:{shard.port} slots {first}-{last}{group}")
    print(f"cluster {cluster}: {len(new.shards)} shards, 16384 slots, config epoch {new.epoch}")
    return 0


def cluster_main(ns: argparse.Namespace) -> int:
    if ns.action == "show":
        return show_main(ns)
    if ns.action == "move":
        return move_main(ns, _address(ns.to))
    addresses = [_address(a) for a in ns.nodes]
    if len(set(addresses)) != len(addresses):
        raise SystemExit("temporalstore cluster create: a node is named twice")
    return asyncio.run(_create(ns.etcd_endpoints, ns.cluster_name, addresses))
