"""A cluster's snapshots in etcd (`--cluster-enabled yes`): `TS.SEAL name` in cluster
mode seals every shard under that name, then records the cluster snapshot under
`/<cluster>/cluster/snapshots/<name>`: which LSN each shard sealed at and the commit
time of its seal, which shard served each slot then, and when. A shard is named as a
slot move names it (flusher.slotmove.shard_id: a replicated shard by its group, whose
primary may change); records written before (shards by their primary's node id, no
seal times nor slots) are read as they are. Created only where there is none and
while the slot map is the one the seal was taken under (an etcd transaction on the
key's creation revision and the map's modification revision), deleted by `TS.UNSEAL`;
nodes read them all for `TS.SNAPSHOTS` and `TS.CHECKOUT AT SNAPSHOT`
(proxy.cluster_time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from flusher.coordination import DEFAULT_TIMEOUT_S, CoordinationError, _call, _prefix_end, _range
from flusher.slotmap import map_key


class SnapshotExists(CoordinationError):
    """A cluster snapshot of that name is recorded already: nothing was written."""


class MapChanged(CoordinationError):
    """The slot map changed since the seal began (a slot move): nothing was written."""


@dataclass(frozen=True)
class ClusterSnapshot:
    """One cluster snapshot: its name, the LSN each shard sealed it at (shard id ->
    LSN), the seal's time (ms) and the slot map's config epoch then; `times`: the
    commit time of each shard's seal, `slots`: (first, last, shard id) runs of the
    slot map then (both empty in records written before they were kept)."""

    name: bytes
    shards: dict[str, int]
    time_ms: int
    epoch: int
    times: dict[str, int] = field(default_factory=dict)
    slots: list[tuple[int, int, str]] = field(default_factory=list)

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {"shards": self.shards, "time": self.time_ms, "epoch": self.epoch}
        if self.times:
            doc["times"] = self.times
            doc["slots"] = [list(run) for run in self.slots]
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, name: bytes, raw: bytes) -> ClusterSnapshot:
        doc = json.loads(raw)
        shards = {str(k): int(v) for k, v in doc["shards"].items()}
        times = {str(k): int(v) for k, v in doc.get("times", {}).items()}
        slots = [(int(a), int(b), str(sh)) for a, b, sh in doc.get("slots", [])]
        return cls(name, shards, int(doc["time"]), int(doc["epoch"]), times, slots)


def _prefix(cluster: str) -> bytes:
    return f"/{cluster}/cluster/snapshots/".encode()


async def record(
    client: Any,
    cluster: str,
    snap: ClusterSnapshot,
    map_revision: int,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Record `snap`, if the slot map is still at `map_revision`: SnapshotExists if
    its name is recorded already, MapChanged if the map changed."""
    key = _prefix(cluster) + snap.name
    t = client.transactions
    done, _ = await _call(
        "a cluster snapshot write",
        client.transaction(
            compare=[t.create(key) == 0, t.mod(map_key(cluster)) == map_revision],
            success=[t.put(key, snap.to_json())],
            failure=[],
        ),
        timeout,
    )
    if done:
        return
    reply = await _range(client, key, None, timeout)
    if reply.kvs:
        raise SnapshotExists(f"cluster snapshot {snap.name!r} is recorded already")
    raise MapChanged("the slot map changed during the seal (a slot move): try again")


async def forget(
    client: Any, cluster: str, name: bytes, timeout: float = DEFAULT_TIMEOUT_S
) -> bool:
    """Delete the record of cluster snapshot `name`; whether there was one."""
    key = _prefix(cluster) + name
    reply = await _call("a cluster snapshot delete", client.delete(key), timeout)
    return bool(reply)


async def recorded(
    client: Any, cluster: str, timeout: float = DEFAULT_TIMEOUT_S
) -> dict[bytes, ClusterSnapshot]:
    """Every cluster snapshot recorded, by name (malformed records are skipped)."""
    prefix = _prefix(cluster)
    reply = await _range(client, prefix, _prefix_end(prefix), timeout)
    out: dict[bytes, ClusterSnapshot] = {}
    for kv in reply.kvs:
        name = bytes(kv.key)[len(prefix) :]
        try:
            out[name] = ClusterSnapshot.from_json(name, bytes(kv.value))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out
