"""Slot moves to and from a replicated shard (issue 28), with real processes: etcd, the
replicated shard of tests/test_cluster_shards.py (two nodes of one group on one
storage prefix, `--durability sync`) and a shard of one node; a SYNC and a RAFT
table on the replicated shard (a shard of one node has no raft log: it refuses a RAFT
table, and gets both tables, the RAFT one as SYNC, with the first keys it takes); a
writer through redis-py's RedisCluster writing into the moved slots all along, each
write retried until acknowledged.

Three moves: from the replicated shard to the single node, back the other way (named
by the replica's address: a node names its shard), then, after a kill -9 of the
replicated shard's primary right after the second move, from its new primary. The
replicas apply the IMPORT and FORGET records (keys appear and vanish there, READONLY
reads follow the new map), every acknowledged write reads back, and the history of
the moved keys is intact. Then a failover during a move, of the source's primary
(stopped before it fences, let go on once the move is done: it rejoins as a replica)
and of the target's (stopped before it imports, then killed).
"""

from __future__ import annotations

import asyncio
import signal

import pytest
import redis
from redis.cluster import RedisCluster

from flusher.coordination import etcd_client
from flusher.slotmap import node_id_for
from flusher.slotmove import Move, shard_id
from proxy.slotmove import one_move
from store.slots import key_slot
from tests.conftest import ServerProcess, until
from tests.reliability import Background, figure
from tests.test_cluster_move import _history, _keys_on
from tests.test_cluster_shards import Shards, _ready
from tests.test_cluster_shards import shards as shards  # the fixture
from tests.test_durability import kill9

HISTORIED = 80  # keys written with several versions before the moves
VERSIONS = 3
MOVES = ((0, 2999), (9000, 10999), (3000, 3999))  # group -> single, back, group -> single


def _key(i: int) -> str:
    return f"{'sr'[i % 2]}:t:w{i}"  # the SYNC and the RAFT table in turn


class ClusterWriter(Background):
    """Writes w0, w1, ... through RedisCluster, each retried until acknowledged."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port
        self.acked: list[int] = []
        self.retried = 0

    def run(self) -> None:
        rc = RedisCluster(host="127.0.0.1", port=self.port, socket_timeout=2)
        i = 0
        try:
            while not self.stopping.is_set():
                try:
                    rc.set(_key(i), i)
                except redis.RedisError:
                    self.retried += 1
                    self.stopping.wait(0.05)
                    continue
                self.acked.append(i)
                i += 1
        finally:
            rc.close()

    def more(self, n: int) -> None:
        """Wait until `n` more writes are acknowledged."""
        start = len(self.acked)
        until(lambda: len(self.acked) >= start + n, 60)


def _move(s: Shards, first: int, last: int, to: ServerProcess) -> None:
    done = s.cli("move", "--slots", f"{first}-{last}", "--to", f"127.0.0.1:{to.port}")
    assert done.returncode == 0, done.stderr
    assert f"moved slots {first}-{last} from " in done.stdout


def _read_back(port: int, writer: ClusterWriter) -> tuple[list[int], list[int]]:
    """The writer's acknowledged writes, and those that do not read back."""
    rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=2)
    try:
        acked = writer.acked
        got = rc.mget_nonatomic([_key(i) for i in acked])
    finally:
        rc.close()
    assert len(acked) == len(set(acked))
    return acked, [i for i, v in zip(acked, got, strict=True) if v != str(i).encode()]


def _in(keys: set[bytes], first: int, last: int) -> set[bytes]:
    return {k for k in keys if first <= key_slot(k) <= last}


def _tables(port: int) -> dict[bytes, bytes]:
    listed = redis.Redis(port=port, protocol=3).execute_command("TS.TABLE", "LIST")
    return {t[b"name"]: t[b"durability"] for t in listed}


def _readonly_get(port: int, key: bytes) -> bytes | str | None:
    """A READONLY connection's GET: the value, or the redirection it got."""
    r = redis.Redis(port=port, socket_timeout=2)
    try:
        r.execute_command("READONLY")
        got: bytes | None = r.get(key)
        return got
    except redis.exceptions.MovedError as e:
        return f"MOVED {e}"
    finally:
        r.close()


