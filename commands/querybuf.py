"""CLIENT LIST's qbuf and qbuf-free: what a client's input occupies.

`qbuf` is honest: the bytes of an incomplete request our reader holds (the request
being run, for the client asking). Our reader allocates nothing more than it holds,
so `qbuf-free` cannot be our own figure; it is the free room redis-server's query
buffer would have after the same reads, by Redis 7.0's rules (networking.c,
readQueryFromClient and processMultibulkBuffer; server.c, clientsCronResizeQueryBuffer):

- a read makes room for 16 KiB (PROTO_IOBUF_LEN), growing exactly the first time and
  greedily (double) after; a request with an argument of 32 KiB or more
  (PROTO_MBULK_BIG_ARG) leaves a buffer sized for that argument;
- the client cron (ten times a second) frees the spare room of a client idle for more
  than 2 s, and cuts a buffer over 32 KiB (PROTO_RESIZE_THRESHOLD) that is more than
  twice the peak since the last cron down to that peak; it wastes at least 4 KiB
  before either happens.

Sizes are rounded as jemalloc's size classes round redis-server's allocations (an
sds header and terminator included), so an idle client reads as redis-server's does.
The cron is applied when the client reads or is looked at (every 100 ms elapsed).
"""

from __future__ import annotations

import time
from typing import Final

# Bound once: compiled, a Final is a C static (no lookups per read).
_monotonic: Final = time.monotonic
_wall: Final = time.time

IOBUF_LEN: Final = 16 * 1024  # PROTO_IOBUF_LEN
BIG_ARG: Final = 32 * 1024  # PROTO_MBULK_BIG_ARG
RESIZE_THRESHOLD: Final = 32 * 1024  # PROTO_RESIZE_THRESHOLD
CRON_PERIOD: Final = 0.1  # hz 10: with few clients, each is seen every cron run
_GREEDY_MAX: Final = 1024 * 1024  # SDS_MAX_PREALLOC


def sds_alloc(size: int) -> int:
    """The room an sds string gets when asked for `size` bytes: jemalloc rounds the
    allocation (header, bytes and terminator) up to its size class."""
    if size <= 0:
        return 0
    hdr = 3 if size < 256 else 5 if size < 65536 else 9
    total = hdr + size + 1
    if total <= 16384:
        # Small classes are 16-byte spaced up to 128, then 4 per doubling.
        step = 16 if total <= 128 else 1 << (max(total - 1, 1).bit_length() - 3)
    else:
        step = 1 << ((total - 1).bit_length() - 3)
    return -(-total // step) * step - hdr - 1


class QueryBuffer:
    """One client's modelled query buffer: allocated room, bytes held, the peak since
    the last cron and when the cron last ran."""

    __slots__ = ("alloc", "cron_at", "last_read", "peak", "used")

    def __init__(self) -> None:
        self.alloc = 0
        self.used = 0
        self.peak = 0
        self.cron_at = time.monotonic()
        self.last_read = time.time()

    def read(self, nread: int, args: list[list[bytes]], held: int, wall: float = 0.0) -> None:
        """A read of `nread` bytes that completed the requests `args` and left `held`
        bytes of an incomplete one, at `wall` (time.time(); 0.0: read the clock)."""
        now = _monotonic()
        if now - self.cron_at >= CRON_PERIOD:
            self.cron(now)
        if not wall:
            wall = _wall()
        before = self.used
        if before + nread >= BIG_ARG:
            big = 0
            for argv in args:
                for a in argv:
                    if len(a) >= BIG_ARG:
                        big = len(a)
            if held >= BIG_ARG:
                big = max(big, held)
            if big:
                # Read to fit the argument, then (zero-copy) a fresh buffer of its size.
                self.peak = max(self.peak, big + 2)
                self.alloc = sds_alloc(big + 2)
                self.used = held
                self.last_read = wall
                return
        if self.alloc < IOBUF_LEN:
            self.alloc = max(self.alloc, sds_alloc(before + IOBUF_LEN))
        elif self.alloc - before < IOBUF_LEN:
            want = before + IOBUF_LEN
            self.alloc = sds_alloc(want * 2 if want < _GREEDY_MAX else want + _GREEDY_MAX)
        self.peak = max(self.peak, before + nread)
        self.used = held
        self.last_read = wall

    def cron(self, now: float) -> None:
        """clientsCronResizeQueryBuffer, once per cron period elapsed (at most three:
        after that it changes nothing more)."""
        runs = min(int((now - self.cron_at) / CRON_PERIOD), 3)
        self.cron_at = now
        idle = int(_wall()) - int(self.last_read)
        for _ in range(runs):
            if self.alloc - self.used > 4096:
                if idle > 2:
                    self.alloc = self.used
                elif self.alloc > RESIZE_THRESHOLD and self.alloc // 2 > self.peak:
                    self.alloc = sds_alloc(max(self.used, self.peak))
            self.peak = self.used

    def figures(self, running: int = 0) -> tuple[int, int]:
        """(qbuf, qbuf-free) now; `running`: the bytes of the request being run (the
        client that asks sees its own command in its buffer, as in Redis)."""
        now = time.monotonic()
        if now - self.cron_at >= CRON_PERIOD:
            self.cron(now)
        used = self.used + running
        return used, max(self.alloc - used, 0)
