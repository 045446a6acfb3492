"""flusher/coordination.py against a real etcd (tests/etcd.py): the leader key on a
lease, takeover when the lease lapses, epochs, fencing of the RAFT log, the node
registry, and what happens when etcd loses quorum."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from flusher.coordination import (
    EtcdUnavailable,
    LeaderInfo,
    Leadership,
    LogConflict,
    NodeInfo,
    NodeRegistry,
    NotLeader,
    RaftLog,
    best_candidate,
    etcd_client,
    grpc_target,
    list_nodes,
)
from tests.etcd import EtcdCluster, unique_group

T = TypeVar("T")
TTL = 2  # seconds (1 is the shortest etcd grants here, too tight on a loaded machine)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(60):  # a hang fails the test instead of stalling it
            return await scenario()

    return asyncio.run(bounded())


class Node:
    """One node's view: its own client, leadership and losses seen by on_lost."""

    def __init__(self, endpoints: list[str], group: str, node_id: str, ttl: int = TTL) -> None:
        self.client = etcd_client(endpoints)
        self.losses: list[str] = []
        self.lead = Leadership(
            self.client, group, node_id, f"127.0.0.1:{6000 + len(node_id)}", ttl,
            on_lost=self.losses.append,
        )  # fmt: skip
        self.log = RaftLog(self.client, group, page_size=3)

    def stall_keepalive(self) -> None:
        """From now on the node's lease keep-alives never get an answer (as if etcd
        were cut off from it)."""

        async def hang(lease_id: int) -> Any:
            await asyncio.Event().wait()

        self.client.refresh_lease = hang

    def unstall_keepalive(self) -> None:
        del self.client.refresh_lease

    async def close(self) -> None:
        await self.lead.close()
        await self.client.close()


async def win(node: Node) -> tuple[float, int]:
    """Try to take the key until it works; returns (time.monotonic() just before the
    attempt that won, number of attempts)."""
    attempts = 0
    while True:
        attempts += 1
        sent = time.monotonic()
        if await node.lead.try_acquire():
            return sent, attempts
        await asyncio.sleep(0.02)


