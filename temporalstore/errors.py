"""Exceptions of the temporal API, each a redis-py error too (so `except redis.RedisError`
still catches them), and the translation of the server's error replies into them."""

from __future__ import annotations

import re

from redis.exceptions import ReadOnlyError, RedisError, ResponseError


class TemporalError(ResponseError):
    """An error reply of a TS.* verb."""


class PrunedError(TemporalError):
    """The point asked for is older than the key's retained history (`-PRUNED ...`)."""


class MergeConflictError(TemporalError):
    """TS.MERGE with STRATEGY FAIL found keys changed on both sides; nothing was applied."""

    def __init__(self, message: str, keys: list[str]) -> None:
        super().__init__(message)
        self.keys = keys


class SnapshotNotFoundError(TemporalError):
    """No snapshot of that name is sealed."""


class BranchNotFoundError(TemporalError):
    """No branch of that name exists."""


class AlreadyExistsError(TemporalError):
    """A snapshot, branch or table of that name exists already."""


class ReadOnlyViewError(TemporalError, ReadOnlyError):
    """A write was sent through a read-only view (a past version, time or snapshot)."""


_CONFLICT = re.compile(r"CONFLICT merging .*: changed on both sides: (.*)$", re.S)


def translate(exc: RedisError) -> RedisError:
    """The exception of ours for a redis-py error reply, or the error itself when none fits."""
    text = str(exc)
    if isinstance(exc, ReadOnlyError):
        return ReadOnlyViewError(text)
    if not isinstance(exc, ResponseError) or isinstance(exc, TemporalError):
        return exc
    if text.startswith("PRUNED"):
        return PrunedError(text)
    m = _CONFLICT.match(text)
    if m:
        return MergeConflictError(text, m.group(1).split(", "))
    if text.startswith("no such snapshot"):
        return SnapshotNotFoundError(text)
    if text.startswith("no such branch"):
        return BranchNotFoundError(text)
    if text.endswith("already exists"):
        return AlreadyExistsError(text)
    return exc
