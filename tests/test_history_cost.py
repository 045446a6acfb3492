"""History at bounded cost (issue 11): what a write costs does not grow with the
versions a seal or a branch pins. Asserted by counting the work, never by timing."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import hiredis
import pytest

from commands.replies import ErrorReply
from commands.resp import encode_reply
from store import native
from tests.conftest import ROOT
from tests.helpers import make_session, run


class CountingChain(list[Any]):
    """A version chain that counts how many of its entries are read by index."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        CountingChain.reads += 1
        return super().__getitem__(i)


@pytest.mark.parametrize("history", ["versions:4", "ms:1"])
@pytest.mark.parametrize("pin", ["seal", "branch"])
def test_writes_after_a_pin_look_at_log_versions(pin: str, history: str) -> None:
    CountingChain.reads = 0
    s, _sink = make_session(history=history)
    run(s, "SET", "a", "0")
    run(s, "SET", "a", "1")
    chains = s.store.dbs[0].chains
    chains[b"a"] = CountingChain(chains[b"a"])
    if pin == "seal":
        assert run(s, "TS.SEAL", "before") is not None
    else:
        run(s, "TS.BRANCH", "CREATE", "what-if")
    writes = 4000
    for i in range(writes):
        run(s, "SET", "a", str(i))
    # A rescan per write would read about writes/2 entries each time (millions in
    # all); bisecting reads about log2(versions) per write.
    chain = chains[b"a"]
    assert type(chain) is CountingChain
    assert CountingChain.reads < writes * 30, CountingChain.reads
    assert len(chain) >= writes  # everything after the pin is kept


def test_unseal_lets_trimming_resume() -> None:
    s, _sink = make_session(history="versions:4")
    run(s, "SET", "a", "0")
    run(s, "TS.SEAL", "before")
    for i in range(100):
        run(s, "SET", "a", str(i))
    assert len(s.store.dbs[0].chains[b"a"]) == 100  # every version after the seal
    run(s, "TS.UNSEAL", "before")
    run(s, "SET", "a", "last")
    # The pin is gone, so the next trim goes back to the policy's bound.
    assert len(s.store.dbs[0].chains[b"a"]) <= 8
    assert run(s, "GET", "a") == b"last"


def test_the_sealed_version_stays_readable_under_trimming() -> None:
    s, _sink = make_session(history="versions:4")
    run(s, "SET", "a", "sealed")
    run(s, "TS.SEAL", "snap")
    for i in range(300):
        run(s, "SET", "a", str(i))
    assert run(s, "TS.ASOF", "a", "SNAPSHOT", "snap") == b"sealed"
    assert run(s, "TS.ASOF", "a", "BACK", "1") == b"298"


def _growing_hash(versions: int) -> Any:
    s, _sink = make_session(history="all")
    for i in range(versions):
        run(s, "HSET", "h", f"f{i}", str(i))
    return s


