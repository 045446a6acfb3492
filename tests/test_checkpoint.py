"""Checkpoint objects: built by a forked child from its copy-on-write snapshot
(the event loop keeps serving), identical to the in-process image, and taken
in-process when the child cannot be started."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

import commands.families  # noqa: F401
from commands.dispatch import DISPATCHER
from flusher import checkpoint, segment
from flusher.checkpoint import checkpoint_object, image, load_image
from store import Store, chains
from tests.helpers import make_session


def _store() -> Store:
    s, _sink = make_session(4)
    store = s.store
    for argv in (
        ["SET", "once", "v"],
        ["SET", "twice", "a"],
        ["SET", "twice", "b"],
        ["HSET", "h", "f", "1", "g", "2"],
        ["SET", "ttl", "x", "EX", "1000"],
        ["RPUSH", "l", "a", "b"],
        ["SET", "gone", "x"],
        ["DEL", "gone"],
        ["TS.SEAL", "s1"],
    ):
        DISPATCHER.execute(s, [a.encode() for a in argv])
    return store


def _loaded(data: bytes, lsn: int) -> Store:
    _header, raw = segment.decode(data, "test", segment.CHECKPOINT_MAGIC)
    fresh = Store(databases=4)
    assert load_image(fresh, raw, "test") == lsn
    return fresh


def _state(store: Store) -> Any:
    return [
        (dict(db.data), dict(db.expires), dict(db.chains.items()), dict(db.floors))
        for db in store.dbs
    ]


def test_the_child_builds_the_same_image(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store()
    parent = os.getpid()
    real_image = checkpoint.image

    def child_only(st: Store) -> tuple[bytes, int]:
        assert os.getpid() != parent, "the image was built in the serving process"
        return real_image(st)

    monkeypatch.setattr(checkpoint, "image", child_only)
    lsn, data = asyncio.run(checkpoint_object(store))
    assert lsn == store.lsn
    _header, raw = segment.decode(data, "test", segment.CHECKPOINT_MAGIC)
    assert raw == real_image(store)[0]
    assert _state(_loaded(data, lsn)) == _state(store)


def test_in_process_when_fork_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store()

    def no_fork() -> int:
        raise OSError("no fork here")

    monkeypatch.setattr(os, "fork", no_fork)
    lsn, data = asyncio.run(checkpoint_object(store))
    assert _state(_loaded(data, lsn)) == _state(store)
    assert image(store)[0] == segment.decode(data, "t", segment.CHECKPOINT_MAGIC)[1]


def test_in_process_when_the_child_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store()
    parent = os.getpid()
    real_image = checkpoint.image

    def fails_in_child(st: Store) -> tuple[bytes, int]:
        if os.getpid() != parent:
            raise RuntimeError("child breaks")
        return real_image(st)

    monkeypatch.setattr(checkpoint, "image", fails_in_child)
    lsn, data = asyncio.run(checkpoint_object(store))
    assert _state(_loaded(data, lsn)) == _state(store)


def test_packed_versions_from_a_process_with_other_command_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Packed versions name their command by a per-process code; a checkpoint
    carries its table and a process that numbered its commands otherwise
    translates them."""
    store = _store()
    expected = _state(store)
    raw, _count = image(store)
    monkeypatch.setattr(chains, "_cmd_names", ["xadd", "rpush"])
    monkeypatch.setattr(chains, "_cmd_codes", {"xadd": 0, "rpush": 1})
    fresh = Store(databases=4)
    load_image(fresh, raw, "test")
    assert _state(fresh) == expected
    assert fresh.dbs[0].chains.born(b"once") == (1, "set")
