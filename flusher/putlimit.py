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
parallel, 1 when it waited for all the others. A PUT less than `MIN_EXCESS_S` over
that baseline counts as parallel: a store that fast gains and loses little either
way, and such differences are mostly the event loop's own noise. The limit follows
a moving average of the measure, so that one slow PUT of a parallel store (S3's
latencies vary) does not lower it. A serial average lowers the limit by one, down
to one, and holds it there for a while (the average starts again from zero); a
parallel one raises it again, up to the cap (`Flusher.max_in_flight`). At one PUT
in flight the limit is raised to two after the hold, so a store that has become
parallel (less load on its side) is found again.
"""

from __future__ import annotations

from collections import deque

WINDOW = 64
"""PUT latencies the baseline (their minimum) is taken over."""

HOLD = 32
"""PUTs that land after the limit was lowered before it may be raised again."""

SERIAL = 0.6
"""Average serialness at or over which the limit is lowered."""

PARALLEL = 0.3
"""Serialness at or under which the limit may rise (after the hold): the PUT's own
and the average's."""

MIN_EXCESS_S = 0.001
"""Latency over the baseline below which a PUT counts as parallel."""

WEIGHT = 0.25
"""Weight of each PUT in the moving average of serialness."""


class PutLimit:
    """The number of PUTs that may be in flight, from the latencies of those that
    landed (`landed`)."""

    __slots__ = ("cap", "hold", "latencies", "limit", "lowered", "serial")

    def __init__(self, cap: int) -> None:
        self.cap = max(1, cap)
        self.limit = self.cap  # until the store shows it serves PUTs one at a time
        self.latencies: deque[float] = deque(maxlen=WINDOW)
        self.hold = 0  # PUTs to land before the limit may rise again
        self.lowered = 0  # times it was lowered (INFO persistence)
        self.serial = 0.0  # moving average of the serialness of PUTs run together

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
        excess = seconds - base
        serial = 0.0
        if excess >= MIN_EXCESS_S and base > 0:
            serial = min(2.0, excess / base / (peers - 1))
        self.serial += WEIGHT * (serial - self.serial)
        if self.serial >= SERIAL:
            if self.limit > 1:
                self.limit = max(1, min(self.limit, peers) - 1)
                self.lowered += 1
            self.hold = HOLD
            self.serial = 0.0
        elif max(serial, self.serial) <= PARALLEL and not self.hold and self.limit < self.cap:
            self.limit += 1