def test_history_withvalues_walks_each_version_once(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """TS.HISTORY WITHVALUES on a hash that gained one field per version: one undo
    per step, not a rebuild (a copy of the whole hash) per listed version."""
    import store.asof
    import store.ops

    if native.is_compiled(store.asof):
        # Compiled, a call inside the group does not look `copy_value` up, so no patch
        # can count the copies: the count runs on Python (the same code).
        test = f"{__file__}::{request.node.name}"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
            env={**os.environ, "TEMPORALSTORE_PURE": "1"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:]
        return
    copied = [0]
    real_copy = store.asof.copy_value

    def counting_copy(v: Any) -> Any:
        copied[0] += len(v) if hasattr(v, "__len__") else 1
        return real_copy(v)

    monkeypatch.setattr(store.asof, "copy_value", counting_copy)
    monkeypatch.setattr(store.ops, "copy_value", counting_copy)
    n = 2000
    s = _growing_hash(n)
    copied[0] = 0
    reply = run(s, "TS.HISTORY", "h", "WITHVALUES")
    # Past 1,024 versions the reply is built in slices and comes encoded whole.
    reader = hiredis.Reader()
    reader.feed(reply)
    entries = [dict(zip(e[::2], e[1::2], strict=True)) for e in reader.gets()]
    assert len(entries) == n
    assert entries[-1][b"value"] == [
        x for i in range(n) for x in (f"f{i}".encode(), str(i).encode())
    ]
    assert entries[0][b"value"] == [b"f0", b"0"]
    # A rebuild per version copies about n*n/2 fields (2,000,000 here); walking
    # back copies the newest state once.
    assert 0 < copied[0] < 4 * n, copied[0]


def _naive_history_values(s: Any, key: str, reply: list[Any]) -> list[Any]:
    from commands.points import value_as_of
    from commands.temporal import read_shape

    return [
        _unordered(key, encode_reply(read_shape(s, value_as_of(s, key.encode(), v)), s.resp))
        for v in (item[b"version"] for item in reply)
    ]


def _unordered(key: str, encoded: bytes) -> Any:
    """An encoded value, decoded so that hash and set order do not count."""
    reader = hiredis.Reader()
    reader.feed(encoded)
    value = reader.gets()
    if key == "h" and value is not None:
        return dict(zip(value[::2], value[1::2], strict=True))
    if key == "t" and value is not None:
        return set(value)
    return value


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["REV"],
        ["COUNT", "7"],
        ["REV", "COUNT", "5"],
        ["FROM", "VERSION", "10", "TO", "VERSION", "40"],
    ],
)
def test_history_withvalues_equals_an_as_of_read_per_version(options: list[str]) -> None:
    s, _sink = make_session(history="all")
    s.store.snapshot_every = 4  # full copies in the walk's way
    for i in range(60):
        run(s, "HSET", "h", f"f{i % 9}", str(i))
        if i % 7 == 0:
            run(s, "HDEL", "h", f"f{(i + 3) % 9}")
        if i % 11 == 0:
            run(s, "DEL", "h")
        run(s, "RPUSH", "l", str(i))
        if i % 5 == 0:
            run(s, "LPOP", "l")
        run(s, "ZADD", "z", str(i % 4), f"m{i % 6}")
        run(s, "SADD", "t", f"m{i % 8}")
        run(s, "SREM", "t", f"m{(i + 2) % 8}")
        run(s, "SET", "k", str(i))
        if i % 13 == 0:
            run(s, "PEXPIRE", "k", "100000")
    for key in ("h", "l", "z", "t", "k"):
        reply = run(s, "TS.HISTORY", key, *options, "WITHVALUES")
        assert reply, key
        got = [_unordered(key, item[b"value"]) for item in reply]
        assert got == _naive_history_values(s, key, reply)
    run(s, "TS.CHECKOUT", "AT", "VERSION", "150")
    reply = run(s, "TS.HISTORY", "h", *options, "WITHVALUES")
    got = [_unordered("h", item[b"value"]) for item in reply]
    assert got == _naive_history_values(s, "h", reply)


class _CountingChain(list[Any]):
    """A chain that counts the entries read from it."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        got = super().__getitem__(i)
        _CountingChain.reads += len(got) if isinstance(i, slice) else 1
        return got


@pytest.mark.parametrize("options", [["COUNT", "10"], ["REV", "COUNT", "10"]])
def test_history_count_reads_only_what_it_lists(options: list[str]) -> None:
    """COUNT stops the listing: O(log versions + COUNT), whatever the chain's length."""
    s, _sink = make_session(history="all")
    for i in range(20_000):
        run(s, "SET", "k", str(i))
    chains = s.store.dbs[0].chains
    chains[b"k"] = _CountingChain(chains[b"k"])
    _CountingChain.reads = 0
    reply = run(s, "TS.HISTORY", "k", *options, "WITHVALUES")
    assert len(reply) == 10
    first = reply[0][b"version"]
    assert first == (20_000 if "REV" in options else 1)
    assert _CountingChain.reads < 200, _CountingChain.reads  # bisects, then 10 entries


def test_history_values_past_proto_max_bulk_len_are_refused() -> None:
    """One reply's values are bounded as one bulk string is: past proto-max-bulk-len
    the verb answers an error that says how to page, and COUNT pages within it."""
    s, _sink = make_session(history="all")
    big = "x" * 300_000
    for i in range(8):
        run(s, "SET", "k", big + str(i))
    run(s, "CONFIG", "SET", "proto-max-bulk-len", "1mb")
    reply = run(s, "TS.HISTORY", "k", "WITHVALUES")
    assert reply == ErrorReply(
        b"ERR TS.HISTORY values would be larger than proto-max-bulk-len (1048576 bytes): "
        b"page them with COUNT and FROM"
    )
    page = run(s, "TS.HISTORY", "k", "WITHVALUES", "COUNT", "3")
    assert [e[b"version"] for e in page] == [1, 2, 3]
    rest = run(s, "TS.HISTORY", "k", "FROM", "VERSION", "4", "WITHVALUES", "COUNT", "3")
    assert [e[b"version"] for e in rest] == [4, 5, 6]
