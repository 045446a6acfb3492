"""Moving a slot range between shards: each node's part (`MoveWorker`, stepped by the
node's poller, proxy.cluster_node), and `temporalstore cluster move` and `cluster show`.

The move is a record in etcd (flusher.slotmove) that the nodes carry forward:

1. `cluster move` checks the request (the target is a registered node, every slot of
   the range is served, no other move runs) and creates the record, `precopy`, once
   per source shard when the range spans several.
2. Pre-copy: the target reads the source's stream (its --storage, registered in
   etcd) into a scratch store as far as it is durable, forgets whatever an earlier,
   unfinished try left of the range, takes the range's keys with every version
   (store.moves: IMPORT records of its own stream, LSNs renumbered into its own),
   waits until they are durable; then, in rounds (ROUNDS at most), reads on over what
   the source wrote meanwhile and takes again the range's keys written in it, as
   step 4 does, until a round has few of them (SETTLED); then sets `fence`, naming
   this pre-copy (`copy`) and the source's LSN it read up to. The source takes
   writes to the range all along.
3. The source fences the range (`ClusterView.fenced`: its writes answer -TRYAGAIN,
   reads are served), waits until everything it committed is durable in its own
   stream, and sets `import` with that LSN (the fenced LSN).
4. The target reads the tail of the source's stream into the same scratch store, up
   to at least the fenced LSN (nothing after it touches the range), takes again the
   range's keys written in that tail (by the version indexes, or the scratch store's
   chains where its index does not reach back so far: on the source, and by its own
   store, an expiry say), each with its whole chain replacing what the pre-copy took
   (a key deleted in the tail is deleted here too), waits until they are durable,
   then in one etcd transaction gives itself the range in the slot map (epoch + 1)
   and sets `done`. Writes to the range are refused only from step 3 to
   here: the tail, not the whole stream. A target without the pre-copy in memory (it
   restarted, or its group failed over, since) takes the whole range again instead,
   from the start (one whose own index does not reach back to it, from its scratch
   store).
5. The source sees the new map (its clients now get -MOVED to the target), forgets
   the range's keys (a FORGET record of its stream), lifts the fence and deletes the
   record. `cluster move` sees it gone and the map changed: done.

Until the map gives the range to the target, the target serves none of the keys it
took (routing answers -MOVED to the source), though DBSIZE, KEYS and SCAN count them.

A shard is its node, or a replicated shard (a group's nodes, started with --group)
its group (flusher.slotmove.shard_id): the group's primary of the moment does the
shard's steps, its etcd writes fenced on the group's leader key; its IMPORT and
FORGET records reach the group's replicas through replication as any other; its
storage is the group's shared prefix. Every node of a source group fences the range
from `fence` on, so a replica promoted during the move refuses writes to it from its
first one.

A move is resumable: the record stays until the nodes finish it, each step is
repeated by the node whose turn it is until it succeeds (after a restart or a
failover too), and a target that died half-way imports again from the start.
`cluster move` aborts the move when it has not reached `done` within its --timeout
(the record is deleted by a transaction against the revision it read, which the
target's commit of the map cannot also win): the map is unchanged, the source lifts
its fence and the target forgets what it took.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from commands.session import ServerCore
from flusher.clustersnaps import recorded
from flusher.coordination import CoordinationError, etcd_client
from flusher.objectapi import ObjectStore, ObjectStoreError
from flusher.objectstore import open_object_store
from flusher.slotmap import node_id_for, nodes, read_map
from flusher.slotmove import (
    DONE,
    FENCE,
    GROUP_PREFIX,
    IMPORT,
    PRECOPY,
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
from replay.replay import Recovery, ReplayError, recover
from store import Store, now_ms
from store.moves import (
    IMPORT_CMD,
    carried_tables,
    export_keys,
    export_range,
    held,
    in_range,
    longest_chain,
    range_keys,
    renumber,
    written_since,
)
from store.policy import HistoryPolicy
from store.slots import SLOTS, ClusterView, Shard, SlotMap, owner_runs, reassign

log = logging.getLogger("temporalstore")

BATCH = 1000
"""Keys per IMPORT record."""
ROUNDS = 5
"""Pre-copy rounds at most after the first, each taking the keys written during the
one before."""
SETTLED = 2 * BATCH
"""A round that took fewer keys than this ends the pre-copy."""
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


HOLD_ENV = "TEMPORALSTORE_MOVE_HOLD"
"""Tests only: the name of a file; while it holds a state's name (`precopy`: after
the pre-copy, `import`: before the import of the tail), the target waits there."""


def _held(state: str) -> bool:
    path = os.environ.get(HOLD_ENV)
    if not path:
        return False
    try:
        with open(path) as f:
            return f.read().strip() == state
    except OSError:
        return False


def _reached(rec: Recovery, lsn: int) -> None:
    """The replay of the source's stream reached `lsn` (the fenced LSN: it is durable
    there; a replay that did not was early, or read a stale listing: tried again)."""
    if rec.lsn < lsn:
        raise ValueError(f"the source's stream ends at LSN {rec.lsn}, before {lsn}")


@dataclass
class PreCopy:
    """What this node's pre-copy of a range leaves for the import of the tail: the
    scratch store of the source's stream, which the tail continues."""

    move: tuple[int, int, str]  # the range and the source shard
    token: str  # names it in the move record (`Move.copy`)
    scratch: Store
    recovery: Recovery
    lsn: int  # the source's LSN the scratch store had reached when last imported
    at: int  # this store's last LSN of that import
    keys: int  # about how many keys of the range that left here

    def advanced(self, keys: int, at: int) -> None:
        """The scratch store's keys written up to its LSN now are imported, the last
        at this store's LSN `at`."""
        self.lsn, self.at, self.keys = self.scratch.lsn, at, keys


