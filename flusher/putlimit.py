"""How many segment PUTs may run at once: as many as the object store serves in
parallel, and no more.

Several PUTs in flight pay when the store serves them side by side (S3, MinIO on
its own machine: a PUT takes about as long with three others running as alone).
They cost when it serves them one after the other (a store on a busy CPU, such as
a local test server): each PUT then takes as long as all of them together, so a
write waits as long as with one PUT, and the writes a single PUT would have carried
are split over several, each paying the client's fixed cost per request (signing,
HTTP) on the server's CPU.

`PutLimit` tells the two apart from the PUTs' own latencies, as TCP Vegas and the
concurrency limiters of RPC clients do: the shortest latency of the recent PUTs is
what one PUT costs on its own; a PUT that ran with `k - 1` others and took `x` times
that shows how serial the store is, `(x - 1) / (k - 1)`: 0 when it ran in
parallel, 1 when it waited for all the others. Serial PUTs lower the limit by one,
down to one, and hold it there for a while; parallel ones raise it again, up to the
cap (`Flusher.max_in_flight`). At one PUT in flight the limit is raised again after
the hold, so a store that has become parallel (less load on its side) is found.
"""

from __future__ import annotations

from collections import deque

WINDOW = 64
"""PUT latencies the baseline (their minimum) is taken over."""

HOLD = 32
"""PUTs that land after the limit was lowered before it may be raised again."""

SERIAL = 0.6
"""Serialness at or over which a PUT lowers the limit."""

PARALLEL = 0.3
"""Serialness at or under which a PUT lets the limit rise (after the hold)."""


class PutLimit:
    """The number of PUTs that may be in flight, from the latencies of those that
    landed (`landed`)."""

    __slots__ = ("cap", "hold", "latencies", "limit", "lowered")

    def __init__(self, cap: int) -> None:
        self.cap = max(1, cap)
        self.limit = self.cap  # until the store shows it serves PUTs one at a time
        self.latencies: deque[float] = deque(maxlen=WINDOW)
        self.hold = 0  # PUTs to land before the limit may rise again
        self.lowered = 0  # times it was lowered (INFO persistence)

    def landed(self, seconds: float, peers: int) -> None:
        """A PUT took `seconds`, started with `peers - 1` others in flight."""
        lat = self.latencies
        lat.append(seconds)
        base = min(lat)
        if self.hold:
            self.hold -= 1
        if peers <= 1:
            # Alone: nothing to learn about parallelism; after the hold, try two.
            if self.limit == 1 and not self.hold and self.cap > 1:
                self.limit = 2
            return
        serial = (seconds / base - 1) / (peers - 1) if base > 0 else 0.0
        if serial >= SERIAL:
            if self.limit > 1:
                self.limit = max(1, min(self.limit, peers) - 1)
                self.lowered += 1
            self.hold = HOLD
        elif serial <= PARALLEL and not self.hold and self.limit < self.cap:
            self.limit += 1