def test_moves_with_a_replicated_shard_lose_nothing(shards: Shards) -> None:
    s = shards
    primary, replica = _ready(s)  # the group serves 0-8191, the single node the rest
    single = s.single
    on_primary = redis.Redis(port=primary.port)
    assert on_primary.execute_command("TS.TABLE", "CREATE", "s:t", "DURABILITY", "SYNC")
    assert on_primary.execute_command("TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT")
    with pytest.raises(redis.ResponseError, match="DURABILITY RAFT needs a replicated shard"):
        redis.Redis(port=single.port).execute_command(
            "TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT"
        )

    rc = RedisCluster(host="127.0.0.1", port=single.port, socket_timeout=2)
    historied = [f"{'sr'[i % 2]}:t:h{i}" for i in range(HISTORIED)]
    try:
        for v in range(VERSIONS):
            for k in historied:
                assert rc.set(k, f"{k}:v{v}")
        before = {k: _history(rc, k) for k in historied}
    finally:
        rc.close()
    for first, last in MOVES:
        assert _in({k.encode() for k in historied}, first, last), (first, last)

    writer = ClusterWriter(single.port)
    writer.start()
    try:
        writer.more(200)
        # 1. From the replicated shard: its primary fences and gives the keys away,
        # its replica forgets them too and redirects READONLY reads to the taker.
        first, last = MOVES[0]
        gone = _in(_keys_on(replica.port), first, last)
        assert gone
        _move(s, first, last, single)
        writer.more(200)
        until(lambda: not _in(_keys_on(replica.port), first, last), 20)
        assert not _in(_keys_on(primary.port), first, last)
        assert gone <= _keys_on(single.port)
        # The keys' tables came with them (RAFT as SYNC: a shard of one node has no log).
        assert _tables(single.port) == {b"r:t": b"sync", b"s:t": b"sync"}
        key = next(iter(gone))
        until(
            lambda: (
                _readonly_get(replica.port, key) == f"MOVED {key_slot(key)} 127.0.0.1:{single.port}"
            ),
            20,
        )

        # 2. To the replicated shard, named by its replica: the primary takes the keys,
        # the replica applies them and serves them to READONLY reads.
        first, last = MOVES[1]
        taken = _in(_keys_on(single.port), first, last)
        assert taken
        _move(s, first, last, replica)
        until(lambda: taken <= _keys_on(replica.port), 20)
        assert taken <= _keys_on(primary.port)
        assert not _in(_keys_on(single.port), first, last)
        key = next(k for k in taken if k.startswith(b"s:t:h"))
        want = f"{key.decode()}:v{VERSIONS - 1}".encode()
        until(lambda: _readonly_get(replica.port, key) == want, 20)

        # 3. kill -9 of the taker's primary right after the move: the replica is
        # elected, writes itself into the map, and gives a range away in turn.
        kill9(primary)
        until(lambda: s.slot_map().shards[0].port == replica.port, 30)
        writer.more(200)
        first, last = MOVES[2]
        _move(s, first, last, single)
        writer.more(200)
    finally:
        writer.stop()
    assert not _in(_keys_on(replica.port), first, last)

    acked, lost = _read_back(single.port, writer)
    moved = [i for i in acked if any(a <= key_slot(_key(i).encode()) <= b for a, b in MOVES)]
    rc = RedisCluster(host="127.0.0.1", port=single.port, socket_timeout=2)
    try:
        changed = [k for k in historied if _history(rc, k) != before[k]]
    finally:
        rc.close()
    figure(
        "group-slot-move",
        moves=len(MOVES),
        tables="sync,raft",
        acked=len(acked),
        acked_in_moved_slots=len(moved),
        raised_to_the_writer=writer.retried,
        lost_acked=len(lost),
        histories_changed=len(changed),
    )
    assert not lost and not changed
    assert moved


