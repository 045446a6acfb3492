"""Failover and raft tables on etcd (issue 12, parts 2 and 3), with real processes:
etcd, three nodes on one storage directory, redis-py's Sentinel client.

- kill -9 of the primary, ROUNDS times: a replica takes over, acknowledged writes to
  sync and raft tables are all there, the killed node rejoins as a replica;
- a paused primary (SIGSTOP past its lease, then SIGCONT) acknowledges nothing after
  another node became primary, and storage replays whole;
- raft writes survive the loss of the primary and of its unflushed tail (the log in
  etcd), fail with -TRYAGAIN when etcd has no quorum (the connection stays open and
  writes again once the quorum is back), and need --etcd-endpoints.

Failover times and losses are written as figures (tests/reliability.py `figure`).
"""

from __future__ import annotations

import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry
from redis.sentinel import Sentinel

from commands.errors import NOREPLICAS, TRYAGAIN_NO_QUORUM, TRYAGAIN_RAFT
from tests.conftest import ServerProcess, start_temporalstore, until
from tests.etcd import EtcdCluster, start_etcd, unique_group
from tests.reliability import SOAK, Background, client, figure
from tests.test_replication import replicated

ROUNDS = 10 if SOAK else 2


def _until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """`until`, with a node's connection errors counting as not yet."""
    return until(check, timeout, (redis.RedisError,))


class Group:
    def __init__(self, etcd: EtcdCluster, extra: list[str] | None = None) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="ts-group-"))
        self.name = unique_group()
        self.args = [
            "--etcd-endpoints",
            ",".join(etcd.endpoints),
            "--group",
            self.name,
            *(extra or []),
        ]
        self.nodes: list[ServerProcess] = []

    def add(self) -> ServerProcess:
        node = start_temporalstore(self.args, workdir=self.workdir)
        self.nodes.append(node)
        return node

    def role(self, node: ServerProcess) -> bytes | None:
        try:
            role: bytes = redis.Redis(port=node.port, socket_timeout=1).execute_command("ROLE")[0]
            return role
        except redis.RedisError:
            return None

    def primary(self) -> ServerProcess:
        return _until(lambda: next((n for n in self.live() if self.role(n) == b"master"), None))

    def live(self) -> list[ServerProcess]:
        return [n for n in self.nodes if n.proc.poll() is None]

    def sentinel(self) -> Sentinel:
        return Sentinel([("127.0.0.1", n.port) for n in self.live()], socket_timeout=1)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    cluster = start_etcd(1)
    yield cluster
    cluster.stop()


def _switch_message(ps: Any) -> str | None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        m = ps.get_message(timeout=0.5)
        if m is not None and m["type"] == "message":
            return str(m["data"].decode())
    return None


def _kill(node: ServerProcess) -> None:
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait()
    node.stop()  # closes its pipes


