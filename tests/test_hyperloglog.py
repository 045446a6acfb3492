"""Differential tests of PFADD, PFCOUNT, PFMERGE and PFDEBUG against redis-server,
RESP2 and RESP3: the counts and the exact bytes of the values (sparse and dense), the
errors of corrupt values, and the versions these writes make."""

from __future__ import annotations

import random
from pathlib import Path

from tests.conftest import Differ, ServerProcess, start_temporalstore
from tests.resp_client import RawClient


def elements(rng: random.Random, n: int, prefix: str = "e") -> list[str]:
    return [f"{prefix}{rng.random()}" for _ in range(n)]


def test_pfadd_pfcount_basics(diff: Differ) -> None:
    diff.run("""
        PFADD hll
        EXISTS hll
        GET hll
        OBJECT ENCODING hll
        PFCOUNT hll
        GET hll
        PFADD hll a b c
        GET hll
        PFADD hll a b c
        PFADD hll ""
        PFCOUNT hll
        GETRANGE hll 15 15
        PFADD hll 1 2 3
        GETRANGE hll 15 15
        PFCOUNT hll
        PFCOUNT missing
        PFCOUNT missing other
        PFCOUNT hll missing
        PFDEBUG ENCODING hll
        PFDEBUG DECODE hll
        SET foo bar
        PFADD foo 1
        PFCOUNT foo
        PFCOUNT hll foo
        PFMERGE bar foo
        PFMERGE foo hll
        RPUSH l a
        PFADD l a
        PFCOUNT l
        PFCOUNT hll l
        PFMERGE hll l
        PFDEBUG ENCODING l
        PFDEBUG ENCODING nokey
        PFDEBUG FOO hll
        PFDEBUG FOO nokey
        PFDEBUG GETREG hll extra
        PFADD
        PFCOUNT
        PFMERGE
    """)


def test_pfadd_sizes_exact_bytes(diff: Differ) -> None:
    """10, 1,000 and 100,000 elements: the values' bytes before and after PFCOUNT
    fills the cached count, sparse and dense, and PFDEBUG's views of them."""
    rng = random.Random(7)
    for n in (10, 1000, 100_000):
        key = f"h{n}"
        items = elements(rng, n)
        for i in range(0, n, 25_000):
            diff.check("PFADD", key, *items[i : i + 25_000])
        diff.check("GET", key)
        diff.check("PFDEBUG", "ENCODING", key)
        diff.check("PFCOUNT", key)
        diff.check("GET", key)
        diff.check("PFADD", key, *items[:5])  # nothing new: 0, the cache stays
        diff.check("GET", key)
    diff.check("PFDEBUG", "DECODE", "h10")
    diff.check("PFDEBUG", "DECODE", "h1000")
    diff.check("PFDEBUG", "DECODE", "h100000")
    diff.check("PFDEBUG", "GETREG", "h1000")
    diff.check("PFDEBUG", "ENCODING", "h1000")  # GETREG made it dense
    diff.check("GET", "h1000")


def test_sparse_to_dense_promotion(diff: Differ) -> None:
    """Small PFADDs past hll-sparse-max-bytes (3000 and a smaller setting), comparing
    the bytes as the sparse code grows and when it turns dense."""
    rng = random.Random(11)
    for max_bytes, key in (("3000", "grow"), ("200", "small")):
        diff.check("CONFIG", "SET", "hll-sparse-max-bytes", max_bytes)
        for i in range(600):
            diff.check("PFADD", key, *elements(rng, 4))
            if i % 40 == 0:
                diff.check("GET", key)
                diff.check("PFCOUNT", key)
        diff.check("PFDEBUG", "ENCODING", key)
        diff.check("GET", key)
    diff.check("CONFIG", "SET", "hll-sparse-max-bytes", "3000")


def test_pfmerge_and_union_counts(diff: Differ) -> None:
    rng = random.Random(5)
    diff.run("""
        PFADD a{t} a b c
        PFADD b{t} b c d
        PFADD c{t} c d e
        PFMERGE m{t} a{t} b{t} c{t}
        PFCOUNT m{t}
        GET m{t}
        PFCOUNT a{t} b{t} c{t}
        PFMERGE a{t}
        GET a{t}
        PFMERGE empty{t}
        GET empty{t}
        PFMERGE empty{t} nothing{t}
        PFCOUNT empty{t}
    """)
    for i in range(12):
        small, big = f"s{i}", f"b{i}"
        diff.check("PFADD", small, *elements(rng, rng.randrange(0, 300), "s"))
        diff.check("PFADD", big, *elements(rng, rng.randrange(0, 4000), "b"))
        if i % 3 == 0:
            diff.check("PFDEBUG", "TODENSE", small)
            diff.check("PFDEBUG", "TODENSE", small)
        diff.check("PFMERGE", f"d{i}", small, big)
        diff.check("GET", f"d{i}")
        diff.check("PFMERGE", small, big)  # into an existing key
        diff.check("GET", small)
        diff.check("PFCOUNT", small, big, "d0")
        diff.check("PFCOUNT", f"d{i}")
        diff.check("GET", f"d{i}")


