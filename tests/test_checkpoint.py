"""Checkpoint objects: built by a forked child from its copy-on-write snapshot
(the event loop keeps serving), identical to the in-process image, and taken
in-process when the child cannot be started."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import commands.families  # noqa: F401
from commands.dispatch import DISPATCHER
from flusher import checkpoint, segment
from flusher.checkpoint import checkpoint_object, image, load_image
from store import Store, WriteMeta, chains
from tests.conftest import ROOT
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


def test_the_child_runs_on_the_cpus_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """--checkpoint-cpulist (as Redis' bgsave-cpulist): the child moves to those
    CPUs, the server stays where it was; an empty list leaves the child on the
    server's."""
    store = _store()
    parent = os.getpid()
    mine = os.sched_getaffinity(0)
    one = frozenset({max(mine)})
    seen: list[set[int]] = []

    def where(st: Store) -> tuple[bytes, int]:
        assert os.getpid() != parent
        return json.dumps(sorted(os.sched_getaffinity(0))).encode(), 0

    monkeypatch.setattr(checkpoint, "image", where)
    for cpus in (one, frozenset()):
        _lsn, data = asyncio.run(checkpoint_object(store, cpus))
        raw = segment.decode(data, "test", segment.CHECKPOINT_MAGIC)[1]
        seen.append(set(json.loads(raw)))
    assert seen == [set(one), mine]
    assert os.sched_getaffinity(0) == mine


def test_cpu_lists_read_as_redis_writes_them() -> None:
    assert checkpoint.cpulist("") == frozenset()
    assert checkpoint.cpulist("1") == {1}
    assert checkpoint.cpulist("0-3,5") == {0, 1, 2, 3, 5}
    assert checkpoint.cpulist("0-7:2, 9") == {0, 2, 4, 6, 9}
    for bad in ("x", "3-1", "1-", "-1", "0-4:0", "a,1"):
        with pytest.raises(ValueError, match="is not a CPU list"):
            checkpoint.cpulist(bad)


def test_the_server_refuses_a_bad_cpu_list(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "proxy.cli", "serve", "--port", "0"]
    argv += ["--storage", f"file://{tmp_path}/data", "--checkpoint-cpulist", "1-0"]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode != 0
    assert "--checkpoint-cpulist: '1-0' is not a CPU list (like 0-3,5)" in out.stderr


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


# An image written before checkpoints went through Store.export_image (same
# records as `_golden_store`, in a fresh interpreter, so command codes are the
# ones a server starting up assigns). Existing checkpoints must keep loading (the
# version index then starts after them).
GOLDEN_IMAGE = bytes.fromhex(
    "88a36c736e07ac6c6173745f74696d655f6d73cf0000018bcfe56806a964617461626173657302aa696e6465"
    "785f6c736e73c438010000000000000002000000000000000300000000000000040000000000000005000000"
    "0000000006000000000000000700000000000000ab696e6465785f74696d6573c4380068e5cf8b0100000168"
    "e5cf8b0100000268e5cf8b0100000368e5cf8b0100000468e5cf8b0100000568e5cf8b0100000668e5cf8b01"
    "0000a9736e617073686f74739194c404736e617006cf0000018bcfe56805c4066465706c6f79a56578747261"
    "82a67461626c657390a86272616e6368657390a9636d645f6e616d657393a3736574a468736574a572707573"
    "689600c405706c61696ec40177c0929601cf0000018bcfe56800a37365749193a7726573746f7265c0c0c0c0"
    "9603cf0000018bcfe56802a37365749193a7726573746f7265c40176c09307c4026d65c403776879c0c09600"
    "c40374746cc40176cf0000018c0b8032009202a3736574c09600c404676f6e65c0c0929605cf0000018bcfe5"
    "6803a37365749193a7726573746f7265c0c0c0c09605cf0000018bcfe56804a364656c9193a7726573746f72"
    "65c40178c0c0c0c09601c4016882c40166c40131c40167c40132c09204a468736574c09601c4016cc7070192"
    "c40161c40162c09207a57270757368c0"
)
# The same state as the checkpoint writes it since the version index (index_keys,
# index_from) joined the header: it must stay byte for byte the same.
GOLDEN_IMAGE_INDEXED = bytes.fromhex(
    "8aa36c736e07ac6c6173745f74696d655f6d73cf0000018bcfe56806a964617461626173657302aa696e6465"
    "785f6c736e73c438010000000000000002000000000000000300000000000000040000000000000005000000"
    "0000000006000000000000000700000000000000ab696e6465785f74696d6573c4380068e5cf8b0100000168"
    "e5cf8b0100000268e5cf8b0100000368e5cf8b0100000468e5cf8b0100000568e5cf8b0100000668e5cf8b01"
    "0000aa696e6465785f6b65797397c405706c61696ec40374746cc405706c61696e919201c40168929200c404"
    "676f6e659200c404676f6e6590919201c4016caa696e6465785f66726f6d00a9736e617073686f74739194c4"
    "04736e617006cf0000018bcfe56805c4066465706c6f79a5657874726182a67461626c657390a86272616e63"
    "68657390a9636d645f6e616d657393a3736574a468736574a572707573689600c405706c61696ec40177c092"
    "9601cf0000018bcfe56800a37365749193a7726573746f7265c0c0c0c09603cf0000018bcfe56802a3736574"
    "9193a7726573746f7265c40176c09307c4026d65c403776879c0c09600c40374746cc40176cf0000018c0b80"
    "32009202a3736574c09600c404676f6e65c0c0929605cf0000018bcfe56803a37365749193a7726573746f72"
    "65c0c0c0c09605cf0000018bcfe56804a364656c9193a7726573746f7265c40178c0c0c0c09601c4016882c4"
    "0166c40131c40167c40132c09204a468736574c09601c4016cc7070192c40161c40162c09207a57270757368"
    "c0"
)
GOLDEN_SCRIPT = """
import sys
from flusher.checkpoint import image
from tests.test_checkpoint import _golden_store
sys.stdout.write(image(_golden_store())[0].hex())
"""


def _golden_store() -> Store:
    s = Store(databases=2)
    t = 1_700_000_000_000
    for r in (
        (1, t, ((0, b"plain", ("set", b"v", None)),), ("set",), None),
        (2, t + 1, ((0, b"ttl", ("set", b"v", t + 10**9)),), ("set",), None),
        (3, t + 2, ((0, b"plain", ("set", b"w", None)),), ("set",), WriteMeta(7, b"me", b"why")),
        (4, t + 3, ((1, b"h", ("hset", ((b"f", b"1"), (b"g", b"2")))),), ("hset",), None),
        (
            5,
            t + 4,
            ((0, b"gone", ("set", b"x", None)), (0, b"gone", ("del",))),
            ("set", "del"),
            None,
        ),
        (6, t + 5, ((0, None, ("seal", b"snap", b"deploy")),), ("ts.seal",), None),
        (7, t + 6, ((1, b"l", ("rpush", (b"a", b"b"))),), ("rpush",), None),
    ):
        s.replay(r)
    return s


def test_an_image_written_before_the_store_export_loads_and_is_written_the_same() -> None:
    fresh = Store(databases=2)
    assert load_image(fresh, GOLDEN_IMAGE, "golden") == 7
    assert _state(fresh) == _state(_golden_store())
    out = subprocess.run(
        [sys.executable, "-c", GOLDEN_SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert bytes.fromhex(out.stdout) == GOLDEN_IMAGE_INDEXED
    assert fresh.index_from == 8 and fresh.keys_written(0, 0, 7) is None
    indexed = Store(databases=2)
    assert load_image(indexed, GOLDEN_IMAGE_INDEXED, "golden") == 7
    assert _state(indexed) == _state(fresh)
    assert indexed.keys_written(0, 0, 7) == {b"plain", b"ttl", b"gone"}
    assert indexed.keys_written(1, 3, 7) == {b"h", b"l"}


def test_a_body_in_pieces_loads_as_in_one_and_its_length_is_checked() -> None:
    """Restart loads a checkpoint while a thread decompresses the rest of it: pieces
    much smaller than an item give the same store, and a body that does not
    decompress to the length its header gives is refused, not loaded short."""
    store = _store()
    for i in range(3000):
        store.dbs[1].data[b"k%d" % i] = b"v" * 50
    lsn, data = asyncio.run(checkpoint_object(store))
    header = segment.verify(data, "test", segment.CHECKPOINT_MAGIC)
    pieces = list(segment.body_chunks(data, header, "test", 64))
    assert len(pieces) > 100
    assert b"".join(pieces) == segment.decode(data, "test", segment.CHECKPOINT_MAGIC)[1]
    fresh = Store(databases=4)
    chunks = segment.body_chunks(data, header, "test", 64)
    assert checkpoint.load_image_chunks(fresh, chunks, header.raw_len, "test") == lsn
    assert _state(fresh) == _state(_loaded(data, lsn))
    for wrong in (header.raw_len - 1, header.raw_len + 1):
        bad = dataclasses.replace(header, raw_len=wrong)
        with pytest.raises(segment.CorruptObject, match="decompresses to"):
            list(segment.body_chunks(data, bad, "test", 64))


def test_keys_overwritten_by_sets_go_in_string_chain_items_and_load_the_same() -> None:
    """Strings whose versions are all plain string writes (a load of SETs over a
    bounded keyspace) are written as string-chain items of parallel arrays; the store
    loaded from the image is the one written, field by field, whatever mix of keys
    (metadata, expiries, floors, collections, deleted keys) surrounds them."""
    s, _sink = make_session(4, "versions:3")
    store = s.store
    for i in range(5000):
        DISPATCHER.execute(s, [b"SET", b"k%d" % (i % 700), b"v%d" % i])
        if i % 97 == 0:
            DISPATCHER.execute(s, [b"INCR", b"n%d" % (i % 5)])
            DISPATCHER.execute(s, [b"SET", b"e%d" % i, b"x", b"PX", b"100000000"])
            DISPATCHER.execute(s, [b"DEL", b"k%d" % ((i + 1) % 700)])
            DISPATCHER.execute(s, [b"HSET", b"h", b"f%d" % i, b"v"])
        if i % 500 == 0:
            DISPATCHER.execute(s, [b"TS.META", b"AUTHOR", b"ann"])
            DISPATCHER.execute(s, [b"SET", b"k%d" % (i % 700), b"authored"])
            DISPATCHER.execute(s, [b"TS.META", b"RESET"])
            DISPATCHER.execute(s, [b"SELECT", b"%d" % (i // 500 % 3)])
    items = list(store.export_image())
    strings = [it for it in items[1:] if type(it) is tuple and it[0] == "s"]
    assert strings and sum(len(it[2]) for it in strings) > 500
    raw, _count = image(store)
    fresh = Store(databases=4, history=store.history)
    assert load_image(fresh, raw, "test") == store.lsn
    assert _state(fresh) == _state(store)
    for db, again in zip(store.dbs, fresh.dbs, strict=True):
        assert dict(dict.items(again.chains)) == dict(dict.items(db.chains))
        assert again.used == db.used and again.floor_mark == db.floor_mark
    mem, again_mem = store.mem, fresh.mem
    assert (again_mem.main_bytes, again_mem.main_versions, again_mem.main_packed) == (
        mem.main_bytes,
        mem.main_versions,
        mem.main_packed,
    )
    # The image of the loaded store is the same bytes.
    assert image(fresh)[0] == raw
