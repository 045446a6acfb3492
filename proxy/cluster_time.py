"""Time travel across the shards of a cluster (`--cluster-enabled yes`), behind
`ServerState.cluster_snapshots` (commands.session.ClusterSnapshots):

- `TS.SEAL name` on any node seals its own shard (commands.temporal), then this asks
  every other shard of the slot map to seal under the same name (`TS.SHARDSEAL`, over
  a plain connection to its announce address, as the `default` user with this node's
  requirepass), and records the cluster snapshot in etcd (flusher.clustersnaps: node
  id -> LSN, by a create-only transaction). If a shard cannot seal (down, the name
  taken there, ...), the shards that did are unsealed again, nothing is recorded, and
  the error names the shards that failed.
- `TS.UNSEAL name` deletes the record and unseals the other shards.
- The records are read every `POLL_S` for `TS.SNAPSHOTS` (their `shards` field).

Each shard sealed under the name, so `TS.CHECKOUT AT SNAPSHOT name` on any node reads
that node's keys at its own seal, with no etcd read: a cluster client reading through
every node sees the whole cluster at the snapshot. The seals are not one atomic cut:
they are sent to the shards at once, and a write a shard acknowledges between two
shards' seals is in one snapshot and not in the other (Redis Cluster has no
cross-shard transaction either).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import hiredis

from commands.resp import encode_reply
from commands.session import ServerCore
from flusher.clustersnaps import ClusterSnapshot, forget, record, recorded
from flusher.coordination import CoordinationError
from store.slots import ClusterView, Shard
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
        return None if snap is None else dict(snap.shards)

    def _others(self) -> list[Shard]:
        return [sh for sh in self.view.map.shards if sh.node_id != self.view.node_id]

    async def _ask(self, shard: Shard, *args: bytes) -> Any:
        """One command on another shard's node (as the default user, with this node's
        requirepass): its reply; ShardError or OSError if it fails. A plain socket and
        hiredis: the server does not load redis-py (about 8 MB)."""
        password = self.state.config.requirepass
        calls = [[b"AUTH", password.encode()]] if password else []
        calls.append(list(args))
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
        return replies[-1]

    async def _on_all(
        self, shards: list[Shard], *args: bytes
    ) -> tuple[dict[str, Any], list[tuple[Shard, str]]]:
        """Send a command to every shard at once: the answers by node id, and the
        shards that failed with why."""
        results = await asyncio.gather(
            *(self._ask(sh, *args) for sh in shards), return_exceptions=True
        )
        answers: dict[str, Any] = {}
        failed = []
        for shard, result in zip(shards, results, strict=True):
            if isinstance(result, (ShardError, OSError, TimeoutError)):
                failed.append((shard, str(result) or type(result).__name__))
            elif isinstance(result, BaseException):
                raise result
            else:
                answers[shard.node_id] = result
        return answers, failed

    async def seal(self, name: bytes, args: list[bytes], lsn: int) -> None:
        view = self.view
        if view.me < 0:
            raise ClusterTimeError("this node serves no slots: send TS.SEAL to a shard's node")
        others = self._others()
        lsns, failed = await self._on_all(others, b"TS.SHARDSEAL", name, *args)
        if failed:
            sealed = [sh for sh in others if sh.node_id in lsns]
            _, kept = await self._on_all(sealed, b"TS.SHARDUNSEAL", name)
            why = "; ".join(f"shard {sh.host}:{sh.port}: {reason}" for sh, reason in failed)
            raise ClusterTimeError(
                f"cluster snapshot '{_name(name)}' not sealed ({why}); nothing recorded"
                + _still_sealed(kept)
            )
        shards = {view.node_id: lsn, **{k: int(v) for k, v in lsns.items()}}
        snap = ClusterSnapshot(name, shards, int(time.time() * 1000), view.map.epoch)
        try:
            await record(self.client, self.cluster, snap)
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
        _, failed = await self._on_all(self._others(), b"TS.SHARDUNSEAL", name)
        if failed:
            why = "; ".join(f"shard {sh.host}:{sh.port}: {reason}" for sh, reason in failed)
            raise ClusterTimeError(
                f"snapshot '{_name(name)}' unsealed, its record dropped, but not on every "
                f"shard ({why}): TS.SHARDUNSEAL it there"
            )