def _fail_over_during(s: Shards, primary: ServerProcess, to_group: bool) -> ClusterWriter:
    """Stop (SIGSTOP) the group's primary, move MOVES[0] from the group to the single
    node (or MOVES[1] the other way): the move recorded as `cluster move` does, at
    once, so the primary is still the group's leader then; wait until it is done, then
    let the old primary go on (SIGCONT: it finds it lost the lead), or kill -9 it (a
    move to the group). A writer runs throughout: stopped, returned."""
    first, last = MOVES[1 if to_group else 0]
    group, single = shard_id("", s.group), node_id_for("127.0.0.1", s.single.port)
    move = Move(first, last, single, group) if to_group else Move(first, last, group, single)

    async def run() -> str | None:
        client = etcd_client(s.endpoints)
        try:
            return await one_move(client, s.name, move, 60)
        finally:
            await client.close()

    writer = ClusterWriter(s.single.port)
    writer.start()
    try:
        writer.more(200)
        primary.proc.send_signal(signal.SIGSTOP)
        assert asyncio.run(run()) is None
        if to_group:
            kill9(primary)
        else:
            primary.proc.send_signal(signal.SIGCONT)
        writer.more(200)
    finally:
        writer.stop()
    acked, lost = _read_back(s.single.port, writer)
    moved = [i for i in acked if first <= key_slot(_key(i).encode()) <= last]
    figure(
        f"group-slot-move-{'target' if to_group else 'source'}-failover",
        acked=len(acked),
        acked_in_moved_slots=len(moved),
        raised_to_the_writer=writer.retried,
        lost_acked=len(lost),
    )
    assert moved and not lost
    return writer


def _before(node: ServerProcess, first: str, then: str) -> bool:
    """`node` logged a line holding `first` before one holding `then`."""
    lines = node.log_lines
    a = next(i for i, line in enumerate(lines) if first in line)
    return a < next(i for i, line in enumerate(lines) if then in line)


def test_source_primary_fails_over_during_a_move(shards: Shards) -> None:
    """The source shard's primary stops before it fences: the replica fences the range
    as soon as it sees the move, is elected once the primary's lease runs out, and
    carries the move on; the old primary, let go on, writes nothing and rejoins as a
    replica without the moved keys."""
    s = shards
    primary, replica = _ready(s)
    first, last = MOVES[0]
    writer = _fail_over_during(s, primary, to_group=False)
    assert _before(replica, f"fencing slots {first}-{last}", "takes the lead")
    shown = s.cli("show").stdout
    assert f"127.0.0.1:{replica.port} slots {last + 1}-8191 " in shown
    assert f"group {s.group}" in shown and "no move in progress" in shown
    moved = _in({_key(i).encode() for i in writer.acked}, first, last)
    assert moved and moved <= _keys_on(s.single.port)
    assert not _in(_keys_on(replica.port), first, last)
    old = redis.Redis(port=primary.port, socket_timeout=2)
    until(lambda: old.execute_command("ROLE")[0] == b"slave", 30, (redis.RedisError,))
    until(lambda: not _in(_keys_on(primary.port), first, last), 30, (redis.RedisError,))
    rejoined = f"127.0.0.1:{primary.port} no slots of its own (group {s.group})"
    assert rejoined in s.cli("show").stdout


def test_target_primary_fails_over_during_a_move(shards: Shards) -> None:
    """The taking shard's primary stops before it imports: the replica, elected once
    the primary's lease runs out, imports the range from the start and commits the
    move."""
    s = shards
    primary, replica = _ready(s)
    first, last = MOVES[1]
    writer = _fail_over_during(s, primary, to_group=True)
    assert _before(replica, f"slots {first}-{last} being imported", "takes the lead")
    assert _before(replica, "takes the lead", f"took slots {first}-{last}")
    shown = s.cli("show").stdout
    assert f"127.0.0.1:{replica.port} slots 0-8191,{first}-{last} " in shown
    assert not _in(_keys_on(s.single.port), first, last)
    moved = {_key(i).encode() for i in writer.acked}
    assert _in(moved, first, last) <= _keys_on(replica.port)
