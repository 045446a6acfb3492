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

A move is resumable: the record stays until the nodes finish it, each step is
repeated by the node whose turn it is until it succeeds (after a restart too), and a
target that died half-way imports again from the start. `cluster move` aborts the
move when it has not reached `done` within its --timeout (the record is deleted by
a transaction against the revision it read, which the target's commit of the map
cannot also win): the map is unchanged and the source lifts its fence.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from typing import Any, Protocol

from commands.session import ServerCore
from flusher.coordination import CoordinationError, etcd_client
from flusher.objectapi import ObjectStoreError
from flusher.objectstore import open_object_store
from flusher.slotmap import node_id_for, nodes, read_map
from flusher.slotmove import (
    DONE,
    FENCE,
    IMPORT,
    Move,
    MoveConflict,
    commit_move,
    delete_move,
    put_move,
    put_storage,
    read_move,
    read_storage,
)
from replay.replay import recover
from store import Store
from store.moves import IMPORT_CMD, export_range, longest_chain, range_keys, renumber
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

    async def refresh(self) -> None:
        """Read the slot map; apply it if it changed."""


class MoveWorker:
    """This node's part in the move recorded in etcd, one step per poll."""

    def __init__(self, node: MovingNode) -> None:
        self.node = node
        self.active = False  # a move concerning this node is recorded
        # The range this node imported for a move not committed yet: forgotten again
        # if the move is aborted (a restart forgets it at the next try to move it).
        self.imported: tuple[int, int] | None = None

    async def register_storage(self) -> None:
        config = self.node.state.config
        await put_storage(
            self.node.client,
            self.node.cluster,
            self.node.view.node_id,
            absolute_storage(config.storage),
            config.s3_endpoint_url,
        )

    async def step(self) -> None:
        node = self.node
        view = node.view
        move, revision = await read_move(node.client, node.cluster)
        me = view.node_id
        if self.imported is not None and (move is None or move.state == FENCE):
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
            view.fenced = (move.first, move.last)
            if move.state == FENCE:
                await self._fence(move, revision)
            elif move.state == DONE:
                await self._forget(move, revision)
        elif move.state == IMPORT:
            await self._import(move, revision)

    def _commit(self, op: tuple[Any, ...]) -> int:
        store = self.node.state.store
        store.begin(IMPORT_CMD)
        store.db_op(0, op)
        return store.commit()

    async def _durable(self, lsn: int) -> None:
        durability = self.node.state.durability
        if durability is not None and not await durability.wait_durable(lsn, DURABLE_WAIT_S):
            raise ObjectStoreError(f"LSN {lsn} not durable after {DURABLE_WAIT_S:g} s")

    async def _fence(self, move: Move, revision: int) -> None:
        lsn = self.node.state.store.lsn  # no write to the range commits after this
        await self._durable(lsn)
        move.state, move.fenced_lsn = IMPORT, lsn
        await put_move(self.node.client, self.node.cluster, move, revision)
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
            raise ValueError(f"node {move.source} registered no storage")
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
        del scratch
        replayed = time.monotonic()
        left = range_keys(store.dbs[0], move.first, move.last)
        if left:
            self._commit(("forget", tuple(left)))
        # An empty IMPORT first: the versions committed after this store's last commit
        # take its LSN; then as many as the longest chain needs LSNs.
        lsn = self._commit(("import", ()))
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
        view = node.view
        new = reassign(old, move.first, move.last, Shard(view.node_id, view.host, view.port))
        await commit_move(node.client, node.cluster, move, revision, new, map_revision)
        self.imported = None
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
        if view.map.owner[first] != view.me or view.me < 0:
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
        if any(view.map.owner[s] == view.me for s in range(move.first, move.last + 1)):
            return  # not the map that gives the range away (yet)
        keys = range_keys(node.state.store.dbs[0], move.first, move.last)
        if keys:
            await self._durable(self._commit(("forget", tuple(keys))))
        await delete_move(node.client, node.cluster, revision)
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
        names[shard.node_id] = f"{shard.host}:{shard.port}"
        up = "" if shard.node_id in live else " (not registered: down?)"
        keys = await _dbsize(shard.host, shard.port)
        group = f" group {shard.group}" if shard.group else ""
        print(
            f"shard {shard.node_id} {shard.host}:{shard.port} "
            f"slots {_ranges_text(shard.ranges)} keys {keys}{group}{up}"
        )
    for n in registered:
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
    target_id = node_id_for(*to)
    registered = {n.node_id: n for n in await nodes(client, cluster)}
    if target_id not in registered:
        return _fail("move", f"{target} is not a registered node of cluster {cluster}")
    runs = owner_runs(slot_map, first, last)
    grouped = [slot_map.shards[o].group for o, _, _ in runs if o >= 0 and slot_map.shards[o].group]
    if registered[target_id].shard or grouped:
        return _fail(
            "move", "moving slots to or from a replicated shard (--group) is not supported yet"
        )
    unserved = [(a, b) for o, a, b in runs if o < 0]
    if unserved:
        return _fail("move", f"slots {_ranges_text(unserved)} are not served by any shard")
    runs = [(o, a, b) for o, a, b in runs if slot_map.shards[o].node_id != target_id]
    if not runs:
        return _fail("move", f"slots {first}-{last} are {target}'s already: nothing to move")
    for o, a, b in runs:
        source = slot_map.shards[o]
        if source.node_id not in registered:
            return _fail(
                "move",
                f"slots {a}-{b} are served by {source.host}:{source.port}, which is not "
                "registered (down?)",
            )
    for node_id in {target_id, *(slot_map.shards[o].node_id for o, _, _ in runs)}:
        if await read_storage(client, cluster, node_id) is None:
            return _fail("move", f"node {node_id} registered no storage (an older server?)")
    current, _ = await read_move(client, cluster)
    if current is not None:
        return _fail(
            "move",
            f"a move is in progress (slots {current.first}-{current.last}, "
            f"state {current.state}); see cluster show",
        )
    for o, a, b in runs:
        source = slot_map.shards[o]
        failed = await _one_move(client, cluster, Move(a, b, source.node_id, target_id), timeout)
        if failed is not None:
            return _fail("move", failed)
        moved, _ = await read_map(client, cluster)
        epoch = moved.epoch if moved is not None else 0
        print(
            f"moved slots {a}-{b} from {source.host}:{source.port} to {target} "
            f"(config epoch {epoch})"
        )
    return 0


async def _one_move(client: Any, cluster: str, move: Move, timeout: float) -> str | None:
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
                if slot_map.shards[slot_map.owner[move.first]].node_id == move.target:
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
