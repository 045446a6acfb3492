"""Object storage faults under load, with a real server process (`--fault-injection
yes`, driven with TS.FAULT): latency spikes, 5xx-style errors, an outage, and PUTs
that land but report failure, while writers write (async keys and a SYNC table) and
readers read. Reads keep being served; past `--max-unflushed-bytes` writes wait
`--write-wait-ms` and are refused with -TRYAGAIN (and sent again by the writer);
after the fault the backlog drains, and after kill -9 and a restart every
acknowledged write is there, each writer's writes a prefix of what it sent."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from bench.client import Sampler
from tests.conftest import start_temporalstore
from tests.reliability import (
    Reader,
    Writer,
    assert_store_verifies,
    check_writers,
    client,
    figure,
    sampling,
    sized,
)
from tests.test_crashloop import SYNC_TABLE, start_with_sync_table
from tests.test_durability import kill9

MAX_UNFLUSHED = 50_000
WRITE_WAIT_MS = 300


def latency_spikes(r: redis.Redis, seconds: float) -> None:
    """PUT latency of 1 s for 0.6 s, then none for 0.4 s, over and over."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r.execute_command("TS.FAULT", "LATENCY", "1000")
        time.sleep(0.6)
        r.execute_command("TS.FAULT", "LATENCY", "0")
        time.sleep(0.4)


def errors(r: redis.Redis, seconds: float) -> None:
    """Half of all object storage calls fail as a 5xx would (retryable)."""
    r.execute_command("TS.FAULT", "ERROR-RATE", "0.5")
    time.sleep(seconds)


def outage(r: redis.Redis, seconds: float) -> None:
    r.execute_command("TS.FAULT", "OUTAGE", "ON")
    time.sleep(min(1.0, seconds))
    assert r.info("persistence")["last_flush_status"] == "err"
    time.sleep(max(0.0, seconds - 1.0))


def puts_land_but_fail(r: redis.Redis, seconds: float) -> None:
    """The next PUTs reach storage and then report failure; retries must not
    duplicate or lose anything."""
    r.execute_command("TS.FAULT", "FAIL-AFTER-PUT", str(sized(5, 50)))
    time.sleep(seconds)


FAULTS: dict[str, tuple[Callable[[redis.Redis, float], None], float]] = {
    "latency-spikes": (latency_spikes, sized(2, 10)),
    "5xx-errors": (errors, sized(2, 10)),
    "outage": (outage, sized(3, 30)),
    "put-lands-but-fails": (puts_land_but_fail, sized(1, 10)),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_storage_fault_under_load(tmp_path: Path, fault: str) -> None:
    inject, seconds = FAULTS[fault]
    storage = ["--storage", f"file://{tmp_path}/store"]
    args = [
        *storage,
        "--fault-injection", "yes",
        "--max-unflushed-bytes", str(MAX_UNFLUSHED),
        "--write-wait-ms", str(WRITE_WAIT_MS),
    ]  # fmt: skip
    p = start_with_sync_table(args)
    control = client(p.port)
    control.set("ro:key", "steady")
    timeout = seconds + 60  # a SYNC write is held for the whole outage
    async_writers = [Writer(p.port, f"a:w{n}", timeout=timeout) for n in range(2)]
    sync_writers = [Writer(p.port, f"{SYNC_TABLE}:w0", timeout=timeout)]
    writers = async_writers + sync_writers
    readers = [Reader(p.port, "ro:key", b"steady") for _ in range(2)]
    try:
        with sampling(p.proc.pid) as memory:
            for t in (*writers, *readers):
                t.start()
            time.sleep(0.5)
            refused_before = sum(w.refused for w in writers)
            backlog = Sampler(p.port, "persistence", "unflushed_bytes", interval=0.02)
            backlog.start()
            fault_start = time.monotonic()
            inject(control, seconds)
            fault_end = time.monotonic()
            backlog_peak = int(max(backlog.stop(), default=0))
            refused = sum(w.refused for w in writers) - refused_before
            control.execute_command("TS.FAULT", "RESET")
            time.sleep(0.5)
            for w in writers:
                w.stop()
                assert w.error is None, w.error
                assert w.ended_by == "stopped", f"{w.prefix}: {w.ended_by}"
            # A write of our own, then WAITAOF: once it is durable, so is every
            # write acknowledged before it.
            drain_start = time.monotonic()
            control.set("drain:marker", "1")
            assert control.execute_command("WAITAOF", "1", "0", "60000") == [1, 0]
            drained = time.monotonic() - drain_start
            for reader in readers:
                reader.stop()
                assert reader.error is None, reader.error
            served = min(reader.served_between(fault_start, fault_end) for reader in readers)
            info = control.info("persistence")
        assert served > 0, "reads were not served while object storage was faulty"
        assert backlog.samples and not backlog.errors, "INFO persistence failed"
        # A write is admitted while the backlog is under the cap: it ends at most one
        # write past it.
        assert backlog_peak <= MAX_UNFLUSHED + 4096, f"backlog reached {backlog_peak} bytes"
        if fault == "outage":
            assert refused > 0, "writes were not pushed back during the outage"
        assert info["last_flush_status"] == "ok" and int(info["unflushed_bytes"]) == 0, info
        acked = {w.prefix: w.acked for w in writers}
        control.close()
        kill9(p)
    finally:
        control.close()
        p.stop()  # when an assertion ended the test early
    assert_store_verifies(storage)
    q = start_temporalstore(args)
    r = client(q.port)
    try:
        survived = check_writers(r, writers, acked)
        assert r.get("ro:key") == b"steady"
    finally:
        r.close()
        q.stop()
    figure(
        f"storage-{fault}",
        fault_seconds=fault_end - fault_start,
        acked=sum(acked.values()),
        refused_tryagain=refused,
        reads_during_fault=served,
        unflushed_peak_bytes=backlog_peak,
        max_read_ms=max(reader.max_latency for reader in readers) * 1000,
        drain_seconds=drained,
        survived=sum(survived.values()),
        lost_acked=sum(acked.values()) - sum(min(acked[k], n) for k, n in survived.items()),
        rss_start_mb=memory.start_mb,
        rss_peak_mb=memory.peak_mb,
    )
