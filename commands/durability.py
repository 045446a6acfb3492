"""Waiting for durability in object storage.

WAITAOF numlocal numreplicas timeout-ms
    As Redis 7.2, where "local" means durable in object storage. Replies
    [numlocal acknowledged, numreplicas acknowledged]; there are no replicas yet,
    so a numreplicas above 0 waits for the whole timeout (0 waits forever).
TS.WAITDURABLE timeout-ms
    Waits until everything this connection wrote is durable (or the timeout
    passes; 0 waits forever) and replies the durable LSN.
TS.FAULT OUTAGE ON|OFF | LATENCY ms | JITTER ms | ERROR-RATE p | FAIL-AFTER-PUT n | RESET
    Fault injection into object storage, for tests and drills. Only on a server
    started with --fault-injection yes; otherwise an error. JITTER adds a random
    delay of up to ms to each call (so PUTs in flight land out of order).
"""

from __future__ import annotations

import asyncio

from commands.errors import NOT_POSITIVE, SYNTAX, CommandError
from commands.parsing import LLONG_MAX, get_float, get_range_long, timeout_ms
from commands.registry import Flag, command
from commands.replies import OK, Reply, _deferred
from commands.session import Session


def durable_lsn(s: Session) -> int:
    dur = s.server.durability
    return s.store.lsn if dur is None else dur.durable_lsn


async def _wait_local(s: Session, timeout: float | None) -> bool:
    dur = s.server.durability
    if dur is None:
        return True
    return await dur.wait_durable(s.last_write_lsn, timeout)


@command("waitaof", 4, Flag.NOSCRIPT)
def cmd_waitaof(s: Session, argv: list[bytes]) -> Reply:
    numlocal = get_range_long(argv[1], 0, 1)
    numreplicas = get_range_long(argv[2], 0, LLONG_MAX, NOT_POSITIVE)
    timeout = timeout_ms(argv[3])
    acklocal = int(durable_lsn(s) >= s.last_write_lsn)
    if (acklocal >= numlocal and numreplicas == 0) or s.in_exec:
        return [acklocal, 0]

    async def run() -> Reply:
        if numreplicas == 0:
            ok = await _wait_local(s, timeout)
            return [int(ok), 0]
        # No replicas can acknowledge: wait out the timeout, as Redis does.
        await _wait_local(s, timeout)
        if timeout is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(max(0.0, timeout))
        return [int(durable_lsn(s) >= s.last_write_lsn), 0]

    return _deferred(lambda: asyncio.get_running_loop().create_task(run()))


@command("ts.waitdurable", 2, Flag.NOSCRIPT)
def cmd_ts_waitdurable(s: Session, argv: list[bytes]) -> Reply:
    timeout = timeout_ms(argv[1])
    if durable_lsn(s) >= s.last_write_lsn or s.in_exec:
        return durable_lsn(s)

    async def run() -> Reply:
        await _wait_local(s, timeout)
        return durable_lsn(s)

    return _deferred(lambda: asyncio.get_running_loop().create_task(run()))


FAULTS_DISABLED = "ERR fault injection is disabled (start the server with --fault-injection yes)"


@command("ts.fault", -2, Flag.ADMIN | Flag.NOSCRIPT | Flag.LOADING)
def cmd_ts_fault(s: Session, argv: list[bytes]) -> Reply:
    faults = s.server.faults
    if faults is None:
        raise CommandError(FAULTS_DISABLED)
    what = argv[1].lower()
    if what == b"reset" and len(argv) == 2:
        faults.outage = False
        faults.latency = 0.0
        faults.jitter = 0.0
        faults.error_rate = 0.0
        faults.fail_after_put = 0
    elif what == b"outage" and len(argv) == 3 and argv[2].lower() in (b"on", b"off"):
        faults.outage = argv[2].lower() == b"on"
    elif what == b"latency" and len(argv) == 3:
        faults.latency = get_range_long(argv[2], 0, 3_600_000) / 1000
    elif what == b"jitter" and len(argv) == 3:
        faults.jitter = get_range_long(argv[2], 0, 3_600_000) / 1000
    elif what == b"error-rate" and len(argv) == 3:
        rate = get_float(argv[2])
        if not 0.0 <= rate <= 1.0:
            raise CommandError("ERR error rate must be between 0 and 1")
        faults.error_rate = rate
    elif what == b"fail-after-put" and len(argv) == 3:
        faults.fail_after_put = get_range_long(argv[2], 0, LLONG_MAX)
    else:
        raise CommandError(SYNTAX)
    return OK