def test_corrupt_values(diff: Differ) -> None:
    diff.run(r"""
        PFADD hll a b c
        APPEND hll hello
        PFCOUNT hll
        PFADD hll x
        PFMERGE m hll
        PFCOUNT hll other
        DEL hll
        PFADD hll a b c
        SETRANGE hll 0 0123
        PFCOUNT hll
        PFADD hll x
        DEL hll
        PFADD hll a b c
        SETRANGE hll 4 x
        PFCOUNT hll
        DEL hll
        PFADD hll a b c
        SETRANGE hll 4 "\x00"
        PFCOUNT hll
        PFDEBUG ENCODING hll
        SET short HYLL
        PFCOUNT short
        SET sparse "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe"
        PFCOUNT sparse
        PFADD sparse a
        PFDEBUG TODENSE sparse
        PFDEBUG GETREG sparse
        PFDEBUG DECODE sparse
        SET cached "HYLL\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00garbage"
        PFCOUNT cached
        PFCOUNT cached other
        SET toolong "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff\x7f\xff"
        PFCOUNT toolong
        PFMERGE x toolong
    """)
    rng = random.Random(3)
    for _ in range(60):
        diff.check("DEL", "fz")
        diff.check("PFADD", "fz", *elements(rng, rng.randrange(1, 2500)))
        for _ in range(rng.randrange(1, 4)):
            length = int(diff.check("STRLEN", "fz")[1:-2])
            diff.check("SETRANGE", "fz", str(rng.randrange(length)), bytes([rng.randrange(256)]))
        diff.check("PFCOUNT", "fz")
        diff.check("PFADD", "fz", "x", "y")
        diff.check("GET", "fz")
        diff.check("PFCOUNT", "fz", "other")


def test_pf_writes_are_versions(ts_server: ServerProcess) -> None:
    """PFADD and PFMERGE make versions TS.ASOF reads back byte for byte; so does
    PFCOUNT when it fills the cached count; a PFADD that changes nothing makes none."""
    c = RawClient(ts_server.port)
    try:
        c.call("DEL", "vp", "vq")
        seen = []
        for cmd in (
            ("PFADD", "vp", "a", "b"),
            ("PFCOUNT", "vp"),
            ("PFADD", "vp", *[f"x{i}" for i in range(50)]),
            ("PFMERGE", "vq", "vp"),
            ("PFDEBUG", "TODENSE", "vq"),
        ):
            c.call(*cmd)
            key = cmd[2] if cmd[0] == "PFDEBUG" else cmd[1]
            seen.append((int(c.call("TS.VERSION")[1:-2]), key, c.call("GET", key)))
        assert c.call("PFADD", "vp", "a") == b":0\r\n"
        for v, key, value in seen:
            assert c.call("TS.ASOF", key, "VERSION", str(v)) == value
        hist = c.call("TS.HISTORY", "vp")
        assert hist.count(b"pfadd") == 2 and hist.count(b"pfcount") == 1
        assert c.call("PFCOUNT", "vp") == b":52\r\n"  # fills the cache PFADD emptied
        assert c.call("TS.HISTORY", "vp").count(b"pfcount") == 2
        assert c.call("PFCOUNT", "vp") == b":52\r\n"  # the cache is valid: no version
        assert c.call("TS.HISTORY", "vp").count(b"pfcount") == 2
    finally:
        c.call("DEL", "vp", "vq")
        c.close()


def test_hll_values_survive_a_restart(tmp_path: Path) -> None:
    """The partial writes (only changed bytes) replay to the same values."""
    p = start_temporalstore(workdir=tmp_path)
    try:
        c = RawClient(p.port)
        rng = random.Random(9)
        for i in range(30):
            c.call("PFADD", "r", *elements(rng, 150))
            c.call("SETBIT", "bits", str(rng.randrange(5000)), str(i % 2))
        c.call("PFCOUNT", "r")
        c.call("BITFIELD", "bits", "INCRBY", "u8", "#3", "7")
        before = [c.call("GET", k) for k in ("r", "bits")] + [c.call("TS.HISTORY", "r")]
        c.close()
        p.stop()
        p = start_temporalstore(workdir=tmp_path)
        c = RawClient(p.port)
        after = [c.call("GET", k) for k in ("r", "bits")] + [c.call("TS.HISTORY", "r")]
        assert after == before
        c.close()
    finally:
        p.stop()


def test_hyperloglog_command_table(diff: Differ) -> None:
    diff.run("""
        COMMAND INFO pfadd pfcount pfmerge pfdebug pfselftest
        COMMAND DOCS pfadd pfcount pfmerge pfdebug pfselftest
        COMMAND GETKEYS pfmerge d a b
        COMMAND GETKEYS pfcount a b
        COMMAND GETKEYS pfdebug GETREG k
        ~ACL CAT hyperloglog
    """)
