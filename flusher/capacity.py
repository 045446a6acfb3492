"""The unflushed backlog against its cap: asked before every write (compiled, so the
check is a C call, not a Python method)."""

from __future__ import annotations

from typing import Any, Final

MIN_RECORD_BYTES: Final = 16
"""The least an encoded record takes (its array header, LSN, commit time, ops,
command names and metadata): how records not yet encoded count against the cap."""


class Capacity:
    """`pending_bytes` (encoded, not yet durable) plus the records of `raw` (not yet
    encoded) against `cap` (max-unflushed-bytes); kept by `flusher.Flusher`."""

    def __init__(self, raw: list[Any], cap: int) -> None:
        self.raw = raw
        self.cap = cap
        self.pending_bytes = 0

    def over(self) -> bool:
        return self.pending_bytes + MIN_RECORD_BYTES * len(self.raw) > self.cap
