"""Moving a slot range between shards: each node's part (`MoveWorker`, stepped by the
node's poller, proxy.cluster_node), and `temporalstore cluster move` and `cluster show`.

The move is a record in etcd (flusher.slotmove) that the nodes carry forward:

1. `cluster move` checks the request (the target is a registered node, every slot of
   the range is served, no other move runs) and creates the record, `fence`, once per
   source shard when the range spans several.
2. The source fences the range (`ClusterView.fenced`: its writes answer -TRYAGAIN,
   reads are served), waits until everything it committed is durable in its own
   stream, and sets `import` with that LSN (the fenced LSN).
3. The target reads the source's stream (its --storage, registered in etcd) into a
   scratch store, up to at least the fenced LSN (nothing after it touches the
   range), forgets whatever an earlier, unfinished try left of the range, takes the
   range's keys with every version (store.moves: IMPORT records of its own stream,
   LSNs renumbered into its own), waits until they are durable, then in one etcd
   transaction gives itself the range in the slot map (epoch + 1) and sets `done`.
4. The source sees the new map (its clients now get -MOVED to the target), forgets
   the range's keys (a FORGET record of its stream), lifts the fence and deletes the
   record. `cluster move` sees it gone and the map changed: done.

A shard is its node, or a replicated shard (a group's nodes, started with --group)
its group (flusher.slotmove.shard_id): the group's primary of the moment does the
shard's steps, its etcd writes fenced on the group's leader key; its IMPORT and
FORGET records reach the group's replicas through replication as any other; its
storage is the group's shared prefix. Every node of a source group fences the range,
so a replica promoted during the move refuses writes to it from its first one.

A move is resumable: the record stays until the nodes finish it, each step is
repeated by the node whose turn it is until it succeeds (after a restart or a
failover too), and a target that died half-way imports again from the start.
`cluster move` aborts the move when it has not reached `done` within its --timeout
(the record is deleted by a transaction against the revision it read, which the
target's commit of the map cannot also win): the map is unchanged and the source
lifts its fence.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

from commands.session import ServerCore
from flusher.clustersnaps import recorded
from flusher.coordination import CoordinationError, etcd_client
from flusher.objectapi import ObjectStoreError
from flusher.objectstore import open_object_store
from flusher.slotmap import node_id_for, nodes, read_map
from flusher.slotmove import (
    DONE,
    FENCE,
    GROUP_PREFIX,
    IMPORT,
    Fence,
    Move,
    MoveConflict,
    commit_move,
    delete_move,
    put_move,
    put_storage,
    read_move,
    read_storage,
    shard_id,
)
from replay.replay import recover
from store import Store, now_ms
from store.moves import (
    IMPORT_CMD,
    carried_tables,
    export_range,
    longest_chain,
    range_keys,
    renumber,
)
from store.policy import HistoryPolicy
from store.slots import SLOTS, ClusterView, Shard, SlotMap, owner_runs, reassign

log = logging.getLogger("temporalstore")

BATCH = 1000
"""Keys per IMPORT record."""
DURABLE_WAIT_S = 30.0


def absolute_storage(url: str) -> str:
    """A --storage URL other processes can open: a relative file:// made absolute."""
    if url.startswith("file://"):
        return "file://" + os.path.abspath(url[len("file://") :])
    return url


class MovingNode(Protocol):
    """What a move worker uses of its node (proxy.cluster_node.ClusterNode, which
    makes the worker: this module does not import it)."""

    state: ServerCore
    client: Any
    cluster: str
    view: ClusterView
    # With a group: its leader key and this term's value while this node is the
    # group's serving primary, else None.
    leading: Callable[[], Fence]

    async def refresh(self) -> None:
        """Read the slot map; apply it if it changed."""


