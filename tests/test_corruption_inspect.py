"""Corruption of checkpoints and manifests (segments: tests/test_durability.py): the
server refuses to start naming the damaged object, and `temporalstore inspect`
reports it. Then a sweep: single-byte flips all over a segment and a checkpoint, each
one caught by inspect's verification, naming the object."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from flusher.objectstore import LocalObjectStore
from replay.inspect import inspect as inspect_objects
from tests.conftest import start_temporalstore
from tests.reliability import client, figure, sized
from tests.test_durability import _start_fails, inspect, kill9


def store_with_every_kind(tmp_path: Path) -> tuple[list[str], Path]:
    """A prefix holding a manifest, a checkpoint and segments after it (the server
    was killed, so nothing was tidied up at shutdown)."""
    storage = ["--storage", f"file://{tmp_path}/store"]
    p = start_temporalstore(storage)
    r = client(p.port)
    try:
        for i in range(100):
            r.set(f"k:{i}", i)
        assert r.execute_command("SAVE") is True
        for i in range(100, 150):
            r.hset("h", f"f{i}", i)
        assert r.execute_command("WAITAOF", "1", "0", "10000") == [1, 0]
        kill9(p)
    finally:
        r.close()
        p.stop()
    return storage, tmp_path / "store"


def newest(root: Path, pattern: str) -> Path:
    return sorted(root.glob(pattern))[-1]


def flip_middle(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1 :]


def truncate(data: bytes) -> bytes:
    return data[: len(data) * 2 // 3]


def not_json(data: bytes) -> bytes:
    return b"[" + data[1:]


DAMAGE: list[tuple[str, str, Callable[[bytes], bytes]]] = [
    ("checkpoint-flip", "checkpoints/*/store.ckpt", flip_middle),
    ("checkpoint-truncate", "checkpoints/*/store.ckpt", truncate),
    ("manifest-truncate", "manifest/*", truncate),
    ("manifest-not-json", "manifest/*", not_json),
]


@pytest.mark.parametrize("name,pattern,damage", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damaged_object_refuses_start_and_inspect_names_it(
    tmp_path: Path, name: str, pattern: str, damage: Callable[[bytes], bytes]
) -> None:
    storage, root = store_with_every_kind(tmp_path)
    target = newest(root, pattern)
    target.write_bytes(damage(target.read_bytes()))
    err = _start_fails(storage)
    assert target.name in err, err
    report = inspect(storage)
    assert report.returncode == 1, report.stdout
    assert any(
        line.strip().startswith("CORRUPT") and target.name in line
        for line in report.stdout.splitlines()
    ), report.stdout


SWEPT = {
    "segment": "segments/*.seg",
    "checkpoint": "checkpoints/*/store.ckpt",
    "manifest": "manifest/*",
}


def test_every_flipped_byte_is_reported(tmp_path: Path) -> None:
    """One bit flipped anywhere in an object: inspect must report that object. The
    largest of each kind; in the short run the first 64 bytes and a sample of the
    rest, in the soak every byte."""
    _storage, root = store_with_every_kind(tmp_path)
    objects = LocalObjectStore(root)
    rng = random.Random(0)
    limit = sized(150, 100_000)
    flips: dict[str, int] = {}
    missed: dict[str, list[int]] = {}
    for kind, pattern in SWEPT.items():
        target = max(root.glob(pattern), key=lambda f: f.stat().st_size)
        good = target.read_bytes()
        positions = list(range(len(good)))
        if len(positions) > limit:
            positions = positions[:64] + rng.sample(positions[64:], limit - 64)
        missed[kind] = []
        for i in positions:
            target.write_bytes(
                good[:i] + bytes([good[i] ^ (1 << rng.randrange(8))]) + good[i + 1 :]
            )
            out: list[str] = []
            problems = asyncio.run(inspect_objects(objects, out))
            if not problems or not any("CORRUPT" in o and target.name in o for o in out):
                missed[kind].append(i)
        target.write_bytes(good)
        flips[kind] = len(positions)
    figure(
        "corruption",
        **{f"{kind}_flips": n for kind, n in flips.items()},
        **{f"{kind}_missed": len(m) for kind, m in missed.items()},
        process_cases=len(DAMAGE),
    )
    for kind, m in missed.items():
        assert not m, f"{kind}: {len(m)} of {flips[kind]} flips not reported (at {m[:10]})"
