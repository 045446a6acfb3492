"""Redis Cluster's hash slots: CRC16 (XMODEM, as Redis' crc16.c) of a key, or of its
`{hash tag}`, modulo 16384; and the slot map a cluster of shards serves (which shard
owns which slot ranges, at which config epoch), as plain data (etcd keeps it:
flusher.slotmap; the commands read it: commands.cluster_mode), and a node's view of
it (`ClusterView`, which the server state holds in cluster mode).

The hash tag, as Redis' keyHashSlot: the bytes between the first `{` and the first
`}` after it, when there is at least one byte between them; otherwise the whole key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SLOTS = 16384


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC16_TABLE = _table()


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis' crc16()."""
    crc = 0
    table = _CRC16_TABLE
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
    return crc


def key_slot(key: bytes) -> int:
    """The hash slot of a key (Redis' keyHashSlot)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) & (SLOTS - 1)


def spread(count: int) -> list[tuple[int, int]]:
    """The slot range of each of `count` shards, as `redis-cli --cluster create` spreads
    the slots over its masters (0-5460, 5461-10922, 10923-16383 for three)."""
    if count < 1:
        raise ValueError("at least one shard")
    per = SLOTS / count
    ranges = []
    first = 0
    cursor = 0.0
    for i in range(count):
        last = math.floor(cursor + per - 1 + 0.5)  # C's lround, for a positive number
        if last > SLOTS - 1 or i == count - 1:
            last = SLOTS - 1
        last = max(last, first)
        ranges.append((first, last))
        first = last + 1
        cursor += per
    return ranges


@dataclass
class Shard:
    """A shard: its primary's node id and address, and the slot ranges it owns; `group`
    names a replicated shard (the nodes started with `--group` that name: they elect
    its primary, which writes itself here on a failover), "" a shard of one node."""

    node_id: str
    host: str
    port: int
    ranges: list[tuple[int, int]] = field(default_factory=list)
    group: str = ""

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "node_id": self.node_id,
            "host": self.host,
            "port": self.port,
            "ranges": [list(r) for r in self.ranges],
        }
        if self.group:
            doc["group"] = self.group
        return doc


@dataclass
class SlotMap:
    """Which shard owns each slot, at a config epoch (it grows with every change)."""

    epoch: int = 0
    shards: list[Shard] = field(default_factory=list)
    # slot -> index in `shards` (-1: not served), derived from the shards' ranges.
    owner: list[int] = field(default_factory=lambda: [-1] * SLOTS)

    def __post_init__(self) -> None:
        owner = [-1] * SLOTS
        for i, shard in enumerate(self.shards):
            for first, last in shard.ranges:
                if not 0 <= first <= last < SLOTS:
                    raise ValueError(f"slot range {first}-{last} out of 0-{SLOTS - 1}")
                for slot in range(first, last + 1):
                    if owner[slot] != -1:
                        raise ValueError(f"slot {slot} is owned by two shards")
                    owner[slot] = i
        self.owner = owner

    @property
    def assigned(self) -> int:
        """How many slots some shard owns."""
        return SLOTS - self.owner.count(-1)

    def to_json(self) -> dict[str, object]:
        return {"epoch": self.epoch, "shards": [s.to_json() for s in self.shards]}

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> SlotMap:
        """The map from its JSON form (ValueError, KeyError, TypeError if malformed)."""
        shards = []
        for item in doc["shards"]:  # type: ignore[attr-defined]
            ranges = [(int(a), int(b)) for a, b in item["ranges"]]
            shards.append(
                Shard(
                    str(item["node_id"]),
                    str(item["host"]),
                    int(item["port"]),
                    ranges,
                    str(item.get("group", "")),
                )
            )
        return cls(int(doc["epoch"]), shards)  # type: ignore[call-overload]


def owner_runs(slot_map: SlotMap, first: int, last: int) -> list[tuple[int, int, int]]:
    """The slots first..last cut where their owner changes: (shard index or -1 for
    unserved, first, last) of each run, in order."""
    runs: list[tuple[int, int, int]] = []
    for slot in range(first, last + 1):
        o = slot_map.owner[slot]
        if runs and runs[-1][0] == o:
            runs[-1] = (o, runs[-1][1], slot)
        else:
            runs.append((o, slot, slot))
    return runs


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out


def reassign(slot_map: SlotMap, first: int, last: int, to: Shard) -> SlotMap:
    """The map with slots first..last owned by `to` (a shard of the map, by node id or
    by group, or a new one appended), taken from whoever owned them; the config epoch
    one higher.
    A shard left without slots stays in the map (its node still answers MOVED)."""
    shards = []
    found = False
    for shard in slot_map.shards:
        ranges = []
        for a, b in shard.ranges:
            if b < first or a > last:
                ranges.append((a, b))
                continue
            if a < first:
                ranges.append((a, first - 1))
            if b > last:
                ranges.append((last + 1, b))
        if shard.node_id == to.node_id or (to.group and shard.group == to.group):
            found = True
            ranges.append((first, last))
        shards.append(Shard(shard.node_id, shard.host, shard.port, _merge(ranges), shard.group))
    if not found:
        shards.append(Shard(to.node_id, to.host, to.port, [(first, last)], to.group))
    return SlotMap(slot_map.epoch + 1, shards)


def with_primary(slot_map: SlotMap, group: str, node_id: str, host: str, port: int) -> SlotMap:
    """The map with the shard of `group` led by this node (a failover: the config epoch
    one higher); ValueError if no shard has that group."""
    shards = [
        Shard(node_id, host, port, s.ranges, s.group) if s.group == group else s
        for s in slot_map.shards
    ]
    if shards == slot_map.shards:
        raise ValueError(f"no shard of group {group} in the slot map")
    return SlotMap(slot_map.epoch + 1, shards)


class ClusterView:
    """What this node knows of the cluster: itself, the latest slot map and the
    replicas of the replicated shards (registered nodes of a shard's group other than
    its primary)."""

    def __init__(self, node_id: str, host: str, port: int, group: str = "") -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.group = group  # this node's shard group ("": a shard of its own)
        self.map = SlotMap()
        self.me = -1  # this node's shard in `map` (-1: none), as its primary
        self.mine = -1  # this node's shard, as its primary or one of its replicas
        # group -> (node id, host, port) of each replica, in node id order
        self.replicas: dict[str, list[tuple[str, str, int]]] = {}
        self.ok = False  # the map covers every slot
        # Slots this node is giving away (first, last): writes to them are refused with
        # -TRYAGAIN until the move ends (proxy.slotmove); reads are served.
        self.fenced: tuple[int, int] | None = None

    def apply(self, new: SlotMap) -> None:
        """Serve `new` from now on."""
        self.me = next((i for i, s in enumerate(new.shards) if s.node_id == self.node_id), -1)
        self.mine = self.me
        if self.mine < 0 and self.group:
            self.mine = next((i for i, s in enumerate(new.shards) if s.group == self.group), -1)
        self.map = new
        self.ok = new.assigned == SLOTS

    def replicas_of(self, shard: Shard) -> list[tuple[str, str, int]]:
        """The replicas of `shard` (none for a shard of one node)."""
        if not shard.group:
            return []
        return [r for r in self.replicas.get(shard.group, ()) if r[0] != shard.node_id]