def test_kill_9_of_the_primary_loses_no_acknowledged_sync_or_raft_write(etcd: EtcdCluster) -> None:
    group = Group(etcd, ["--flush-interval-ms", "50"])
    try:
        for _ in range(3):
            group.add()
        primary = group.primary()
        c = redis.Redis(port=primary.port)
        c.execute_command("TS.TABLE", "CREATE", "s:t", "DURABILITY", "SYNC")
        c.execute_command("TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT")
        acked: list[str] = []
        async_acked: list[str] = []
        times: list[float] = []
        n = 0
        for _round in range(ROUNDS):
            master = group.sentinel().master_for(group.name, socket_timeout=2)
            for _ in range(50):
                for table in ("s:t", "r:t"):
                    key = f"{table}:{n}"
                    assert master.set(key, n)
                    acked.append(key)
                # Async writes (the default table), pipelined: what a failover may
                # lose of them is measured, not bounded.
                pipe = master.pipeline(transaction=False)
                for j in range(20):
                    pipe.set(f"a:{n}:{j}", j)
                assert all(pipe.execute())
                async_acked.extend(f"a:{n}:{j}" for j in range(20))
                n += 1
            old = group.primary()
            # Sentinel clients hear of the new primary on +switch-master.
            watchers = []
            for node in group.live():
                if node is not old:
                    ps = redis.Redis(port=node.port).pubsub()
                    ps.subscribe("+switch-master")
                    ps.get_message(timeout=1)  # the subscribe confirmation
                    watchers.append(ps)
            _kill(old)
            killed = time.monotonic()

            def write_again() -> bool:
                m = group.sentinel().master_for(group.name, socket_timeout=1)
                return bool(m.set("probe", "1"))

            _until(write_again)
            times.append(time.monotonic() - killed)
            new = group.primary()
            heard = [_switch_message(ps) for ps in watchers]
            assert f"{group.name} 127.0.0.1 {old.port} 127.0.0.1 {new.port}" in heard, heard
            for ps in watchers:
                ps.close()
            # The killed node comes back with an empty memory and joins as a replica.
            group.nodes.remove(old)
            back = group.add()
            _until(lambda back=back: group.role(back) == b"slave")
        master = group.sentinel().master_for(group.name, socket_timeout=2)
        lost = [k for k in acked if master.get(k) is None]
        async_lost = sum(1 for k in async_acked if master.get(k) is None)
        figure(
            "failover",
            rounds=ROUNDS,
            acknowledged=len(acked),
            lost=len(lost),
            async_acknowledged=len(async_acked),
            async_lost=async_lost,
            median_s=round(statistics.median(times), 2),
            max_s=round(max(times), 2),
        )
        assert lost == []
    finally:
        group.stop()


def test_a_paused_primary_acknowledges_nothing_after_losing_the_lead(etcd: EtcdCluster) -> None:
    group = Group(etcd, ["--durability", "sync", "--flush-interval-ms", "50"])
    try:
        for _ in range(2):
            group.add()
        old = group.primary()
        c = redis.Redis(port=old.port, socket_timeout=15)
        c.set("before", "1")
        other = next(n for n in group.nodes if n is not old)
        old.proc.send_signal(signal.SIGSTOP)
        try:
            _until(lambda: group.role(other) == b"master")
            redis.Redis(port=other.port).set("new-primary", "1")
        finally:
            old.proc.send_signal(signal.SIGCONT)
        # Resumed, the old primary refuses (or drops) every write: never OK.
        outcomes = []
        for i in range(20):
            try:
                outcomes.append(c.set(f"zombie{i}", "x"))
            except redis.RedisError as e:
                outcomes.append(type(e).__name__)
        assert True not in outcomes, outcomes
        new = redis.Redis(port=other.port)
        assert all(new.get(f"zombie{i}") is None for i in range(20))
        _until(lambda: group.role(old) == b"slave")
        # Storage replays whole: a new node rebuilt from it has both primaries' writes.
        late = group.add()
        r = redis.Redis(port=late.port)
        _until(lambda: r.get("new-primary") == b"1")
        assert r.get("before") == b"1"
    finally:
        group.stop()


def test_raft_writes_survive_the_primary_and_its_unflushed_tail(etcd: EtcdCluster) -> None:
    # One node, flushing to object storage only every 10 minutes: acknowledged raft
    # writes are in etcd alone when it is killed.
    group = Group(etcd, ["--flush-interval-ms", "600000"])
    try:
        primary = group.add()
        c = redis.Redis(port=primary.port)
        _until(lambda: group.role(primary) == b"master")
        c.execute_command("TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT")
        for i in range(100):
            assert c.set(f"r:t:{i}", i)
        c.set("async-key", "may be lost")
        _kill(primary)
        group.nodes.remove(primary)
        successor = group.add()
        r = redis.Redis(port=successor.port)
        _until(lambda: group.role(successor) == b"master")
        assert [r.get(f"r:t:{i}") for i in range(100)] == [str(i).encode() for i in range(100)]
        assert r.execute_command("TS.TABLE", "INFO", "r:t")
    finally:
        group.stop()


