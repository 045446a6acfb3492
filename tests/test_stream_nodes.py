"""Stream node sizes set by CONFIG SET stream-node-max-entries / stream-node-max-bytes:
approximate trimming (`~`, LIMIT) removes whole nodes, so the counts it returns show
whether our node boundaries are redis-server's. Differential (RESP2 and RESP3), and
across a restart of our server (a node keeps the size it was built with, as in an RDB
file)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.conftest import Differ, ServerProcess, start_temporalstore
from tests.resp_client import RawClient

DEFAULTS = {"stream-node-max-entries": "100", "stream-node-max-bytes": "4096"}


@contextlib.contextmanager
def node_config(diff: Differ, **values: str) -> Iterator[None]:
    """Set node-size parameters on both servers; the defaults again afterwards."""
    try:
        for name, value in values.items():
            diff.check("CONFIG", "SET", name.replace("_", "-"), value)
        yield
    finally:
        for name, value in DEFAULTS.items():
            diff.both("CONFIG", "SET", name, value)


def add_entries(diff: Differ, key: str, count: int, *fv: str) -> None:
    """XADD entries 1-0 ... count-0 with these fields on both servers."""
    for i in range(1, count + 1):
        diff.check("XADD", key, f"{i}-0", *fv)


def test_xadd_limit_consecutive_calls(diff: Differ) -> None:
    with node_config(diff, stream_node_max_entries="10"):
        for _ in range(100):
            diff.both("XADD", "s", "*", "xitem", "v")
        diff.run("""
            XLEN s
            XTRIM s MAXLEN ~ 95
            XLEN s
        """)
        for _ in range(2):
            diff.both("XADD", "s", "MAXLEN", "~", "55", "LIMIT", "30", "*", "xitem", "v")
            diff.check("XLEN", "s")
        diff.run("""
            XTRIM s MINID ~ 0 LIMIT 5
            XTRIM s MAXLEN = 50 LIMIT 5
            XTRIM s MAXLEN 50 LIMIT 30
        """)


def test_limit_caps_entries_removed(diff: Differ) -> None:
    with node_config(diff, stream_node_max_entries="2"):
        diff.run("""
            XADD s 1-0 xitem v
            XADD s 2-0 xitem v
            XADD s 3-0 xitem v
            XTRIM s MAXLEN ~ 0 LIMIT 1
            XTRIM s MAXLEN ~ 0 LIMIT 2
            XLEN s
            XTRIM s MINID ~ 9 LIMIT 1
            XTRIM s MINID ~ 9 LIMIT 0
            XLEN s
        """)


def test_default_limit_follows_node_entries(diff: Differ) -> None:
    # Without LIMIT, "~" removes at most 100 nodes' worth of entries.
    with node_config(diff, stream_node_max_entries="1"):
        add_entries(diff, "s", 102, "xitem", "v")
        diff.run("""
            XTRIM s MAXLEN ~ 1
            XLEN s
            XTRIM s MAXLEN 1
            XLEN s
        """)


def test_tombstones_fill_nodes(diff: Differ) -> None:
    # Deleted entries still count towards a node's entries.
    with node_config(diff, stream_node_max_entries="5"):
        for i in range(1, 31):
            diff.check("XADD", "s", f"{i}-0", "f", "v")
            if i % 4 == 0:
                diff.check("XDEL", "s", f"{i - 1}-0")
        diff.run("""
            XLEN s
            XTRIM s MAXLEN ~ 20
            XLEN s
            XTRIM s MAXLEN ~ 12 LIMIT 8
            XLEN s
            XTRIM s MINID ~ 27
            XRANGE s - + COUNT 2
        """)


def test_node_max_bytes_and_zero_values(diff: Differ) -> None:
    # A smaller byte limit closes nodes sooner; 0 means no limit of that kind.
    with node_config(diff, stream_node_max_bytes="200"):
        for i in range(1, 41):
            diff.check("XADD", "s", f"{i}-0", "f", "x" * (i % 7 * 10))
        diff.run("""
            CONFIG GET stream-node-max-bytes
            XTRIM s MAXLEN ~ 30
            XTRIM s MAXLEN ~ 12
            XLEN s
        """)
    with node_config(diff, stream_node_max_entries="0", stream_node_max_bytes="0"):
        add_entries(diff, "t", 250, "f", "v")
        diff.run("""
            XTRIM t MAXLEN ~ 10
            XTRIM t MAXLEN ~ 10 LIMIT 300
            XLEN t
        """)
    with node_config(diff, stream_node_max_entries="0"):
        add_entries(diff, "u", 300, "f", "v")
        diff.run("""
            XTRIM u MAXLEN ~ 10
            XLEN u
        """)


SCRIPT: list[tuple[str, ...]] = [("XADD", "xs", f"{i}-0", "f", "v") for i in range(1, 101)]
SCRIPT += [("XDEL", "xs", "3-0", "14-0", "15-0")]
PROBES = [
    ("XADD", "xs", "MAXLEN", "~", "55", "LIMIT", "30", "101-0", "f", "v"),
    ("XLEN", "xs"),
    ("XTRIM", "xs", "MAXLEN", "~", "20"),
    ("XLEN", "xs"),
]


def _reference(redis_ref: ServerProcess) -> list[bytes]:
    """redis-server: nodes of 10 built, then the setting back to 100 (a node keeps
    its layout, as it does through an RDB file)."""
    ref = RawClient(redis_ref.port)
    try:
        ref.call("DEL", "xs")
        ref.call("CONFIG", "SET", "stream-node-max-entries", "10")
        for args in SCRIPT:
            ref.call(*args)
        ref.call("CONFIG", "SET", "stream-node-max-entries", "100")
        return [ref.call(*args) for args in PROBES]
    finally:
        ref.call("CONFIG", "SET", "stream-node-max-entries", "100")
        ref.close()


@pytest.mark.parametrize("stop", ["kill", "shutdown"])
def test_node_layout_survives_restart(
    redis_ref: ServerProcess, tmp_path: pytest.TempPathFactory, stop: str
) -> None:
    """Built under stream-node-max-entries 10, then the server stops (SIGKILL: the
    XADDs are replayed from the log; SHUTDOWN: read back from a checkpoint) and starts
    again with the default 100: trimming still sees nodes of 10, as redis-server does
    after a restart."""
    expected = _reference(redis_ref)
    workdir = tmp_path
    ours = start_temporalstore(workdir=workdir)  # type: ignore[arg-type]
    try:
        c = RawClient(ours.port)
        c.call("CONFIG", "SET", "stream-node-max-entries", "10")
        for args in SCRIPT:
            c.call(*args)
        c.call("TS.WAITDURABLE", 5000)
        if stop == "kill":
            ours.proc.kill()
        else:
            with contextlib.suppress(ConnectionError):
                c.call("SHUTDOWN")
        ours.proc.wait(30)
        c.close()
    finally:
        ours.stop()
    again = start_temporalstore(workdir=workdir)  # type: ignore[arg-type]
    try:
        c = RawClient(again.port)
        assert c.call("CONFIG", "GET", "stream-node-max-entries").endswith(b"$3\r\n100\r\n")
        assert [c.call(*args) for args in PROBES] == expected
        c.close()
    finally:
        again.stop()