class MoveWorker:
    """This node's part in the move recorded in etcd, one step per poll."""

    def __init__(self, node: MovingNode) -> None:
        self.node = node
        self.active = False  # a move concerning this node is recorded
        # The range this node's shard imported for a move not committed yet: forgotten
        # again by the shard's primary if the move is aborted (a replica keeps it in
        # mind in case it is promoted; a restart forgets it at the next try to move it).
        self.imported: tuple[int, int] | None = None

    @property
    def shard(self) -> str:
        """This node's shard as a move names it (its group's, for a group's node)."""
        return shard_id(self.node.view.node_id, self.node.view.group)

    def _leads(self) -> bool:
        """This node does its shard's steps: a shard of its own, or its group's serving
        primary."""
        return not self.node.view.group or self.node.leading() is not None

    async def register_storage(self) -> None:
        config = self.node.state.config
        await put_storage(
            self.node.client,
            self.node.cluster,
            self.shard,
            absolute_storage(config.storage),
            config.s3_endpoint_url,
        )

    async def fence_check(self) -> None:
        """Fence the range of the move this node's shard gives away, if one is recorded
        (a node about to serve its shard's writes: started, or promoted)."""
        move, _ = await read_move(self.node.client, self.node.cluster)
        if move is not None and move.source == self.shard:
            self.node.view.fenced = (move.first, move.last)
        if self.node.view.group and self._leads():
            # A promoted primary commits after every recorded seal too: its group may
            # have taken a range whose seals its old primary had not committed past.
            try:
                await self._after_seals(None)
            except (ValueError, ObjectStoreError) as exc:
                log.warning("cluster %s: no commit after the seals (%s)", self.node.cluster, exc)

    async def step(self) -> None:
        node = self.node
        view = node.view
        move, revision = await read_move(node.client, node.cluster)
        me = self.shard
        leads = self._leads()
        if self.imported is not None and (move is None or move.state == FENCE) and leads:
            await self._drop_aborted(*self.imported)
        if move is None or me not in (move.source, move.target):
            self.active = move is not None
            if view.fenced is not None:
                view.fenced = None
                log.info("cluster %s: slot move ended: fence lifted", node.cluster)
            return
        self.active = True
        if move.source == me:
            if view.fenced is None:
                log.info("cluster %s: fencing slots %d-%d", node.cluster, move.first, move.last)
            view.fenced = (move.first, move.last)  # a group's replicas too
            if not leads or view.me < 0:  # a replica, or a primary the map names not yet
                return
            if move.state == FENCE:
                await self._fence(move, revision)
            elif move.state == DONE:
                await self._forget(move, revision)
        elif move.state == IMPORT:
            if leads:
                await self._import(move, revision)
            elif self.imported is None:  # a replica of the target: its primary imports
                log.info(
                    "cluster %s: slots %d-%d being imported by this shard's primary",
                    node.cluster,
                    move.first,
                    move.last,
                )
                self.imported = (move.first, move.last)  # in case it fails over
        elif move.state == DONE and not leads:
            self.imported = None

    def _commit(self, op: tuple[Any, ...], not_before_ms: int = 0) -> int:
        """Commit a database op of the move (at `not_before_ms` or later: see
        `_import`)."""
        if not self._leads():  # the lease lapsed during the step: not this node's turn
            raise ValueError(f"this node no longer leads group {self.node.view.group}")
        store = self.node.state.store
        store.begin(IMPORT_CMD)
        if not_before_ms > store.last_time_ms:
            store.commit_time = max(now_ms(), not_before_ms)
        store.db_op(0, op)
        return store.commit()

    async def _after_seals(self, source: str | None) -> None:
        """Commit an empty IMPORT after every seal the source shard (None: any shard)
        recorded for a cluster snapshot (proxy.cluster_time): one sealed after this
        shard read the source's stream, before the map gave it the range, has its time
        too. Nothing if this shard's clock is past them already (the common case)."""
        node = self.node
        try:
            snaps = await recorded(node.client, node.cluster)
        except CoordinationError as exc:
            log.warning("cluster %s: cannot read its snapshots (%s)", node.cluster, exc)
            return
        sealed = max(
            (
                t
                for snap in snaps.values()
                for shard, t in snap.times.items()
                if source is None or shard == source
            ),
            default=0,
        )
        if sealed >= node.state.store.last_time_ms:
            await self._durable(self._commit(("import", ()), sealed + 1))

    async def _durable(self, lsn: int) -> None:
        durability = self.node.state.durability
        if durability is not None and not await durability.wait_durable(lsn, DURABLE_WAIT_S):
            raise ObjectStoreError(f"LSN {lsn} not durable after {DURABLE_WAIT_S:g} s")

    async def _fence(self, move: Move, revision: int) -> None:
        lsn = self.node.state.store.lsn  # no write to the range commits after this
        await self._durable(lsn)
        move.state, move.fenced_lsn = IMPORT, lsn
        await put_move(self.node.client, self.node.cluster, move, revision, self.node.leading())
        log.info(
            "cluster %s: slots %d-%d fenced and flushed at LSN %d",
            self.node.cluster,
            move.first,
            move.last,
            lsn,
        )

    async def _import(self, move: Move, revision: int) -> None:
        node = self.node
        found = await read_storage(node.client, node.cluster, move.source)
        if found is None:
            raise ValueError(f"shard {move.source} registered no storage")
        view = node.view
        if view.group and 0 <= view.mine != view.me:
            raise ValueError(f"the slot map names another primary of shard {view.group} yet")
        store = node.state.store
        started = time.monotonic()
        scratch = Store(databases=max(16, len(store.dbs)), history=HistoryPolicy("all", 0))
        objects = open_object_store(*found)
        try:
            rec = await recover(scratch, objects)
        finally:
            await objects.close()
        if rec.lsn < move.fenced_lsn:
            raise ValueError(f"the source's stream ends at LSN {rec.lsn}, before {move.fenced_lsn}")
        items = export_range(scratch.dbs[0], move.first, move.last)
        source_ms = scratch.last_time_ms
        tables = carried_tables(scratch, store, items, bool(node.state.config.etcd_endpoints))
        del scratch
        replayed = time.monotonic()
        left = range_keys(store.dbs[0], move.first, move.last)
        if left:
            self._commit(("forget", tuple(left)))
        for op in tables:  # the moved keys' tables, where this shard has none
            self._commit(op)
            log.info(
                "cluster %s: table %s (%s) created for the moved keys",
                node.cluster,
                op[1].decode(errors="replace"),
                op[2],
            )
        # An empty IMPORT first: the versions committed after this store's last commit
        # take its LSN; then as many as the longest chain needs LSNs. It and every
        # commit after it take times at or past the source's last (its clock's, which
        # is past its seals: store.keyspace), so the moved keys' later versions here
        # are later by time than any seal of the source (a cluster snapshot reads the
        # moved keys by time: proxy.cluster_time).
        lsn = self._commit(("import", ()), source_ms)
        while store.lsn < longest_chain(items):
            lsn = self._commit(("import", ()))
        self.imported = (move.first, move.last)
        for i in range(0, len(items), BATCH):
            batch = renumber(store, items[i : i + BATCH], store.lsn)
            lsn = self._commit(("import", tuple(batch)))
        imported = time.monotonic()
        await self._durable(lsn)
        durable = time.monotonic()
        old, map_revision = await read_map(node.client, node.cluster)
        if old is None:
            raise ValueError("no slot map")
        me = Shard(view.node_id, view.host, view.port, group=view.group)
        new = reassign(old, move.first, move.last, me)
        await commit_move(
            node.client, node.cluster, move, revision, new, map_revision, node.leading()
        )
        self.imported = None
        await self._after_seals(move.source)
        await node.refresh()
        log.info(
            "cluster %s: took slots %d-%d (%d keys) at LSN %d, epoch %d "
            "(replay %.3f s, import %.3f s, durable %.3f s, map %.3f s)",
            node.cluster,
            move.first,
            move.last,
            len(items),
            lsn,
            new.epoch,
            replayed - started,
            imported - replayed,
            durable - imported,
            time.monotonic() - durable,
        )

    async def _drop_aborted(self, first: int, last: int) -> None:
        """Forget what an import of slots first..last left, its move aborted (unless
        the map gives the range to this node after all)."""
        await self.node.refresh()
        view = self.node.view
        if view.map.owner[first] != view.mine or view.mine < 0:
            keys = range_keys(self.node.state.store.dbs[0], first, last)
            if keys:
                await self._durable(self._commit(("forget", tuple(keys))))
            log.info(
                "cluster %s: slots %d-%d not taken: imported keys dropped",
                self.node.cluster,
                first,
                last,
            )
        self.imported = None

    async def _forget(self, move: Move, revision: int) -> None:
        node = self.node
        await node.refresh()
        view = node.view
        if view.me < 0 or any(
            view.map.owner[s] == view.me for s in range(move.first, move.last + 1)
        ):
            return  # not the map that gives the range away (yet), or no longer the primary
        keys = range_keys(node.state.store.dbs[0], move.first, move.last)
        if keys:
            await self._durable(self._commit(("forget", tuple(keys))))
        await delete_move(node.client, node.cluster, revision, node.leading())
        view.fenced = None
        log.info(
            "cluster %s: gave slots %d-%d away (%d keys)",
            node.cluster,
            move.first,
            move.last,
            len(keys),
        )


