"""A slot range moving between the shards of a cluster, as etcd records it, beside the
slot map (flusher.slotmap), under `/<cluster>/cluster/`:

- `move`: the move in progress, at most one (JSON: first, last, source and target
  shards, state; once the target has pre-copied the range, the source's LSN it copied
  up to and a token naming that pre-copy; once the source has fenced the range, the
  LSN it fenced at). A shard is named by its node's id, or a replicated shard by its
  group (`shard_id`): whichever node leads the group when a step is due does it, so a
  move goes on across a failover of either shard's primary.
  `temporalstore cluster move` creates it (only where there is none) in state
  `precopy`; the target imports the range as the source's stream holds it so far,
  the source still taking writes to it, and sets `fence`; the source fences, flushes
  and sets `import` with its fenced LSN; the target imports again the keys written
  since its pre-copy (all of them if its pre-copy is not in its memory: a restart, a
  failover) and, in one transaction, replaces the slot map (the range now its own,
  epoch + 1) and sets `done`; the source then forgets the moved keys and deletes the
  record. A record created in `fence` (by an older `cluster move`) skips the
  pre-copy. Every change compares the record's modification revision with the one
  its writer read (and the target's, the map's too): one writer wins each step, and an
  abort (deleting the record before `done`) and the target's commit of the map cannot
  both happen. A replicated shard's primary fences its writes on its group's leader
  key too (`fence`): a primary that lost the lead writes nothing.
- `storage/<shard>`: where each shard's update stream lives (its --storage URL,
  made absolute, and --s3-endpoint-url; a group's nodes share it), written by the
  node at start: the target reads the source's stream from there.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from flusher.coordination import DEFAULT_TIMEOUT_S, CoordinationError, _call, _range
from flusher.slotmap import map_key
from store.slots import SlotMap

PRECOPY = "precopy"  # created: the target is to import what the source holds so far
FENCE = "fence"  # pre-copied: the source is to fence the range and flush
IMPORT = "import"  # fenced and flushed up to fenced_lsn: the target is to take it
DONE = "done"  # the map gives the range to the target: the source is to forget it


class MoveConflict(CoordinationError):
    """The move record (or the map) changed since it was read: nothing was written."""


GROUP_PREFIX = "group:"


def shard_id(node_id: str, group: str) -> str:
    """How a move names a shard: its node's id, or `group:NAME` for a replicated shard
    (its primary changes on a failover, its group does not)."""
    return GROUP_PREFIX + group if group else node_id


@dataclass
class Move:
    first: int
    last: int
    source: str  # shard ids (`shard_id`)
    target: str
    state: str = PRECOPY
    fenced_lsn: int = 0
    copied_lsn: int = 0  # the source's LSN the target's pre-copy read up to
    copy: str = ""  # names the target's pre-copy (the node that made it knows it)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


def move_key(cluster: str) -> bytes:
    return f"/{cluster}/cluster/move".encode()


def storage_key(cluster: str, shard: str) -> bytes:
    return f"/{cluster}/cluster/storage/{shard}".encode()


async def read_move(
    client: Any, cluster: str, timeout: float = DEFAULT_TIMEOUT_S
) -> tuple[Move | None, int]:
    """The move in progress and its modification revision (None, 0: none)."""
    reply = await _range(client, move_key(cluster), None, timeout)
    if not reply.kvs:
        return None, 0
    kv = reply.kvs[0]
    try:
        doc = json.loads(bytes(kv.value))
        move = Move(
            int(doc["first"]),
            int(doc["last"]),
            str(doc["source"]),
            str(doc["target"]),
            str(doc["state"]),
            int(doc.get("fenced_lsn", 0)),
            int(doc.get("copied_lsn", 0)),
            str(doc.get("copy", "")),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"the move record of {cluster} is malformed: {exc}") from exc
    return move, int(kv.mod_revision)


Fence = tuple[bytes, bytes] | None
"""A group's leader key and the writer's term value, compared too (None: no group)."""


async def _txn(
    client: Any, what: str, compare: list[Any], success: list[Any], fence: Fence = None
) -> None:
    if fence is not None:
        compare = [*compare, client.transactions.value(fence[0]) == fence[1]]
    done, _ = await _call(
        what, client.transaction(compare=compare, success=success, failure=[]), DEFAULT_TIMEOUT_S
    )
    if not done:
        raise MoveConflict(
            f"{what}: the move or the slot map changed meanwhile (or the writer lost its "
            "group's lead); nothing written"
        )


async def put_move(
    client: Any, cluster: str, move: Move, read_revision: int, fence: Fence = None
) -> None:
    """Create (`read_revision` 0: only where there is none) or update the record."""
    key = move_key(cluster)
    t = client.transactions
    compare = [t.mod(key) == read_revision]
    await _txn(client, "a move record write", compare, [t.put(key, move.to_bytes())], fence)


async def delete_move(client: Any, cluster: str, read_revision: int, fence: Fence = None) -> None:
    """Delete the record read at `read_revision` (the move ended, or is aborted)."""
    key = move_key(cluster)
    t = client.transactions
    compare = [t.mod(key) == read_revision]
    await _txn(client, "a move record delete", compare, [t.delete(key)], fence)


async def commit_move(
    client: Any,
    cluster: str,
    move: Move,
    move_revision: int,
    new_map: SlotMap,
    map_revision: int,
    fence: Fence = None,
) -> None:
    """The target's step: the new map and the record's `done`, in one transaction."""
    mkey, skey = move_key(cluster), map_key(cluster)
    t = client.transactions
    move.state = DONE
    value = json.dumps(new_map.to_json(), separators=(",", ":")).encode()
    await _txn(
        client,
        "the move's slot map write",
        [t.mod(mkey) == move_revision, t.mod(skey) == map_revision],
        [t.put(skey, value), t.put(mkey, move.to_bytes())],
        fence,
    )


async def put_storage(
    client: Any, cluster: str, shard: str, url: str, endpoint_url: str | None
) -> None:
    doc = {"storage": url, "s3_endpoint_url": endpoint_url}
    await _call(
        "a storage registration",
        client.put(storage_key(cluster, shard), json.dumps(doc).encode()),
        DEFAULT_TIMEOUT_S,
    )


async def read_storage(
    client: Any, cluster: str, shard: str, timeout: float = DEFAULT_TIMEOUT_S
) -> tuple[str, str | None] | None:
    """(storage URL, S3 endpoint URL or None) a shard registered, or None."""
    reply = await _range(client, storage_key(cluster, shard), None, timeout)
    if not reply.kvs:
        return None
    doc = json.loads(bytes(reply.kvs[0].value))
    return str(doc["storage"]), doc.get("s3_endpoint_url")
