"""Time travel across the shards of a cluster (`--cluster-enabled yes`), behind
`ServerState.cluster_snapshots` (commands.session.ClusterSnapshots):

- `TS.SEAL name` on any node seals its own shard (commands.temporal), then this asks
  every other shard of the slot map (read from etcd, with its revision) to seal under
  the same name (`TS.SHARDSEAL`, then `TS.SNAPSHOTS` for the seal's commit time, over
  a plain connection to its announce address, as the `default` user with this node's
  requirepass), and records the cluster snapshot in etcd (flusher.clustersnaps: shard
  id -> LSN and seal time, the slot map's runs; created only where there is none and
  while the map is at the revision read). If a shard cannot seal (down, the name taken
  there, ...) or the map changed, the shards that did are unsealed again, nothing is
  recorded, and the error says why.
- `TS.UNSEAL name` deletes the record and unseals the other shards.
- The records are read every `POLL_S` for `TS.SNAPSHOTS` (their `shards` field) and
  for `slot_times`: a checkout at the snapshot reads each key as of the seal time of
  the shard that served its slot then (commands.temporal), which finds the keys moved
  here since as they were (store.moves keeps their versions' times; a seal's time is
  exact: store.keyspace commits nothing else in its millisecond; proxy.slotmove makes
  the taking shard commit later than the giving shard's seals).

Each shard sealed under the name, so `TS.CHECKOUT AT SNAPSHOT name` on any node reads
that node's keys at its own seal: a cluster client reading through every node sees the
whole cluster at the snapshot. The seals are not one atomic cut: they are sent to the
shards at once, and a write a shard acknowledges between two shards' seals is in one
snapshot and not in the other (Redis Cluster has no cross-shard transaction either).
"""

from __future__ import annotations

import asyncio
import logging
import time
from array import array
from typing import Any

import hiredis

from commands.resp import encode_reply
from commands.session import ServerCore
from flusher.clustersnaps import ClusterSnapshot, forget, record, recorded
from flusher.coordination import CoordinationError
from flusher.slotmap import read_map
from flusher.slotmove import shard_id
from store.slots import SLOTS, ClusterView, Shard, SlotMap, owner_runs
from store.tasks import cancel_and_wait

log = logging.getLogger("temporalstore")

POLL_S = 0.5
ASK_TIMEOUT_S = 10.0


class ClusterTimeError(Exception):
    """A cluster-wide seal or unseal that could not be done (its text is the error)."""


class ShardError(Exception):
    """Another shard's node answered an error, or closed the connection."""


