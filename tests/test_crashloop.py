"""Crash loops and split brain under mixed write load, with real server processes on
one storage prefix.

Crash loop: writers pipeline SET/INCR/RPUSH/HSET into a SYNC table and into async
keys; the server is killed with SIGKILL at a random moment, the prefix is verified
(`temporalstore inspect`), the server restarts on it (replay verifies every checksum)
and what survived is checked: every acknowledged SYNC write, every async write at or
below the durable LSN the server reported, each writer's surviving writes a prefix of
what it sent, and every earlier cycle's data exactly as it was recovered.

Split brain: a second server takes the prefix over while the first is still under
write load; the first is fenced, nothing it acknowledged durably is lost, and the log
stays one contiguous history (no segment written by both).
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

from tests.conftest import ServerProcess, start_temporalstore
from tests.reliability import (
    DurableWatch,
    Writer,
    assert_store_verifies,
    check_writers,
    client,
    figure,
    seeded,
    sized,
    survived,
)
from tests.test_durability import kill9

SYNC_TABLE = "s:sync"


def start_with_sync_table(storage: list[str]) -> ServerProcess:
    p = start_temporalstore(storage)
    r = client(p.port)
    try:
        r.execute_command("TS.TABLE", "CREATE", SYNC_TABLE, "DURABILITY", "SYNC")
        assert r.execute_command("WAITAOF", "1", "0", "10000") == [1, 0]
    finally:
        r.close()
    return p


def mixed_writers(port: int, tag: str) -> tuple[list[Writer], list[Writer]]:
    """Two pipelining writers on async keys and two on the SYNC table."""
    async_writers = [Writer(port, f"a:{tag}:w{n}", depth=16) for n in range(2)]
    sync_writers = [Writer(port, f"{SYNC_TABLE}:{tag}w{n}", depth=4) for n in range(2)]
    return async_writers, sync_writers


def required_writes(
    async_writers: list[Writer], sync_writers: list[Writer], watch: DurableWatch
) -> dict[str, int]:
    """What must survive: every acknowledged SYNC write; async writes up to the
    durable LSN the server reported."""
    need = {w.prefix: w.acked for w in sync_writers}
    need.update({w.prefix: watch.confirmed[w.prefix] for w in async_writers})
    return need


def test_kill9_crash_loop_under_mixed_writes(tmp_path: Path) -> None:
    cycles = sized(3, 20)
    seed, rng = seeded("crash loop")
    storage = ["--storage", f"file://{tmp_path}/store", "--checkpoint-every-records", "20000"]
    p = start_with_sync_table(storage)
    recovered: dict[str, int] = {}  # every earlier writer: what it had after its crash
    acked_sync = acked_async = confirmed_async = kept = lost_async_max = replayed = 0
    started = time.monotonic()
    try:
        for cycle in range(cycles):
            async_writers, sync_writers = mixed_writers(p.port, f"c{cycle}")
            writers = async_writers + sync_writers
            watch = DurableWatch(p.port, async_writers)
            for t in (*writers, watch):
                t.start()
            time.sleep(rng.uniform(0.3, 1.5))
            kill9(p)
            watch.stop()
            for w in writers:
                w.stop()
                assert w.error is None, w.error
                assert w.acked > 0, f"{w.prefix} wrote nothing before the kill"
            assert watch.reports > 0
            need = required_writes(async_writers, sync_writers, watch)
            # Every restart verifies the store: inspect reads and checks every object,
            # then the server replays it, refusing any object that fails its checksum.
            assert_store_verifies(storage[:2])
            p = start_temporalstore(storage)
            r = client(p.port)
            try:
                info = r.info("persistence")
                assert int(info["replay_segments"]) > 0, info
                replayed += int(info["replay_records"])
                for prefix, n in recovered.items():
                    assert survived(r, prefix) == n, f"cycle {cycle}: {prefix} changed"
                counts = check_writers(r, writers, need)
                kept += sum(counts.values())
                recovered.update(counts)
                for w in async_writers:
                    lost_async_max = max(lost_async_max, w.acked - recovered[w.prefix])
            finally:
                r.close()
            acked_sync += sum(w.acked for w in sync_writers)
            acked_async += sum(w.acked for w in async_writers)
            confirmed_async += sum(watch.confirmed.values())
    finally:
        p.stop()
    figure(
        "crash-loop",
        seed=seed,
        cycles=cycles,
        acked_sync=acked_sync,
        acked_async=acked_async,
        async_at_or_below_durable_lsn=confirmed_async,
        survived=kept,
        max_async_acked_lost_per_writer=max(0, lost_async_max),
        records_replayed=replayed,
        seconds=time.monotonic() - started,
    )


def test_async_loss_bound_holds_after_sync_writes(tmp_path: Path) -> None:
    """The documented async bound: a crash loses at most the writes of the last flush
    interval (100 ms) and the PUT in flight. Async writes that follow a burst of SYNC
    writes are no exception: 2 s (20 intervals) after the last of them, a kill -9
    must not lose any."""
    storage = ["--storage", f"file://{tmp_path}/store"]
    p = start_with_sync_table(storage)
    try:
        burst = Writer(p.port, f"{SYNC_TABLE}:burst")
        burst.start()
        time.sleep(1.0)
        burst.stop()
        later = Writer(p.port, "a:later")
        later.start()
        time.sleep(0.5)
        later.stop()
        assert burst.error is None and later.error is None, (burst.error, later.error)
        time.sleep(2.0)
        r = client(p.port)
        lag_ms = int(r.info("persistence")["flush_lag_ms"])
        r.close()
        kill9(p)
    finally:
        p.stop()
    q = start_temporalstore(storage)
    r = client(q.port)
    try:
        kept = check_writers(r, [burst, later], {burst.prefix: burst.acked, "a:later": 0})
        lost = later.acked - kept["a:later"]
        figure(
            "async-loss-bound",
            sync_writes_before=burst.acked,
            async_acked=later.acked,
            async_lost_after_2s=lost,
            flush_lag_ms_before_kill=lag_ms,
        )
        assert lost == 0, (
            f"{lost} of {later.acked} async writes acknowledged 2 s before the crash were "
            f"lost (flush lag {lag_ms} ms after {burst.acked} SYNC writes)"
        )
    finally:
        r.close()
        q.stop()


def test_second_writer_fences_the_first_under_load(tmp_path: Path) -> None:
    storage = ["--storage", f"file://{tmp_path}/store"]
    a = start_with_sync_table(storage)
    async_writers, sync_writers = mixed_writers(a.port, "a")
    writers = async_writers + sync_writers
    watch = DurableWatch(a.port, async_writers)
    for t in (*writers, watch):
        t.start()
    time.sleep(sized(1, 5))
    try:
        b = start_temporalstore(storage)  # takes the prefix over while `a` writes
    except BaseException:
        a.stop()
        raise
    try:
        deadline = time.monotonic() + 30
        while any(w.is_alive() for w in writers) and time.monotonic() < deadline:
            time.sleep(0.05)
        watch.stop()
        for w in writers:
            w.stop()
            assert w.error is None, w.error
        ra = client(a.port)
        try:
            assert int(ra.info("persistence")["fenced"]) == 1
            try:
                ra.set("a:after-fencing", "1")
                raise AssertionError("the fenced server accepted a write")
            except redis.ReadOnlyError as e:
                assert "fenced" in str(e)
        finally:
            ra.close()
        need = required_writes(async_writers, sync_writers, watch)
        rb = client(b.port)
        try:
            counts = check_writers(rb, writers, need)
            rb.set("b:after", "1")
            assert rb.execute_command("WAITAOF", "1", "0", "10000") == [1, 0]
        finally:
            rb.close()
    finally:
        a.stop()
        b.stop()
    # One contiguous history: no gap, no overlap, every checksum good.
    assert_store_verifies(storage)
    c = start_temporalstore(storage)
    rc = client(c.port)
    try:
        assert {w.prefix: survived(rc, w.prefix) for w in writers} == counts
        assert rc.get("b:after") == b"1" and rc.exists("a:after-fencing") == 0
    finally:
        rc.close()
        c.stop()
    figure(
        "split-brain",
        acked_by_first=sum(w.acked for w in writers),
        acked_sync_by_first=sum(w.acked for w in sync_writers),
        async_at_or_below_durable_lsn=sum(watch.confirmed.values()),
        survived=sum(counts.values()),
        writers_stopped_by=",".join(sorted({w.ended_by.split(":")[0] for w in writers})),
    )