def test_election_and_takeover_after_the_lease_lapses(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a, b = Node(etcd.endpoints, group, "a"), Node(etcd.endpoints, group, "bb")
        try:
            assert await a.lead.leader() is None
            assert await a.lead.try_acquire()
            assert a.lead.am_leader() and a.lead.epoch is not None
            assert not await b.lead.try_acquire()  # the key is taken: no takeover
            current = await b.lead.leader()
            assert current == LeaderInfo("a", "127.0.0.1:6001", a.lead.epoch, current.value)
            assert current.value == a.lead.key_value
            # Renewals keep the key past its TTL.
            await asyncio.sleep(TTL + 0.5)
            assert a.lead.am_leader() and not await b.lead.try_acquire()
            assert a.losses == []

            a.stall_keepalive()
            seen_true: list[float] = []

            async def sample() -> None:  # the last moment a still believed it led
                while True:
                    # The clock read before the check: read after it, a descheduled
                    # process (a loaded machine) would date the belief late. The
                    # deadline assertion below bounds the check itself.
                    now = time.monotonic()
                    if a.lead.am_leader():
                        seen_true.append(now)
                    await asyncio.sleep(0.005)

            sampler = asyncio.create_task(sample())
            b_sent, attempts = await win(b)
            sampler.cancel()
            assert attempts > 1  # b had to wait for the lease to lapse
            # a stopped believing before b's winning attempt was even sent.
            assert seen_true and seen_true[-1] < b_sent
            assert a.lead.deadline == 0.0 or a.lead.deadline < b_sent
            assert not a.lead.am_leader()
            assert len(a.losses) == 1 and "renewed" in a.losses[0]
            assert b.lead.am_leader() and b.lead.epoch is not None
            assert b.lead.epoch > current.epoch
            now = await a.lead.leader()
            assert now is not None and (now.node_id, now.epoch) == ("bb", b.lead.epoch)
        finally:
            await a.close()
            await b.close()

    run(scenario)


def test_a_paused_leader_resumes_believing_nothing(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a, b = Node(etcd.endpoints, group, "a"), Node(etcd.endpoints, group, "b")
        try:
            assert await a.lead.try_acquire()
            term = a.lead.key_value
            assert term is not None
            await a.log.append(1, b"one", term)
            time.sleep(TTL + 0.2)  # the whole process stalls, as under kill -STOP
            assert not a.lead.am_leader()  # before the loop runs anything
            await win(b)
            assert not a.lead.am_leader() and len(a.losses) == 1
            with pytest.raises(NotLeader, match="b holds the leader key"):
                await a.log.append(2, b"zombie", term)
            assert await b.log.entries_after(0) == [(1, b"one")]
        finally:
            await a.close()
            await b.close()

    run(scenario)


def test_a_late_keepalive_reply_does_not_revive_the_term(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        a = Node(etcd.endpoints, unique_group(), "a")
        real = a.client.refresh_lease

        async def answered_then_paused(lease_id: int) -> Any:
            reply = await real(lease_id)  # etcd renewed the lease ...
            # ... and the process stalls before it reads the answer, until just past
            # the deadline (but not past what the answer would extend it to).
            time.sleep(max(0.0, a.lead.deadline - time.monotonic()) + 0.05)
            a.unstall_keepalive()
            return reply

        try:
            assert await a.lead.try_acquire()
            a.client.refresh_lease = answered_then_paused
            async with asyncio.timeout(5):
                while not a.losses:
                    await asyncio.sleep(0.01)
            for _ in range(50):  # the term is over for good
                assert not a.lead.am_leader()
                await asyncio.sleep(0.01)
            assert len(a.losses) == 1
        finally:
            await a.close()

    run(scenario)


def test_epochs_increase_with_every_term(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a, b = Node(etcd.endpoints, group, "a"), Node(etcd.endpoints, group, "b")
        try:
            epochs, values = [], []
            for node in (a, b, a, b):
                assert await node.lead.try_acquire()
                epochs.append(node.lead.epoch)
                values.append(node.lead.key_value)
                await node.lead.resign()
                assert not node.lead.am_leader() and node.lead.epoch is None
                assert await node.lead.leader() is None
            assert epochs == sorted(epochs) and len(set(epochs)) == 4
            assert len(set(values)) == 4  # a term's value is never reused
            assert a.losses == [] and b.losses == []  # resigning is not losing
        finally:
            await a.close()
            await b.close()

    run(scenario)


def test_a_deposed_leader_cannot_append(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a, b = Node(etcd.endpoints, group, "a"), Node(etcd.endpoints, group, "b")
        try:
            with pytest.raises(NotLeader, match="nobody"):
                await a.log.append(1, b"x", b"not a leader value")
            assert await a.lead.try_acquire()
            old_term = a.lead.key_value
            assert old_term is not None
            await a.log.append(1, b"one", old_term)
            a.stall_keepalive()
            await win(b)
            new_term = b.lead.key_value
            assert new_term is not None
            with pytest.raises(NotLeader, match="b holds the leader key"):
                await a.log.append(2, b"stale", old_term)
            await b.log.append(2, b"two", new_term)
            # Even the old leader winning again cannot use its old term's value.
            await b.lead.resign()
            a.unstall_keepalive()
            assert await a.lead.try_acquire() and a.lead.key_value != old_term
            with pytest.raises(NotLeader):
                await a.log.append(3, b"stale", old_term)
            assert await a.log.entries_after(0) == [(1, b"one"), (2, b"two")]
        finally:
            await a.close()
            await b.close()

    run(scenario)


def test_log_entries_after_and_trim_through(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a = Node(etcd.endpoints, group, "a")
        try:
            assert await a.lead.try_acquire()
            term = a.lead.key_value
            assert term is not None
            assert await a.log.entries_after(0) == []
            for lsn in range(1, 5):
                await a.log.append(lsn, b"v%d" % lsn, term)
            await a.log.append_many([(lsn, b"v%d" % lsn) for lsn in range(5, 11)], term)
            big = 10**12  # past 9 digits: order is still LSN order
            await a.log.append(big, b"big", term)
            want = [(lsn, b"v%d" % lsn) for lsn in range(1, 11)] + [(big, b"big")]
            assert await a.log.entries_after(0) == want  # read in pages of 3
            assert await a.log.entries_after(4) == want[4:]
            assert await a.log.entries_after(big) == []
            # A retry of entries already there is fine; other data at an LSN is not.
            await a.log.append_many([(9, b"v9"), (10, b"v10")], term)
            with pytest.raises(LogConflict, match="LSN 10"):
                await a.log.append(10, b"other", term)
            with pytest.raises(ValueError, match="at most"):
                await a.log.append_many([(i, b"") for i in range(200, 400)], term)
            assert await a.log.trim_through(4) == 4
            assert await a.log.entries_after(0) == want[4:]
            assert await a.log.trim_through(4) == 0
            assert await a.log.trim_through(big) == 7
            assert await a.log.entries_after(0) == []
        finally:
            await a.close()

    run(scenario)


def test_watch_leader_follows_every_change(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a, b = Node(etcd.endpoints, group, "a"), Node(etcd.endpoints, group, "b")
        seen: list[str | None] = []
        got = asyncio.Event()

        async def watch() -> None:
            async for info in a.lead.watch_leader():
                seen.append(None if info is None else info.node_id)
                got.set()

        async def step(expect: list[str | None]) -> None:
            while seen != expect:
                got.clear()
                await asyncio.wait_for(got.wait(), 10)

        watcher = asyncio.create_task(watch())
        try:
            await step([None])
            assert await a.lead.try_acquire()
            await step([None, "a"])
            await a.lead.resign()
            await step([None, "a", None])
            assert await b.lead.try_acquire()
            await step([None, "a", None, "b"])
        finally:
            watcher.cancel()
            await a.close()
            await b.close()

    run(scenario)


def test_campaign_waits_for_the_key(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a, b = Node(etcd.endpoints, group, "a"), Node(etcd.endpoints, group, "b")
        try:
            await a.lead.campaign(timeout=5)
            with pytest.raises(TimeoutError):
                await b.lead.campaign(timeout=0.5)
            waiting = asyncio.create_task(b.lead.campaign(timeout=10))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await a.lead.resign()
            await waiting
            assert b.lead.am_leader()
        finally:
            await a.close()
            await b.close()

    run(scenario)


def test_registry_and_best_candidate(etcd: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        client = etcd_client(etcd.endpoints)
        regs = [
            NodeRegistry(client, group, name, f"127.0.0.1:{port}", TTL, publish_interval_s=0.05)
            for name, port in (("n1", 7001), ("n2", 7002), ("n3", 7003))
        ]
        try:
            for reg in regs:
                await reg.start()
            nodes = await regs[0].nodes()
            assert [(n.node_id, n.applied_lsn) for n in nodes] == [("n1", 0), ("n2", 0), ("n3", 0)]
            assert best_candidate(nodes) == NodeInfo("n1", "127.0.0.1:7001", 0)  # ties: id
            regs[1].set_applied(50)
            regs[2].set_applied(40)
            while [n.applied_lsn for n in await list_nodes(client, group)] != [0, 50, 40]:
                await asyncio.sleep(0.05)  # published by the registries' own rounds
            nodes = await list_nodes(client, group)
            assert best_candidate(nodes) == NodeInfo("n2", "127.0.0.1:7002", 50)
            assert best_candidate(nodes, exclude={"n2"}) == NodeInfo("n3", "127.0.0.1:7003", 40)
            # Registrations outlive their TTL while their node runs ...
            await asyncio.sleep(TTL + 0.5)
            assert len(await list_nodes(client, group)) == 3
            # ... and go with the node.
            await regs[1].close()
            assert [n.node_id for n in await list_nodes(client, group)] == ["n1", "n3"]
        finally:
            for reg in regs:
                await reg.close()
            await client.close()
        assert best_candidate([]) is None

    run(scenario)


def test_without_quorum_calls_fail_within_their_timeout(etcd_cluster: EtcdCluster) -> None:
    async def scenario() -> None:
        group = unique_group()
        a = Node(etcd_cluster.endpoints, group, "a", ttl=2)
        try:
            assert await a.lead.try_acquire()
            term = a.lead.key_value
            assert term is not None
            await a.log.append(1, b"one", term)
            for member in etcd_cluster.members[1:]:
                member.stop()
            # Each call gives up within its timeout (the outer bound is generous).
            for call in (
                lambda: a.log.append(2, b"two", term, timeout=0.5),
                lambda: a.log.entries_after(0, timeout=0.5),
                lambda: a.lead.leader(timeout=0.5),
            ):
                with pytest.raises(EtcdUnavailable):
                    await asyncio.wait_for(call(), 5)
            # The lease cannot be renewed: the leader steps down by its own clock.
            while a.lead.am_leader():
                await asyncio.sleep(0.05)
            while not a.losses:
                await asyncio.sleep(0.05)
            with pytest.raises(EtcdUnavailable):
                await asyncio.wait_for(a.lead.try_acquire(timeout=0.5), 5)
        finally:
            await a.client.close()

    run(scenario)


def test_endpoint_targets() -> None:
    assert grpc_target("http://127.0.0.1:2379") == "127.0.0.1:2379"
    assert grpc_target("etcd") == "etcd:2379"
    assert grpc_target(["http://[::1]:1"]) == "[::1]:1"
    assert grpc_target("http://127.0.0.1:1,127.0.0.2:2") == "ipv4:127.0.0.1:1,127.0.0.2:2"
    assert grpc_target(["http://[::1]:1", "http://[::1]:2"]) == "ipv6:[::1]:1,[::1]:2"
    for bad in ("", "https://127.0.0.1:1", "a:1,b:2", "127.0.0.1:1,[::1]:2"):
        with pytest.raises(ValueError):
            grpc_target(bad)
