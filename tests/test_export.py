"""Export and import (TS.EXPORT, TS.IMPORT, `temporalstore export` / `import`, the client's
export_snapshot / import_snapshot): every type round-trips exactly between two real
servers, through a file; a truncated or corrupt file is refused before anything is
written; conflicts and taken names are clear errors; memory stays flat on a large export."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from temporalstore import (
    AlreadyExistsError,
    ExportFileError,
    Point,
    SnapshotNotFoundError,
    Temporal,
)
from tests.conftest import ROOT, ServerProcess, start_temporalstore
from tests.helpers import read_value
from tests.reliability import figure, sized

AWKWARD = [0.1, 1 / 3, 1e-300, 5e-324, -2.5, 1.7976931348623157e308, math.inf, -math.inf, 0.0]
BINARY = b"\x00\xff\xfe bytes that are not UTF-8 \x80"


@pytest.fixture
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    a, b = start_temporalstore(), start_temporalstore()
    yield a, b
    a.stop()
    b.stop()


def fill(r: redis.Redis) -> None:
    r.set("s:text", "héllo")
    r.set(BINARY, BINARY)
    r.set("s:ttl", "v", px=600_000)
    r.hset("h", mapping={"f": "1", BINARY: BINARY, "é": ""})
    r.rpush("l", "a", BINARY, "", "z")
    r.sadd("set:int", 1, 2, 3)
    r.sadd("set:str", "x", BINARY)
    r.zadd("z", {f"m{i}": sc for i, sc in enumerate(AWKWARD)})
    r.zadd("z", {BINARY: -0.5})
    for i in range(5):
        r.xadd("x", {"f": str(i), BINARY: BINARY}, id=f"{i + 1}-{i}")
    r.xdel("x", "3-2")
    r.xgroup_create("x", "g", id="0")
    r.xreadgroup("g", "alice", {"x": ">"}, count=2)
    r.xgroup_create("x", "g2", id="$")
    r.expire("h", 900)


def state(r: redis.Redis, db: int = 0) -> dict[bytes, Any]:
    """Every key's type, value, TTL (to the nearest minute) and stream groups, for comparison.

    Rounded, not floored: a TTL read in the millisecond its EXPIRE ran is a whole minute,
    and one read a millisecond later must not fall into the minute below."""
    out: dict[bytes, Any] = {}
    r.execute_command("SELECT", db)
    for key in sorted(r.keys("*")):
        kind = r.type(key)
        v = read_value(r, key, kind)
        if kind == b"stream":
            info = r.xinfo_stream(key)
            groups = r.xinfo_groups(key)
            pending = r.xpending_range(key, "g", "-", "+", 10)
            v = (
                v,
                info["last-generated-id"],
                info["entries-added"],
                info["max-deleted-entry-id"],
                [(g["name"], g["last-delivered-id"], g["pending"]) for g in groups],
                [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pending],
            )
        ttl = r.pttl(key)
        out[key] = (kind, v, -1 if ttl < 0 else (ttl + 30_000) // 60_000)
    r.execute_command("SELECT", 0)
    return out


def cli(*args: str, port: int, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "proxy.cli", *args, "--port", str(port)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_every_type_round_trips_through_the_cli(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    ra, rb = redis.Redis(port=a.port), redis.Redis(port=b.port)
    fill(ra)
    ta = Temporal(ra)
    ta.seal("known-good", name="good", episode=12, agent=BINARY.decode("latin-1"))
    expected = state(ra)
    ra.set("s:text", "changed after the seal")
    ra.delete("l")
    out = tmp_path / "good.jsonl"
    cli("export", "--at", "SNAPSHOT", "good", "-o", str(out), port=a.port)
    lines = out.read_bytes().splitlines()
    header, end = json.loads(lines[0]), json.loads(lines[-1])
    assert header["format"] == "temporalstore-export" and header["format_version"] == 1
    assert header["snapshot"]["name"] == "good" and header["snapshot"]["trigger"] == "known-good"
    assert header["snapshot"]["metadata"]["episode"] == "12"
    assert header["lsn"] == ta.snapshots()["good"].version
    assert end["end"]["keys"] == len(expected) == len(lines) - 2
    # The default target: a new branch, forked from the empty state.
    v0 = rb.execute_command("TS.VERSION")
    p = cli("import", str(out), port=b.port)
    assert "into branch 'import-good'" in p.stderr
    tb = Temporal(rb)
    assert tb.branches()["import-good"].fork == 0
    assert rb.dbsize() == 0  # the main line is untouched
    with tb.switch("import-good") as br:
        assert state(br.client) == expected
        hist = tb.history("s:text")  # main line: no such key
        assert hist == []
        br_hist = br.execute_command("TS.HISTORY", "s:text")
        assert len(br_hist) == 1
    assert rb.execute_command("TS.VERSION") > v0
    # The same file into the main line's database 3, then refused there a second time.
    cli("import", str(out), "--main-line", "--db", "3", port=b.port)
    assert state(rb, 3) == expected
    entry = tb.history("s:text")  # db 0 of the main line still has none
    assert entry == []
    p = cli("import", str(out), "--main-line", "--db", "3", port=b.port, check=False)
    assert p.returncode == 1 and "exist already" in p.stderr
    # REPLACE writes over them; a taken branch name is refused.
    rb.execute_command("SELECT", 3)
    cli("import", str(out), "--replace", "--db", "3", port=b.port)
    p = cli("import", str(out), port=b.port, check=False)
    assert p.returncode == 1 and "already exists" in p.stderr


def test_imported_versions_say_where_they_came_from(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = pair
    ta, tb = Temporal(redis.Redis(port=a.port)), Temporal(redis.Redis(port=b.port))
    ta.r.set("k", "v")
    sid = ta.seal("t")
    out = tmp_path / "x.jsonl"
    assert ta.export_snapshot(out, at=Point(snapshot=sid)) == 1
    done = tb.import_snapshot(out, main_line=True)
    assert (done.branch, done.keys) == (None, 1)
    [entry] = tb.history("k")
    assert entry.author == "temporalstore-import"
    assert entry.message is not None and f"snapshot {sid}" in entry.message
    assert "x.jsonl" in entry.message and entry.command == "ts.import"
    with pytest.raises(SnapshotNotFoundError):
        ta.export_snapshot(tmp_path / "y.jsonl", at=Point(snapshot="nope"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "no-end", "extra", "not-json"])
def test_a_damaged_file_is_refused_before_anything_is_written(
    pair: tuple[ServerProcess, ServerProcess], tmp_path: Path, damage: str
) -> None:
    a, b = pair
    ta, tb = Temporal(redis.Redis(port=a.port)), Temporal(redis.Redis(port=b.port))
    fill(ta.r)
    out = tmp_path / "f.jsonl"
    ta.export_snapshot(out)
    data = out.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        i = data.index(b'"l"')
        data = data[:i] + b'"m"' + data[i + 3 :]
    elif damage == "no-end":
        data = b"\n".join(data.splitlines()[:-1]) + b"\n"
    elif damage == "extra":
        data += b'{"key":"q","type":"string","value":"v","expire_ms":null}\n'
    else:
        lines = data.splitlines(keepends=True)
        data = b"".join([lines[0], b"{not json\n", *lines[1:]])
    out.write_bytes(data)
    v = tb.version()
    with pytest.raises(ExportFileError):
        tb.import_snapshot(out)
    p = cli("import", str(out), port=b.port, check=False)
    assert p.returncode == 1 and "nothing was written" in p.stderr
    assert tb.version() == v and tb.branches() == {} and tb.r.dbsize() == 0


def test_ts_export_and_import_over_resp(ts_server: ServerProcess) -> None:
    r = redis.Redis(port=ts_server.port)
    r.execute_command("SELECT", 11)
    r.flushdb()
    for i in range(25):
        r.set(f"p:{i:02d}", i)
    v = r.execute_command("TS.VERSION")
    pages, cursor = [], b"0"
    while True:
        cursor, lines = r.execute_command(
            "TS.EXPORT", "VERSION", v, "MATCH", "p:*", "COUNT", 10, "CURSOR", cursor
        )
        pages.append(lines)
        if cursor == b"0":
            break
    assert [len(p) for p in pages] == [11, 10, 5]  # the header, then 10, 10, 5 keys
    assert json.loads(pages[0][0])["match"] == "p:*"
    keys = [json.loads(x)["key"] for x in [x for p in pages for x in p][1:]]
    assert keys == [f"p:{i:02d}" for i in range(25)]  # each key once, in key order
    lines = [x for p in pages for x in p]
    r.execute_command("SELECT", 12)
    r.flushdb()
    assert r.execute_command("TS.IMPORT", "CHECK", *lines) == 25
    assert r.dbsize() == 0
    assert r.execute_command("TS.IMPORT", *lines) == 25
    assert r.get("p:07") == b"7"
    errors = {
        ("TS.EXPORT", "BACK", "1"): "BACK is only valid for a single key",
        ("TS.EXPORT", "VERSION", "1", "CURSOR", "zz"): "invalid cursor",
        ("TS.EXPORT", "VERSION", "1", "COUNT", "0"): "syntax error",
        ("TS.EXPORT", "VERSION", "1", "BOGUS", "1"): "syntax error",
        ("TS.IMPORT", *lines[1:2]): "exist already",
        ("TS.IMPORT", "NOPE", "{}"): "syntax error",
        ("TS.IMPORT", "{}"): "line 1: a key line has exactly key, type, value and expire_ms",
        ("TS.IMPORT", b'{"format":"other"}'): "line 1: not a temporalstore-export header",
        ("TS.IMPORT", b'{"key":"a","type":"zset","value":[["m","nan"]],"expire_ms":null}'): (
            "a score must be"
        ),
        ("TS.IMPORT", b'{"key":"a","type":"list","value":[],"expire_ms":null}'): "an empty list",
        ("TS.IMPORT", b'{"key":{"b64":"!!"},"type":"string","value":"v","expire_ms":null}'): (
            "bad base64"
        ),
    }
    for cmd, text in errors.items():
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command(*cmd)
        assert text in str(e.value), (cmd, str(e.value))
    r.execute_command("TS.CHECKOUT", "AT", "VERSION", v)
    with pytest.raises(redis.ResponseError, match=r"TS\.CHECKOUT HEAD first"):
        r.execute_command("TS.EXPORT", "VERSION", v)
    with pytest.raises(redis.ReadOnlyError):
        r.execute_command("TS.IMPORT", lines[1])


def test_a_large_export_streams(tmp_path: Path) -> None:
    """About 100 MB (1 GB under `make soak`) of values out through the CLI, and back in:
    the exporter's peak memory grows by about a page (4 MB of lines) plus one value, not
    by the export's size; the importer's likewise."""
    p = start_temporalstore()
    try:
        r = redis.Redis(port=p.port)
        value = b"x" * (512 << 10)
        n = sized(200, 2048)
        for start in range(0, n, 100):
            with r.pipeline(transaction=False) as pipe:
                for i in range(start, min(n, start + 100)):
                    pipe.set(f"big:{i:05d}", value)
                pipe.execute()
        out = tmp_path / "big.jsonl"
        # VmHWM, not ru_maxrss: a child's ru_maxrss starts from its parent's at the fork.
        code = (
            "import sys; from proxy.cli import main\n"
            "def kb(f): return int(open('/proc/self/status').read().split(f)[1].split()[0])\n"
            "start = kb('VmHWM:'); rc = main(sys.argv[1:]); print(kb('VmHWM:') - start)\n"
            "sys.exit(rc)"
        )
        args = ["export", "-o", str(out), "--port", str(p.port)]
        run = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        grew_kb = int(run.stdout.split()[-1])
        size = out.stat().st_size
        assert size > n * len(value)
        # A page is at most 4 MB of lines (plus one value): the exporter's peak grows by
        # a few pages' worth, far below the 100 MB it wrote.
        assert grew_kb * 1024 < 32 << 20, (grew_kb, size)
        args = ["import", str(out), "--port"]
        tb = start_temporalstore()
        try:
            run = subprocess.run(
                [sys.executable, "-c", code, *args, str(tb.port)],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            assert run.returncode == 0, run.stderr
            import_grew_kb = int(run.stdout.split()[-1])
            assert f"{n} keys" in run.stderr
            assert import_grew_kb * 1024 < 32 << 20, import_grew_kb
        finally:
            tb.stop()
        figure(
            "export_memory",
            export_mb=size / 2**20,
            exporter_grew_mb=grew_kb / 1024,
            importer_grew_mb=import_grew_kb / 1024,
        )
    finally:
        p.stop()


def test_names_and_conflicts(pair: tuple[ServerProcess, ServerProcess], tmp_path: Path) -> None:
    a, b = pair
    ta, tb = Temporal(redis.Redis(port=a.port)), Temporal(redis.Redis(port=b.port))
    ta.r.set("k", "1")
    out = tmp_path / "k.jsonl"
    ta.export_snapshot(out)
    assert tb.import_snapshot(out, branch="mine").branch == "mine"
    with pytest.raises(AlreadyExistsError):
        tb.import_snapshot(out, branch="mine")
    with pytest.raises(ValueError):
        tb.import_snapshot(out, branch="x", replace=True)