def _name(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def _still_sealed(kept: list[tuple[Shard, str]]) -> str:
    """What an error adds for shards whose seal could not be dropped again."""
    if not kept:
        return ""
    where = ", ".join(f"{sh.host}:{sh.port}" for sh, _ in kept)
    return f"; still sealed on {where} (TS.SHARDUNSEAL it there)"


def _seal_time(listed: Any, name: bytes) -> int:
    """The `time` of snapshot `name` in a TS.SNAPSHOTS reply (RESP2: flat arrays),
    0 if it is not listed."""
    for entry in listed:
        fields = dict(zip(entry[::2], entry[1::2], strict=True))
        if fields.get(b"name") == name:
            return int(fields[b"time"])
    return 0  # unsealed again before it was listed


class ClusterTime:
    """This node's side of cluster snapshots (see the module doc)."""

    def __init__(self, state: ServerCore, client: Any, cluster: str, view: ClusterView):
        self.state = state
        self.client = client
        self.cluster = cluster
        self.view = view
        self.known: dict[bytes, ClusterSnapshot] = {}
        # Bumped by this node's own seals and unseals: a poll that read etcd before one
        # of them does not replace what it set.
        self._changes = 0
        # name -> (the record, its seal time per slot): slot_times' answers.
        self._slot_times: dict[bytes, tuple[ClusterSnapshot, array[int]]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll())

    async def close(self) -> None:
        await cancel_and_wait(self._task)

    async def _poll(self) -> None:
        while True:
            before = self._changes
            try:
                found = await recorded(self.client, self.cluster)
                if self._changes == before:
                    self.known = found
            except CoordinationError as exc:
                log.warning("cluster %s: cannot read its snapshots (%s)", self.cluster, exc)
            await asyncio.sleep(POLL_S)

    def recorded(self, name: bytes) -> dict[str, int] | None:
        snap = self.known.get(name)
        if snap is None:
            return None
        if snap.times:
            return dict(snap.shards)
        # Recorded by node id: a replicated shard's under its group's name (its
        # primary may have changed since) where the map has the node still.
        named = {sh.node_id: shard_id(sh.node_id, sh.group) for sh in self.view.map.shards}
        return {named.get(k, k): v for k, v in snap.shards.items()}

    def slot_times(self, name: bytes) -> array[int] | None:
        snap = self.known.get(name)
        if snap is None or not snap.times:
            return None
        cached = self._slot_times.get(name)
        if cached is not None and cached[0] is snap:
            return cached[1]
        per_slot = array("q", bytes(8 * SLOTS))
        for first, last, shard in snap.slots:
            t = snap.times.get(shard, 0)
            for slot in range(first, last + 1):
                per_slot[slot] = t
        self._slot_times[name] = (snap, per_slot)
        return per_slot

    def _others(self, slot_map: SlotMap) -> list[Shard]:
        return [sh for sh in slot_map.shards if sh.node_id != self.view.node_id]

    async def _ask(self, shard: Shard, *args: bytes) -> Any:
        """One command on another shard's node: its reply (`_ask_all`)."""
        return (await self._ask_all(shard, [list(args)]))[-1]

    async def _ask_all(self, shard: Shard, commands: list[list[bytes]]) -> list[Any]:
        """Commands on another shard's node, pipelined (as the default user, with this
        node's requirepass): their replies; ShardError or OSError if one fails. A plain
        socket and hiredis: the server does not load redis-py (about 8 MB)."""
        password = self.state.config.requirepass
        calls = [[b"AUTH", password.encode()]] if password else []
        calls.extend(commands)
        async with asyncio.timeout(ASK_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(shard.host, shard.port)
            try:
                writer.write(b"".join(encode_reply(c, 2) for c in calls))
                parser = hiredis.Reader(replyError=ShardError)
                replies: list[Any] = []
                while len(replies) < len(calls):
                    data = await reader.read(65536)
                    if not data:
                        raise ShardError("the node closed the connection")
                    parser.feed(data)
                    while len(replies) < len(calls) and (r := parser.gets()) is not False:
                        replies.append(r)
            finally:
                writer.close()
        for reply in replies:
            if isinstance(reply, ShardError):
                raise reply
        return replies[len(calls) - len(commands) :]

    async def _on_all(
        self, shards: list[Shard], *args: bytes, then: list[bytes] | None = None
    ) -> tuple[dict[str, Any], list[tuple[Shard, str]]]:
        """Send a command (and `then` after it, if given: both replies) to every shard
        at once: the answers by node id, and the shards that failed with why."""
        commands = [list(args)] if then is None else [list(args), then]
        results = await asyncio.gather(
            *(self._ask_all(sh, commands) for sh in shards), return_exceptions=True
        )
        answers: dict[str, Any] = {}
        failed = []
        for shard, result in zip(shards, results, strict=True):
            if isinstance(result, (ShardError, OSError, TimeoutError)):
                failed.append((shard, str(result) or type(result).__name__))
            elif isinstance(result, BaseException):
                raise result
            else:
                answers[shard.node_id] = result[-1] if then is None else result
        return answers, failed

    async def seal(self, name: bytes, args: list[bytes], lsn: int) -> None:
        view = self.view
        if view.me < 0:
            raise ClusterTimeError("this node serves no slots: send TS.SEAL to a shard's node")
        try:
            slot_map, map_revision = await read_map(self.client, self.cluster)
        except (CoordinationError, ValueError) as exc:
            raise ClusterTimeError(f"cluster snapshot '{_name(name)}' not sealed: {exc}") from None
        if slot_map is None:
            raise ClusterTimeError(f"cluster snapshot '{_name(name)}' not sealed: no slot map")
        others = self._others(slot_map)
        answers, failed = await self._on_all(
            others, b"TS.SHARDSEAL", name, *args, then=[b"TS.SNAPSHOTS"]
        )
        if failed:
            sealed = [sh for sh in others if sh.node_id in answers]
            _, kept = await self._on_all(sealed, b"TS.SHARDUNSEAL", name)
            why = "; ".join(f"shard {sh.host}:{sh.port}: {reason}" for sh, reason in failed)
            raise ClusterTimeError(
                f"cluster snapshot '{_name(name)}' not sealed ({why}); nothing recorded"
                + _still_sealed(kept)
            )
        me = shard_id(view.node_id, view.group)
        mine = self.state.store.snapshots.get(name)
        shards, times = {me: lsn}, {me: 0 if mine is None else mine.time_ms}
        for sh in others:
            sealed_at, listed = answers[sh.node_id]
            shards[shard_id(sh.node_id, sh.group)] = int(sealed_at)
            times[shard_id(sh.node_id, sh.group)] = _seal_time(listed, name)
        if not all(times.values()):  # a shard's seal went away meanwhile
            _, kept = await self._on_all(others, b"TS.SHARDUNSEAL", name)
            raise ClusterTimeError(
                f"cluster snapshot '{_name(name)}' unsealed meanwhile on a shard; "
                "nothing recorded" + _still_sealed(kept)
            )
        slots = [
            (first, last, shard_id(slot_map.shards[o].node_id, slot_map.shards[o].group))
            for o, first, last in owner_runs(slot_map, 0, SLOTS - 1)
            if o >= 0
        ]
        snap = ClusterSnapshot(name, shards, int(time.time() * 1000), slot_map.epoch, times, slots)
        try:
            await record(self.client, self.cluster, snap, map_revision)
        except CoordinationError as exc:
            _, kept = await self._on_all(others, b"TS.SHARDUNSEAL", name)
            raise ClusterTimeError(
                f"cluster snapshot '{_name(name)}' not recorded in etcd ({exc}); "
                "the shards' seals were dropped" + _still_sealed(kept)
            ) from None
        self.known[name] = snap
        self._changes += 1

    async def unseal(self, name: bytes) -> None:
        try:
            await forget(self.client, self.cluster, name)
        except CoordinationError as exc:
            raise ClusterTimeError(
                f"snapshot '{_name(name)}' unsealed on this node only: etcd ({exc})"
            ) from None
        self.known.pop(name, None)
        self._changes += 1
        _, failed = await self._on_all(self._others(self.view.map), b"TS.SHARDUNSEAL", name)
        if failed:
            why = "; ".join(f"shard {sh.host}:{sh.port}: {reason}" for sh, reason in failed)
            raise ClusterTimeError(
                f"snapshot '{_name(name)}' unsealed, its record dropped, but not on every "
                f"shard ({why}): TS.SHARDUNSEAL it there"
            )