# --------------------------------------------------------------------------- the CLI


def _fail(action: str, text: str) -> int:
    print(f"temporalstore cluster {action}: {text}", file=sys.stderr)
    return 1


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges) or "none"


async def _dbsize(host: str, port: int) -> str:
    """The node's DBSIZE, or `?` if it does not answer within a second."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1)
        try:
            writer.write(b"*1\r\n$6\r\nDBSIZE\r\n")
            line = await asyncio.wait_for(reader.readline(), 1)
        finally:
            writer.close()
    except OSError:  # TimeoutError too
        return "?"
    return line[1:].strip().decode() if line.startswith(b":") else "?"


async def _show(endpoints: str, cluster: str) -> int:
    client = etcd_client(endpoints)
    try:
        found, _ = await read_map(client, cluster)
        registered = await nodes(client, cluster)
        move, _ = await read_move(client, cluster)
    except (CoordinationError, ValueError) as exc:
        return _fail("show", str(exc))
    finally:
        await client.close()
    slot_map = found or SlotMap()
    state = "ok" if slot_map.assigned == SLOTS else "fail"
    print(
        f"cluster {cluster}: config epoch {slot_map.epoch}, "
        f"{slot_map.assigned} of {SLOTS} slots assigned, state {state}"
    )
    live = {n.node_id for n in registered}
    names = {}
    for shard in slot_map.shards:
        names[shard_id(shard.node_id, shard.group)] = f"{shard.host}:{shard.port}"
        up = "" if shard.node_id in live else " (not registered: down?)"
        keys = await _dbsize(shard.host, shard.port)
        group = f" group {shard.group}" if shard.group else ""
        print(
            f"shard {shard.node_id} {shard.host}:{shard.port} "
            f"slots {_ranges_text(shard.ranges)} keys {keys}{group}{up}"
        )
    for n in registered:
        if n.shard:
            names.setdefault(shard_id("", n.shard), f"group {n.shard}")
        if n.node_id not in names:
            names[n.node_id] = n.addr
            role = f"no slots of its own (group {n.shard})" if n.shard else "no slots"
            print(f"node {n.node_id} {n.addr} {role}")
    if move is None:
        print("no move in progress")
    else:
        fenced = f", fenced at LSN {move.fenced_lsn}" if move.state != FENCE else ""
        print(
            f"move in progress: slots {move.first}-{move.last} from "
            f"{names.get(move.source, move.source)} to {names.get(move.target, move.target)}, "
            f"state {move.state}{fenced}"
        )
    return 0


def _slots(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    if not first.isdigit() or not (last or first).isdigit():
        raise SystemExit(f"temporalstore cluster move: --slots {text!r} is not FIRST-LAST")
    a, b = int(first), int(last or first)
    if not a <= b < SLOTS:
        raise SystemExit(
            f"temporalstore cluster move: --slots {text}: want 0 <= FIRST <= LAST <= {SLOTS - 1}"
        )
    return a, b


async def _move(ns: argparse.Namespace, first: int, last: int, to: tuple[str, int]) -> int:
    client = etcd_client(ns.etcd_endpoints)
    try:
        return await _move_with(client, ns.cluster_name, first, last, to, ns.timeout)
    except (CoordinationError, ValueError) as exc:
        return _fail("move", str(exc))
    finally:
        await client.close()


async def _move_with(
    client: Any, cluster: str, first: int, last: int, to: tuple[str, int], timeout: float
) -> int:
    slot_map, _ = await read_map(client, cluster)
    if slot_map is None:
        return _fail("move", f"cluster {cluster} has no slot map (run cluster create first)")
    target = f"{to[0]}:{to[1]}"
    registered = {n.node_id: n for n in await nodes(client, cluster)}
    node = registered.get(node_id_for(*to))
    if node is None:
        return _fail("move", f"{target} is not a registered node of cluster {cluster}")
    # A node of a replicated shard names its shard: the group's primary takes the range.
    target_id = shard_id(node.node_id, node.shard)
    if node.shard:
        target = f"{target} (group {node.shard})"
    runs = owner_runs(slot_map, first, last)
    unserved = [(a, b) for o, a, b in runs if o < 0]
    if unserved:
        return _fail("move", f"slots {_ranges_text(unserved)} are not served by any shard")
    ids = [shard_id(s.node_id, s.group) for s in slot_map.shards]
    runs = [(o, a, b) for o, a, b in runs if ids[o] != target_id]
    if not runs:
        return _fail("move", f"slots {first}-{last} are {target}'s already: nothing to move")
    live = {n.shard for n in registered.values() if n.shard}
    for o, a, b in runs:
        source = slot_map.shards[o]
        if source.node_id not in registered and source.group not in live:
            return _fail(
                "move",
                f"slots {a}-{b} are served by {source.host}:{source.port}, which is not "
                "registered (down?)",
            )
    for shard in {target_id, *(ids[o] for o, _, _ in runs)}:
        if await read_storage(client, cluster, shard) is None:
            what = shard.replace(GROUP_PREFIX, "group ", 1)
            return _fail("move", f"shard {what} registered no storage (an older server?)")
    current, _ = await read_move(client, cluster)
    if current is not None:
        return _fail(
            "move",
            f"a move is in progress (slots {current.first}-{current.last}, "
            f"state {current.state}); see cluster show",
        )
    for o, a, b in runs:
        source = slot_map.shards[o]
        failed = await one_move(client, cluster, Move(a, b, ids[o], target_id), timeout)
        if failed is not None:
            return _fail("move", failed)
        moved, _ = await read_map(client, cluster)
        epoch = moved.epoch if moved is not None else 0
        print(
            f"moved slots {a}-{b} from {source.host}:{source.port} to {target} "
            f"(config epoch {epoch})"
        )
    return 0


async def one_move(client: Any, cluster: str, move: Move, timeout: float) -> str | None:
    """Record the move, wait until the nodes finish it; abort it past `timeout`. None
    when it is done, else why not."""
    await put_move(client, cluster, move, 0)
    deadline = time.monotonic() + timeout
    while True:
        await asyncio.sleep(0.1)
        now, revision = await read_move(client, cluster)
        if now is None or (now.first, now.last, now.target) != (move.first, move.last, move.target):
            slot_map, _ = await read_map(client, cluster)
            if slot_map is not None and slot_map.owner[move.first] >= 0:
                owner = slot_map.shards[slot_map.owner[move.first]]
                if shard_id(owner.node_id, owner.group) == move.target:
                    return None
            return f"the move of slots {move.first}-{move.last} was aborted; map unchanged"
        if now.state != DONE and time.monotonic() > deadline:
            try:
                await delete_move(client, cluster, revision)
            except MoveConflict:
                continue  # it moved on meanwhile: look again
            return (
                f"slots {move.first}-{move.last} not moved within {timeout:g} s "
                f"(state {now.state}): aborted, the slot map is unchanged"
            )


def show_main(ns: argparse.Namespace) -> int:
    return asyncio.run(_show(ns.etcd_endpoints, ns.cluster_name))


def move_main(ns: argparse.Namespace, to: tuple[str, int]) -> int:
    first, last = _slots(ns.slots)
    return asyncio.run(_move(ns, first, last, to))