class MoveWorker:
    """This node's part in the move recorded in etcd, one step per poll."""

    def __init__(self, node: MovingNode) -> None:
        self.node = node
        self.active = False  # a move concerning this node is recorded
        # The range this node's shard imported for a move not committed yet: forgotten
        # again by the shard's primary if the move is aborted (a replica keeps it in
        # mind in case it is promoted; a restart forgets it at the next try to move it).
        self.imported: tuple[int, int] | None = None
        # The pre-copy this node made for the move in progress, in memory only: a
        # restart or a failover loses it, and the import of the tail is then a whole
        # import again.
        self.copy: PreCopy | None = None

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
        past its pre-copy (a node about to serve its shard's writes: started, or
        promoted)."""
        move, _ = await read_move(self.node.client, self.node.cluster)
        if move is not None and move.source == self.shard and move.state != PRECOPY:
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
        ours = move is not None and move.target == me
        if move is None or not ours or not leads or self._copied(move) is None:
            self.copy = None  # not (or no longer) this move's, or not this node's turn
        if (
            self.imported is not None
            and leads
            and (move is None or not ours or (move.first, move.last) != self.imported)
        ):
            await self._drop_aborted(*self.imported)
        if move is None or me not in (move.source, move.target):
            self.active = move is not None
            if view.fenced is not None:
                view.fenced = None
                log.info("cluster %s: slot move ended: fence lifted", node.cluster)
            return
        self.active = True
        if move.source == me:
            if move.state == PRECOPY:  # the target copies: writes go on meanwhile
                if view.fenced is not None:  # of an aborted move
                    view.fenced = None
                    log.info("cluster %s: fence lifted", node.cluster)
                return
            if view.fenced is None:
                log.info("cluster %s: fencing slots %d-%d", node.cluster, move.first, move.last)
            view.fenced = (move.first, move.last)  # a group's replicas too
            if not leads or view.me < 0:  # a replica, or a primary the map names not yet
                return
            if move.state == FENCE:
                await self._fence(move, revision)
            elif move.state == DONE:
                await self._forget(move, revision)
        elif move.state == DONE:
            if not leads:
                self.imported = None
        elif not leads:  # a replica of the target: its primary imports
            if self.imported is None:
                log.info(
                    "cluster %s: slots %d-%d being imported by this shard's primary",
                    node.cluster,
                    move.first,
                    move.last,
                )
                self.imported = (move.first, move.last)  # in case it fails over
        elif move.state == PRECOPY:
            await self._precopy(move, revision)
        elif move.state == IMPORT and not _held(IMPORT):
            await self._import(move, revision)

    def _copied(self, move: Move) -> PreCopy | None:
        """This node's pre-copy of `move`'s range, if it made one and the record names
        no other (its keys are still in this store as it imported them: the tail read
        from its LSN on brings them to the fence, whichever record asked for it)."""
        copy = self.copy
        if copy is None or copy.move != (move.first, move.last, move.source):
            return None
        return copy if move.copy in ("", copy.token) else None

    def _commit(self, op: tuple[Any, ...], not_before_ms: int = 0) -> int:
        """Commit a database op of the move (at `not_before_ms` or later: see
        `_take`)."""
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

    async def _source_stream(self, move: Move) -> ObjectStore:
        """The source's storage, opened (the caller closes it)."""
        found = await read_storage(self.node.client, self.node.cluster, move.source)
        if found is None:
            raise ValueError(f"shard {move.source} registered no storage")
        view = self.node.view
        if view.group and 0 <= view.mine != view.me:
            raise ValueError(f"the slot map names another primary of shard {view.group} yet")
        return open_object_store(*found)

    async def _replay(self, move: Move) -> tuple[Store, Recovery]:
        """The source's stream so far, replayed into a scratch store keeping every
        version."""
        store = self.node.state.store
        scratch = Store(databases=max(16, len(store.dbs)), history=HistoryPolicy("all", 0))
        objects = await self._source_stream(move)
        try:
            return scratch, await recover(scratch, objects)
        finally:
            await objects.close()

    async def _precopy(self, move: Move, revision: int) -> None:
        """Import the range as the source's stream holds it so far (the source still
        takes writes to it), take again what was written meanwhile for a few rounds,
        then hand the move on to the source's fence."""
        node = self.node
        copy = self._copied(move)
        if copy is None:
            started = time.monotonic()
            scratch, rec = await self._replay(move)
            items = export_range(scratch.dbs[0], move.first, move.last)
            replayed = time.monotonic()
            left = range_keys(node.state.store.dbs[0], move.first, move.last)
            lsn = self._take(move, scratch, items, left)
            imported = time.monotonic()
            await self._durable(lsn)
            token = os.urandom(8).hex()
            copy = PreCopy((move.first, move.last, move.source), token, scratch, rec, 0, 0, 0)
            copy.advanced(len(items), lsn)
            self.copy = copy
            spent = [replayed - started, imported - replayed, time.monotonic() - imported]
            rounds = await self._rounds(move, copy, spent)
            log.info(
                "cluster %s: pre-copied slots %d-%d (%d keys) up to the source's LSN %d, "
                "%d rounds after the first (replay %.3f s, import %.3f s, durable %.3f s)",
                node.cluster,
                move.first,
                move.last,
                len(items),
                copy.lsn,
                rounds,
                *spent,
            )
        elif _held(PRECOPY):
            return
        move.copied_lsn, move.copy = copy.lsn, copy.token
        move.state = PRECOPY if _held(PRECOPY) else FENCE
        await put_move(node.client, node.cluster, move, revision, node.leading())

    async def _rounds(self, move: Move, copy: PreCopy, spent: list[float]) -> int:
        """Take again, round after round, the keys written while the last round ran,
        until one has few (so the fence's tail is short) or ROUNDS have run; add
        their seconds to `spent` (replay, import, durable). Returns how many ran."""
        for done in range(ROUNDS):
            started = time.monotonic()
            try:
                found = await self._advance(move, copy, 0)
            except ReplayError as exc:  # the fence's step reads the stream again
                log.warning("cluster %s: pre-copy round: %s", self.node.cluster, exc)
                return done
            if found is None:
                return done
            items, forget = found
            replayed = time.monotonic()
            keys = self._keys_after(copy, items, forget)
            lsn = self._take(move, copy.scratch, items, forget)
            copy.advanced(keys, lsn)
            imported = time.monotonic()
            await self._durable(lsn)
            marks = (started, replayed, imported, time.monotonic())
            for i in range(3):
                spent[i] += marks[i + 1] - marks[i]
            log.info(
                "cluster %s: pre-copy round %d: %d keys written meanwhile taken again",
                self.node.cluster,
                done + 1,
                len(forget),
            )
            if len(forget) < SETTLED:
                return done + 1
        return ROUNDS

    def _keys_after(self, copy: PreCopy, items: list[Any], forget: list[bytes]) -> int:
        """How many keys of the range this store will hold once `forget` is forgotten
        and `items` imported."""
        db = self.node.state.store.dbs[0]
        return copy.keys - sum(1 for k in forget if held(db, k)) + len(items)

    async def _advance(
        self, move: Move, copy: PreCopy, until: int
    ) -> tuple[list[Any], list[bytes]] | None:
        """Continue the pre-copy's scratch store over the source's stream (to `until`
        at least): the IMPORT items of the range's keys written since the pre-copy's
        last point (on the source, or by this store itself: an expiry, a FLUSHALL) and
        those keys, to forget first. None when this store's are not known (its version
        index does not reach back so far): then the whole range is imported again."""
        objects = await self._source_stream(move)
        try:
            copy.recovery = await recover(copy.scratch, objects, None, after=copy.recovery)
        finally:
            await objects.close()
        _reached(copy.recovery, until)
        scratch, store = copy.scratch, self.node.state.store
        ours = store.keys_written(0, copy.at, store.lsn)
        if ours is None:
            log.info("cluster %s: the keys written here since are not known", self.node.cluster)
            return None
        db = scratch.dbs[0]
        theirs = scratch.keys_written(0, copy.lsn, scratch.lsn)
        if theirs is None:  # the index does not reach back so far: the chains say
            theirs = set(written_since(db, range_keys(db, move.first, move.last), copy.lsn))
        keys = [k for k in theirs | ours if in_range(k, move.first, move.last)]
        return export_keys(db, keys), keys

    def _take(self, move: Move, scratch: Store, items: list[Any], forget: list[bytes]) -> int:
        """Forget `forget` (what an earlier try, or the pre-copy, left of the keys),
        then import `items` (exported from `scratch`, the source's stream replayed)
        with the tables they need. Returns the last LSN committed. All in one step of
        the event loop: nothing else commits in between, so this store's writes to the
        range after that LSN are the ones made since (`_advance` reads them)."""
        node = self.node
        store = node.state.store
        self.imported = (move.first, move.last)
        tables = carried_tables(scratch, store, items, bool(node.state.config.etcd_endpoints))
        if forget:
            self._commit(("forget", tuple(forget)))
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
        lsn = self._commit(("import", ()), scratch.last_time_ms)
        while store.lsn < longest_chain(items):
            lsn = self._commit(("import", ()))
        for i in range(0, len(items), BATCH):
            batch = renumber(store, items[i : i + BATCH], store.lsn)
            lsn = self._commit(("import", tuple(batch)))
        return lsn

    async def _import(self, move: Move, revision: int) -> None:
        """Take the range up to the fenced LSN: the keys written since this node's
        pre-copy, or (no pre-copy of this move in memory) the whole range again; then
        commit the map that gives it to this shard."""
        node = self.node
        view = node.view
        store = node.state.store
        started = time.monotonic()
        copy = self._copied(move)
        tail: tuple[list[Any], list[bytes]] | None = None
        if copy is not None:
            try:
                tail = await self._advance(move, copy, move.fenced_lsn)
            except ReplayError as exc:  # compacted meanwhile, say: read it all again
                log.warning("cluster %s: the pre-copy cannot go on (%s)", node.cluster, exc)
                self.copy = copy = None
        if tail is not None and copy is not None:
            scratch = copy.scratch
            items, forget = tail
            keys = self._keys_after(copy, items, forget)
        else:
            if copy is None:
                scratch, rec = await self._replay(move)
                _reached(rec, move.fenced_lsn)
            else:
                scratch = copy.scratch
            items = export_range(scratch.dbs[0], move.first, move.last)
            forget = range_keys(store.dbs[0], move.first, move.last)
            keys = len(items)
        replayed = time.monotonic()
        lsn = self._take(move, scratch, items, forget)
        del scratch, copy
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
        self.imported = self.copy = None
        await self._after_seals(move.source)
        await node.refresh()
        log.info(
            "cluster %s: took slots %d-%d (%d keys) at LSN %d, epoch %d "
            "(replay %.3f s, import %.3f s, durable %.3f s, map %.3f s, %d keys from the tail)",
            node.cluster,
            move.first,
            move.last,
            keys,
            lsn,
            new.epoch,
            replayed - started,
            imported - replayed,
            durable - imported,
            time.monotonic() - durable,
            len(items),
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
        fenced = f", fenced at LSN {move.fenced_lsn}" if move.state not in (PRECOPY, FENCE) else ""
        if move.copied_lsn:
            fenced += f", pre-copied up to LSN {move.copied_lsn}"
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
