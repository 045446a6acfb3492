"""A cluster's slot map and its nodes in etcd (`--cluster-enabled yes`), under
`/<cluster>/cluster/`:

- `/<cluster>/cluster/nodes/<node_id>`: each node's announce address (and the group of
  its shard, for a node started with `--group`), on the node's own lease
  (`flusher.coordination.NodeRegistry`, as a group's nodes);
- `/<cluster>/cluster/slots`: the slot map (store.slots.SlotMap as JSON: its config
  epoch, and each shard's primary, slot ranges and group if replicated). It changes
  only by an etcd transaction that compares the key's modification revision with the
  one its writer read, so two writers cannot both replace the same map: consensus is
  etcd's. A shard's new primary after a failover writes itself in, in a transaction
  that also compares its group's leader key with its own term (`fence`), so a primary
  that lost the lead cannot.

Nodes poll the map (`read_map`) and serve what it says.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from flusher.coordination import (
    DEFAULT_TIMEOUT_S,
    CoordinationError,
    NodeInfo,
    NodeRegistry,
    _call,
    _range,
    list_nodes,
)
from store.slots import Shard, SlotMap, spread


class SlotMapConflict(CoordinationError):
    """The map changed (or was created) since it was read: nothing was written."""


def node_group(cluster: str) -> str:
    """The registry group of a cluster's nodes (`/<cluster>/cluster/nodes/`)."""
    return f"{cluster}/cluster"


def map_key(cluster: str) -> bytes:
    return f"/{cluster}/cluster/slots".encode()


def node_id_for(host: str, port: int) -> str:
    """A node's id (40 hex digits, as Redis' node names), from its announce address:
    the same across restarts, so a slot map stays valid when a node comes back."""
    return hashlib.sha1(f"{host}:{port}".encode()).hexdigest()


def registry(client: Any, cluster: str, host: str, port: int, shard: str = "") -> NodeRegistry:
    """The registration of a node of the cluster (start() it, close() it); `shard`: the
    group of its shard ("" for a shard of its own)."""
    return NodeRegistry(
        client, node_group(cluster), node_id_for(host, port), f"{host}:{port}", shard=shard
    )


async def nodes(client: Any, cluster: str, timeout: float = DEFAULT_TIMEOUT_S) -> list[NodeInfo]:
    """The nodes registered now (live leases only)."""
    return await list_nodes(client, node_group(cluster), timeout)


async def read_map(
    client: Any, cluster: str, timeout: float = DEFAULT_TIMEOUT_S
) -> tuple[SlotMap | None, int]:
    """The slot map and the revision it was last written at (None, 0: no map yet).
    ValueError if the stored map is malformed."""
    reply = await _range(client, map_key(cluster), None, timeout)
    if not reply.kvs:
        return None, 0
    kv = reply.kvs[0]
    try:
        found = SlotMap.from_json(json.loads(bytes(kv.value)))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"the slot map of {cluster} is malformed: {exc}") from exc
    return found, int(kv.mod_revision)


async def write_map(
    client: Any,
    cluster: str,
    new: SlotMap,
    read_revision: int,
    timeout: float = DEFAULT_TIMEOUT_S,
    fence: tuple[bytes, bytes] | None = None,
) -> None:
    """Replace the map read at `read_revision` (0: create it where there is none);
    SlotMapConflict if it changed in between, or if `fence` (an etcd key, its value)
    is given and the key holds another value."""
    key = map_key(cluster)
    t = client.transactions
    value = json.dumps(new.to_json(), separators=(",", ":")).encode()
    compare = [t.mod(key) == read_revision]
    if fence is not None:
        compare.append(t.value(fence[0]) == fence[1])
    done, _ = await _call(
        "a slot map write",
        client.transaction(compare=compare, success=[t.put(key, value)], failure=[]),
        timeout,
    )
    if not done:
        raise SlotMapConflict(
            f"the slot map of {cluster} changed meanwhile (or the writer lost its lead): "
            "nothing written"
        )


def even_map(addresses: list[tuple[str, int]], epoch: int) -> SlotMap:
    """One shard per node, the slots spread as `redis-cli --cluster create` does."""
    shards = [
        Shard(node_id_for(host, port), host, port, [r])
        for (host, port), r in zip(addresses, spread(len(addresses)), strict=True)
    ]
    return SlotMap(epoch, shards)
