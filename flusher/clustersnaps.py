"""A cluster's snapshots in etcd (`--cluster-enabled yes`): `TS.SEAL name` in cluster
mode seals every shard under that name, then records the cluster snapshot under
`/<cluster>/cluster/snapshots/<name>`: which LSN each shard (by its primary's node id)
sealed at, and when. Created only where there is none (an etcd transaction on the
key's creation revision), deleted by `TS.UNSEAL`; nodes read them all for
`TS.SNAPSHOTS` (proxy.cluster_time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flusher.coordination import DEFAULT_TIMEOUT_S, CoordinationError, _call, _prefix_end, _range


class SnapshotExists(CoordinationError):
    """A cluster snapshot of that name is recorded already: nothing was written."""


@dataclass(frozen=True)
class ClusterSnapshot:
    """One cluster snapshot: its name, the LSN each shard sealed it at (node id ->
    LSN), the seal's time (ms) and the slot map's config epoch then."""

    name: bytes
    shards: dict[str, int]
    time_ms: int
    epoch: int

    def to_json(self) -> bytes:
        doc = {"shards": self.shards, "time": self.time_ms, "epoch": self.epoch}
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, name: bytes, raw: bytes) -> ClusterSnapshot:
        doc = json.loads(raw)
        shards = {str(k): int(v) for k, v in doc["shards"].items()}
        return cls(name, shards, int(doc["time"]), int(doc["epoch"]))


def _prefix(cluster: str) -> bytes:
    return f"/{cluster}/cluster/snapshots/".encode()


async def record(
    client: Any, cluster: str, snap: ClusterSnapshot, timeout: float = DEFAULT_TIMEOUT_S
) -> None:
    """Record `snap`; SnapshotExists if its name is recorded already."""
    key = _prefix(cluster) + snap.name
    t = client.transactions
    done, _ = await _call(
        "a cluster snapshot write",
        client.transaction(
            compare=[t.create(key) == 0], success=[t.put(key, snap.to_json())], failure=[]
        ),
        timeout,
    )
    if not done:
        raise SnapshotExists(f"cluster snapshot {snap.name!r} is recorded already")


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