def _refused_for_quorum(e: redis.exceptions.TryAgainError) -> bool:
    """The two refusals without an etcd quorum (docs/reliability.md)."""
    return f"TRYAGAIN {e}" in (TRYAGAIN_RAFT, TRYAGAIN_NO_QUORUM)


def test_raft_writes_fail_without_a_quorum_and_the_connection_goes_on() -> None:
    """With 2 of 3 etcd members stopped, a raft write is answered -TRYAGAIN (never OK)
    and the connection stays open: the same connection reads, its writes are refused
    with -TRYAGAIN, and once the members are back it writes to the raft table again."""
    cluster = start_etcd(3)
    # Flushing to object storage every 10 minutes: raft writes are durable in etcd
    # alone (one that storage holds is durable without etcd, and answered OK).
    group = Group(cluster, ["--flush-interval-ms", "600000"])
    try:
        primary = group.add()
        _until(lambda: group.role(primary) == b"master")
        # No retries: a closed connection must show, not be replaced silently.
        c = redis.Redis(port=primary.port, socket_timeout=30, retry=Retry(NoBackoff(), 0))
        me = c.client_id()
        c.execute_command("TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT")
        c.set("r:t:before", "1")
        for member in cluster.members[1:]:
            member.stop()
        with pytest.raises(redis.exceptions.TryAgainError) as refused:
            c.set("r:t:after", "1")
        assert _refused_for_quorum(refused.value), refused.value
        assert c.get("r:t:before") == b"1"
        with pytest.raises(redis.exceptions.TryAgainError) as refused:
            c.set("r:t:during", "1")
        assert _refused_for_quorum(refused.value), refused.value
        assert c.client_id() == me
        for member in cluster.members[1:]:
            member.start()
        cluster.wait_healthy()

        def written() -> bool:
            try:
                return bool(c.set("r:t:again", "1"))
            except redis.exceptions.TryAgainError as e:
                assert _refused_for_quorum(e), e
                return False

        _until(written, 60)
        assert c.client_id() == me
        assert c.get("r:t:again") == b"1" and c.get("r:t:before") == b"1"
        assert group.role(primary) == b"master"
    finally:
        group.stop()
        cluster.stop()


def test_raft_tables_need_etcd() -> None:
    server = start_temporalstore()
    try:
        c = redis.Redis(port=server.port)
        with pytest.raises(redis.ResponseError, match="DURABILITY RAFT needs etcd"):
            c.execute_command("TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT")
    finally:
        server.stop()


# --------------------------------------------------------------------------- async loss

LOSS_SECONDS = 10.0 if SOAK else 3.0  # of writing before each kill
LOSS_ROUNDS = 3 if SOAK else 1


class AsyncWriter(Background):
    """SET <prefix><i> <i>, i = 0, 1, 2, ..., 100 per pipeline, as fast as the
    primary answers, until the connection fails, through `r` (a client that never
    retries: `client`, or a RedisCluster with no retries whose `prefix` holds a hash
    tag, so that every key is in one slot and a pipeline goes to one node on one
    connection). `acked` lists the writes answered OK in order (their LSNs grow with
    i); `refused` counts -NOREPLICAS answers."""

    def __init__(self, r: redis.Redis | RedisCluster, prefix: str = "a:") -> None:
        super().__init__()
        self.r = r
        self.prefix = prefix
        self.acked: list[int] = []
        self.refused = 0
        self.error = ""

    def run(self) -> None:
        i = 0
        try:
            while not self.stopping.is_set():
                pipe = self.r.pipeline(transaction=False)
                for j in range(i, i + 100):
                    pipe.set(f"{self.prefix}{j}", j)
                for j, res in enumerate(pipe.execute(raise_on_error=False), i):
                    if res is True:
                        self.acked.append(j)
                    elif isinstance(res, redis.ResponseError) and str(res) == NOREPLICAS:
                        self.refused += 1
                    elif isinstance(res, (redis.ConnectionError, redis.TimeoutError)):
                        return  # the primary was killed (RedisCluster returns the error)
                    else:
                        self.error = f"{self.prefix}{j}: {res!r}"
                        return
                i += 100
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass  # the primary was killed
        finally:
            self.r.close()


