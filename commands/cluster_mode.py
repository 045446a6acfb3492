"""Redis Cluster mode (`--cluster-enabled yes`): the routing check the dispatcher
makes before each command, by the slot map this node serves (`ServerCore.cluster`, a
store.slots.ClusterView), and the CLUSTER subcommands that answer from the map
(commands.cluster registers them; without cluster mode they answer "cluster support
disabled", as before).

The map itself is etcd's (flusher.slotmap); the node's poller (proxy.cluster_node)
hands every new one to `ClusterView.apply`. The routing check is Redis 7.0's
getNodeByQuery: the keys of the command (of every queued command for EXEC), found by
the command table's key specs as COMMAND GETKEYS finds them, must hash to one slot
(-CROSSSLOT), which some shard must own (-CLUSTERDOWN Hash slot not served), the map
must cover every slot (-CLUSTERDOWN The cluster is down), and this node must be its
owner (-MOVED <slot> <host>:<port>), or a replica of its owner's shard whose
connection sent READONLY, for a command that does not write (clusterRedirectClient's
readonly case; READWRITE ends it). While this node is moving a slot range away
(`ClusterView.fenced`), a command that may write to it is answered -TRYAGAIN. A
command without keys runs on the node it was sent to (KEYS, SCAN, DBSIZE, FLUSHALL,
TS.SEAL: this shard only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.cleanup import unwatch_all
from commands.errors import NOT_INTEGER, CommandError
from commands.getkeys import get_keys, keys_at_positions
from commands.parsing import string2ll
from commands.registry import Command, Flag
from commands.replies import OK, Reply, Verbatim
from store.slots import SLOTS, ClusterView, key_slot

if TYPE_CHECKING:
    from commands.session import Session

DISABLED = "ERR This instance has cluster support disabled"
CROSSSLOT = b"CROSSSLOT Keys in request don't hash to the same slot"
UNBOUND = b"CLUSTERDOWN Hash slot not served"
DOWN = b"CLUSTERDOWN The cluster is down"
SELECT_REFUSED = b"ERR SELECT is not allowed in cluster mode"
# A write to a slot being moved away (proxy.slotmove fences it): Redis' text for a
# request it cannot serve while a slot migrates; clients retry it (redis-py: 16 tries).
TRYAGAIN = b"TRYAGAIN Multiple keys request during rehashing of slot"
INVALID_SLOT = "ERR Invalid slot"
INVALID_SLOT_OR_COUNT = "ERR Invalid slot or number of keys"


def command_keys(cmd: Command, argv: list[bytes]) -> list[bytes]:
    """The keys of a call, as COMMAND GETKEYS finds them (none if it cannot say)."""
    if keys_at_positions(cmd):
        return cmd.keys(argv)
    try:
        return [argv[i] for i, _ in get_keys(argv)]
    except CommandError:
        return []


def route(s: Session, cmd: Command, argv: list[bytes]) -> bytes | None:
    """The error that sends a command elsewhere (or refuses it), else None: Redis'
    getNodeByQuery and clusterRedirectClient. A refused EXEC discards its transaction."""
    view = s.server.cluster
    assert view is not None  # the dispatcher calls this in cluster mode only
    if cmd.name == "exec":
        if s.multi is None:
            return None
        calls = list(s.multi)
    else:
        if cmd.name == "select" and argv[1] != b"0":
            return SELECT_REFUSED
        calls = [(cmd, argv)]
    owner = view.map.owner
    slot = -1
    for c, args in calls:
        for key in command_keys(c, args):
            ks = key_slot(key)
            if slot < 0:
                slot = ks
                if owner[slot] < 0:
                    return _refuse(s, cmd, UNBOUND)
            elif ks != slot:
                return _refuse(s, cmd, CROSSSLOT)
    if slot < 0:
        return None
    if not view.ok:
        return _refuse(s, cmd, DOWN)
    shard = owner[slot]
    if shard == view.me:
        fenced = view.fenced
        if fenced is not None and fenced[0] <= slot <= fenced[1] and _writes(calls):
            return _refuse(s, cmd, TRYAGAIN)
        return None
    if shard == view.mine and s.cluster_readonly and not _writes(calls):
        return None  # a replica of the slot's shard, READONLY: served here
    target = view.map.shards[shard]
    return _refuse(s, cmd, b"MOVED %d %s:%d" % (slot, target.host.encode(), target.port))


def _writes(calls: list[tuple[Command, list[bytes]]]) -> bool:
    """Some call may write (anything not flagged readonly: scripts too)."""
    return any(not c.flags & Flag.READONLY for c, _ in calls)


def _refuse(s: Session, cmd: Command, text: bytes) -> bytes:
    if cmd.name == "exec":  # Redis' discardTransaction: no EXECABORT, the redirection
        s.multi = None
        s.multi_error = False
        unwatch_all(s)
    return text


# --------------------------------------------------------------------------- CLUSTER


def _view(s: Session) -> ClusterView:
    view: ClusterView | None = s.server.cluster
    if view is None:
        raise CommandError(DISABLED)
    return view


def _int(arg: bytes) -> int:
    n = string2ll(arg)
    if n is None:
        raise CommandError(NOT_INTEGER)
    return n


def _node_entry(host: str, port: int, node_id: str) -> list[object]:
    return [host.encode(), port, node_id.encode(), {}]


def cluster_slots(s: Session, argv: list[bytes]) -> Reply:
    view = _view(s)
    ranges = sorted(
        (first, last, i) for i, shard in enumerate(view.map.shards) for first, last in shard.ranges
    )
    out: list[object] = []
    for first, last, i in ranges:
        shard = view.map.shards[i]
        entry: list[object] = [first, last, _node_entry(shard.host, shard.port, shard.node_id)]
        entry += [_node_entry(host, port, rid) for rid, host, port in view.replicas_of(shard)]
        out.append(entry)
    return out


def _shard_node(
    s: Session, me: str, node_id: str, host: str, port: int, role: bytes
) -> dict[bytes, object]:
    return {
        b"id": node_id.encode(),
        b"port": port,
        b"ip": host.encode(),
        b"endpoint": host.encode(),
        b"role": role,
        b"replication-offset": s.store.lsn if node_id == me else 0,
        b"health": b"online",
    }


def cluster_shards(s: Session, argv: list[bytes]) -> Reply:
    view = _view(s)
    out: list[object] = []
    for shard in view.map.shards:
        slots: list[object] = [n for r in shard.ranges for n in r]
        me = view.node_id
        nodes = [_shard_node(s, me, shard.node_id, shard.host, shard.port, b"master")]
        nodes += [_shard_node(s, me, *r, b"replica") for r in view.replicas_of(shard)]
        out.append({b"slots": slots, b"nodes": nodes})
    return out


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    return " ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def cluster_nodes(s: Session, argv: list[bytes]) -> Reply:
    view = _view(s)
    lines = []
    # (node id, host, port, slot ranges, its master's id or "-": a master)
    rows: list[tuple[str, str, int, list[tuple[int, int]], str]] = []
    for sh in view.map.shards:
        rows.append((sh.node_id, sh.host, sh.port, sh.ranges, "-"))
        rows += [(rid, host, port, [], sh.node_id) for rid, host, port in view.replicas_of(sh)]
    if not any(row[0] == view.node_id for row in rows):
        rows.append((view.node_id, view.host, view.port, [], "-"))
    for node_id, host, port, ranges, master in rows:
        flags = "master" if master == "-" else "slave"
        if node_id == view.node_id:
            flags = "myself," + flags
        line = (
            f"{node_id} {host}:{port}@{port + 10000} {flags} {master} 0 0 "
            f"{view.map.epoch} connected"
        )
        if ranges:
            line += " " + _ranges_text(ranges)
        lines.append(line + "\n")
    return Verbatim("".join(lines).encode())


def cluster_info(s: Session, argv: list[bytes]) -> Reply:
    view = _view(s)
    assigned = view.map.assigned
    known = len(view.map.shards) + (view.me < 0)
    fields = [
        ("cluster_state", "ok" if view.ok else "fail"),
        ("cluster_slots_assigned", assigned),
        ("cluster_slots_ok", assigned),
        ("cluster_slots_pfail", 0),
        ("cluster_slots_fail", 0),
        ("cluster_known_nodes", known),
        ("cluster_size", sum(1 for sh in view.map.shards if sh.ranges)),
        ("cluster_current_epoch", view.map.epoch),
        ("cluster_my_epoch", view.map.epoch if view.me >= 0 else 0),
        ("cluster_stats_messages_sent", 0),
        ("cluster_stats_messages_received", 0),
        ("total_cluster_links_buffer_limit_exceeded", 0),
    ]
    return Verbatim("".join(f"{k}:{v}\r\n" for k, v in fields).encode())


def cluster_myid(s: Session, argv: list[bytes]) -> Reply:
    return _view(s).node_id.encode()


def cluster_keyslot(s: Session, argv: list[bytes]) -> Reply:
    _view(s)
    return key_slot(argv[2])


def cluster_countkeysinslot(s: Session, argv: list[bytes]) -> Reply:
    _view(s)
    slot = _int(argv[2])
    if not 0 <= slot < SLOTS:
        raise CommandError(INVALID_SLOT)
    live = s.store.dbs[0].keys()  # live keys: expired ones are skipped
    return sum(1 for k in live if key_slot(k) == slot)


def cluster_getkeysinslot(s: Session, argv: list[bytes]) -> Reply:
    _view(s)
    slot, count = _int(argv[2]), _int(argv[3])
    if count < 0 or not 0 <= slot < SLOTS:
        raise CommandError(INVALID_SLOT_OR_COUNT)
    out: list[bytes] = []
    live = s.store.dbs[0].keys()
    for k in live:
        if len(out) >= count:
            break
        if key_slot(k) == slot:
            out.append(k)
    return out


def accepted(s: Session, argv: list[bytes]) -> Reply:
    """ASKING: accepted (no ASK redirection is ever sent)."""
    _view(s)
    return OK


def readonly(s: Session, argv: list[bytes]) -> Reply:
    """READONLY: on a replica, serve this connection's reads of its shard's slots."""
    _view(s)
    s.cluster_readonly = True
    return OK


def readwrite(s: Session, argv: list[bytes]) -> Reply:
    _view(s)
    s.cluster_readonly = False
    return OK


HANDLERS = {
    "cluster|slots": cluster_slots,
    "cluster|shards": cluster_shards,
    "cluster|nodes": cluster_nodes,
    "cluster|info": cluster_info,
    "cluster|myid": cluster_myid,
    "cluster|keyslot": cluster_keyslot,
    "cluster|countkeysinslot": cluster_countkeysinslot,
    "cluster|getkeysinslot": cluster_getkeysinslot,
    "readonly": readonly,
    "readwrite": readwrite,
    "asking": accepted,
}
