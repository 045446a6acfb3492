"""CLIENT LIST's qbuf / qbuf-free of another client, against redis-server: the same
reads give the same figures, and the buffer shrinks as Redis' client cron shrinks it
(after a big argument once the peak has passed, to nothing after 2 s idle)."""

from __future__ import annotations

import re
import time

from tests.conftest import ServerProcess
from tests.resp_client import RawClient


def _figures(observer: RawClient, name: str) -> tuple[int, int]:
    listing = observer.call("CLIENT", "LIST").decode()
    line = next(x for x in listing.split("\n") if f" name={name} " in x)
    qbuf = re.search(r" qbuf=(\d+) ", line)
    free = re.search(r" qbuf-free=(\d+) ", line)
    assert qbuf is not None and free is not None, line
    return int(qbuf.group(1)), int(free.group(1))


def _scenario(port: int) -> list[tuple[int, int]]:
    observer, client = RawClient(port), RawClient(port)
    try:
        client.call("CLIENT", "SETNAME", "qb")
        seen = [_figures(observer, "qb")]  # one 16 KiB read's room
        client.call("SET", "x", "A" * 400000)
        seen.append(_figures(observer, "qb"))  # room for the big argument
        client.call("SET", "x", "A" * 100)
        time.sleep(0.25)
        client.call("SET", "x", "A" * 100)
        seen.append(_figures(observer, "qb"))  # the peak passed: cut down
        client.call("SET", "x", "A" * 40000)
        seen.append(_figures(observer, "qb"))
        time.sleep(3.2)
        seen.append(_figures(observer, "qb"))  # idle > 2 s: freed
        return seen
    finally:
        observer.close()
        client.close()


def test_query_buffer_figures_follow_redis(
    redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    ref = _scenario(redis_ref.port)
    ours = _scenario(ts_server.port)
    assert ours == ref
    assert ref[0][1] < 32768 < ref[1][1] and ref[2][1] < ref[1][1] and ref[-1] == (0, 0)