class ReplicaWatch(Background):
    """Which acknowledged writes must survive the primary's loss, from the primary's
    own reports: each round snapshots the writer's acknowledged count, then reads the
    newest LSN (INFO replication's master_repl_offset): every write acknowledged
    before the snapshot is at or below it. Once a later report shows the replica's
    acknowledged offset (or object storage's durable LSN) at or past that LSN, those
    writes are on the replica (or in storage), and its promotion keeps them."""

    def __init__(self, port: int, writer: AsyncWriter) -> None:
        super().__init__()
        self.port = port
        self.writer = writer
        self.confirmed = 0

    def run(self) -> None:
        r = client(self.port, 10)
        pending: list[tuple[int, int]] = []
        try:
            while not self.stopping.is_set():
                acked = len(self.writer.acked)
                repl = r.info("replication")
                last = int(repl["master_repl_offset"])
                replica = int(repl["slave0"]["offset"]) if "slave0" in repl else 0
                durable = int(r.info("persistence")["durable_lsn"])
                pending.append((last, acked))
                while pending and pending[0][0] <= max(replica, durable):
                    self.confirmed = pending.pop(0)[1]
                time.sleep(0.005)
        except (redis.RedisError, OSError):
            pass  # the primary was killed
        finally:
            r.close()


def write_through_a_kill(writer: AsyncWriter, primary: ServerProcess) -> ReplicaWatch:
    """Run `writer` and a `ReplicaWatch` of `primary` for LOSS_SECONDS, kill -9 the
    primary, stop both; the watch (what the replica or storage confirmed before)."""
    watch = ReplicaWatch(primary.port, writer)
    writer.start()
    watch.start()
    time.sleep(LOSS_SECONDS)
    _kill(primary)
    writer.stop()
    watch.stop()
    assert not writer.error, writer.error
    return watch


def _async_loss(extra: list[str]) -> dict[str, int]:
    """One round: a primary and its replica, an async writer on the primary for
    LOSS_SECONDS, kill -9 of the primary, REPLICAOF NO ONE on the replica; what the
    promoted replica lacks of the acknowledged writes."""
    with replicated(["--group", "g", *extra], linked=True) as (primary, replica):
        writer = AsyncWriter(client(primary.port))
        watch = write_through_a_kill(writer, primary)
        r = redis.Redis(port=replica.port)
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        _until(lambda: r.execute_command("ROLE")[0] == b"master")
        return lost_tail(r, writer, watch)


def lost_tail(r: redis.Redis, writer: AsyncWriter, watch: ReplicaWatch) -> dict[str, int]:
    """What the promoted replica `r` lacks of the writes `writer` had acknowledged
    when its primary was killed, checked: a tail, never a write `watch` saw the
    replica or object storage acknowledge. The round's figures."""
    acked = writer.acked
    present: list[bool] = []
    for start in range(0, len(acked), 1000):
        keys = [f"{writer.prefix}{j}" for j in acked[start : start + 1000]]
        present += [v is not None for v in r.mget(keys)]
    kept = present.index(False) if False in present else len(present)
    # The promoted replica holds a prefix of the primary's history: what it lacks of
    # one connection's writes is their tail ...
    assert not any(present[kept:]), "a later write survived an earlier lost one"
    # ... and never a write it, or object storage, had acknowledged.
    assert kept >= watch.confirmed, (kept, watch.confirmed)
    return {
        "acknowledged": len(acked),
        "lost": len(acked) - kept,
        "confirmed_before_kill": watch.confirmed,
        "refused_noreplicas": writer.refused,
    }


MIN_REPLICAS = ["--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"]
# The two settings the async loss is measured with (here and in cluster mode).
with_and_without_min_replicas = pytest.mark.parametrize(
    "settings", [[], MIN_REPLICAS], ids=["default", "min-replicas-1-lag-1"]
)


def loss_figures(name: str, settings: list[str], rounds: list[dict[str, int]], **more: Any) -> None:
    """Record the rounds of an async loss measurement (and `more`) as the figure
    <name>-default or <name>-min-replicas-1-lag-1."""
    figure(
        f"{name}-{'min-replicas-1-lag-1' if settings else 'default'}",
        rounds=len(rounds),
        seconds_each=LOSS_SECONDS,
        acknowledged=sum(x["acknowledged"] for x in rounds),
        lost=sum(x["lost"] for x in rounds),
        lost_per_round=",".join(f"{x['lost']}/{x['acknowledged']}" for x in rounds),
        lost_max_per_round=max(x["lost"] for x in rounds),
        confirmed_before_kill=sum(x["confirmed_before_kill"] for x in rounds),
        refused_noreplicas=sum(x["refused_noreplicas"] for x in rounds),
        **more,
    )


@with_and_without_min_replicas
def test_async_writes_lost_on_failover(settings: list[str]) -> None:
    """Async writes as fast as one pipelining client can, kill -9 of the primary, its
    replica promoted: the acknowledged writes the new primary lacks, measured with
    and without min-replicas-to-write 1 / min-replicas-max-lag 1. What is asserted
    holds in both: the loss is a tail (the promoted replica has a prefix of the
    history) and nothing the replica or storage had acknowledged is lost.
    min-replicas-to-write does not make writes wait for the replica (as in Redis: it
    only refuses writes while no replica acknowledged within the lag), so it is not
    expected to shrink this loss; the figures say how it went."""
    loss_figures(
        "failover-async-loss", settings, [_async_loss(settings) for _ in range(LOSS_ROUNDS)]
    )


def test_min_replicas_to_write_refuses_writes_while_the_replica_is_stopped() -> None:
    """--min-replicas-to-write 1 --min-replicas-max-lag 1, given as server flags: with
    its replica stopped (SIGSTOP) the primary soon refuses writes with Redis' NOREPLICAS
    text, reads go on, and once the replica resumes and acknowledges, writes are
    accepted again. How many writes it acknowledged between the stop and the first
    refusal is recorded (it depends on the write rate: about the lag's worth)."""
    with replicated(MIN_REPLICAS, linked=True) as (primary, replica):
        acked_after_stop = refused_while_stopped(primary, replica)
        r = redis.Redis(port=replica.port)
        _until(lambda: r.get("after") == b"1")
        figure("min-replicas-stopped-replica", acked_after_stop=acked_after_stop)


def refused_while_stopped(primary: ServerProcess, replica: ServerProcess, prefix: str = "") -> int:
    """On a primary started with --min-replicas-to-write 1 --min-replicas-max-lag 1:
    <prefix>before written, the replica stopped (SIGSTOP), writes go on until one is
    refused with NOREPLICAS, and the next too while reads go on; the replica resumed,
    <prefix>after is written. How many writes were acknowledged after the stop."""
    p = client(primary.port)
    assert p.set(f"{prefix}before", "1")
    replica.proc.send_signal(signal.SIGSTOP)
    acked_after_stop = 0
    try:

        def refused() -> bool:
            nonlocal acked_after_stop
            try:
                p.set(f"{prefix}during:{acked_after_stop}", "1")
            except redis.ResponseError as e:
                assert str(e) == NOREPLICAS, e
                return True
            acked_after_stop += 1
            return False

        _until(refused)
        assert p.get(f"{prefix}before") == b"1"
        with pytest.raises(redis.ResponseError) as still:
            p.set(f"{prefix}still", "refused")
        assert str(still.value) == NOREPLICAS
    finally:
        replica.proc.send_signal(signal.SIGCONT)
    _until(lambda: p.set(f"{prefix}after", "1"))
    p.close()
    return acked_after_stop
