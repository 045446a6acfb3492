"""`temporalstore import --rdb` and `serve --import-rdb` with RDB files that a real
redis-server wrote: every type and encoding, several databases, expiries, function
libraries; each imported key compared with redis-server's own replies, also after
the importing server is killed with SIGKILL and started again from storage; corrupt,
truncated and misfit files refused with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, ServerProcess, start_redis, start_temporalstore
from tests.resp_client import RawClient, canonical, parse

CLI = [sys.executable, "-m", "proxy.cli"]
LIB = "#!lua name=imported\nredis.register_function('hi', function(keys, args) return 'hi' end)"


def fill(r: RawClient) -> None:
    """Every type and encoding Redis 7.0 writes, in databases 0, 1 and 5."""
    r.call("SET", "s:short", "hello")
    r.call("SET", "s:int", "12345")
    r.call("SET", "s:bigint", "123456789012345")
    r.call("SET", "s:lzf", "abc" * 200)
    r.call("SET", "s:ttl", "v", "EX", 5000)
    r.call("SET", "s:gone", "v", "PX", 800)  # expired by the time it is imported
    r.call("RPUSH", "l:small", "a", "1", "-70000", "x" * 100)
    r.call("RPUSH", "l:big", *[f"item-{i}-" + "z" * (i % 50) for i in range(3000)])
    r.call("HSET", "h:small", "f", "v", "n", "1")
    r.call("HSET", "h:big", *[x for i in range(700) for x in (f"f{i}", f"v{i}")])
    r.call("HSET", "h:longval", "f", "v" * 100)
    r.call("SADD", "set:int", 1, 2, 3, -5, 100000, 2**40)
    r.call("SADD", "set:str", "a", "b", "c")
    r.call("SADD", "set:big", *range(600))
    r.call("ZADD", "z:small", 1, "a", 2.5, "b", "-inf", "c")
    r.call("ZADD", "z:big", *[x for i in range(300) for x in (i / 3, f"m{i}")])
    for i in range(300):
        r.call("XADD", "x:stream", f"{i + 1}-0", "f", i, "g", "w" * (i % 20))
    r.call("XADD", "x:stream", "400-0", "other", "fields")
    r.call("XDEL", "x:stream", "5-0", "6-0")
    r.call("XGROUP", "CREATE", "x:stream", "grp", "0")
    r.call("XGROUP", "CREATE", "x:stream", "grp2", "$")
    r.call("XREADGROUP", "GROUP", "grp", "alice", "COUNT", "4", "STREAMS", "x:stream", ">")
    r.call("XREADGROUP", "GROUP", "grp", "bob", "COUNT", "2", "STREAMS", "x:stream", ">")
    r.call("XACK", "x:stream", "grp", "2-0")
    r.call("SELECT", 1)
    r.call("SET", "db1:key", "in database 1")
    r.call("ZADD", "db1:z", 1, "x")
    r.call("SELECT", 5)
    r.call("HSET", "db5:h", "a", "b")
    r.call("SELECT", 0)
    r.call("FUNCTION", "LOAD", LIB)


# Reads per type; True: compared unordered (a hash table's order is each server's own).
READS: dict[bytes, list[tuple[tuple[object, ...], bool]]] = {
    b"string": [(("GET", "{}"), False)],
    b"list": [(("LRANGE", "{}", 0, -1), False)],
    b"hash": [(("HGETALL", "{}"), True)],
    b"set": [(("SMEMBERS", "{}"), True)],
    b"zset": [(("ZRANGE", "{}", 0, -1, "WITHSCORES"), False)],
    b"stream": [
        (("XRANGE", "{}", "-", "+"), False),
        (("XINFO", "STREAM", "{}", "FULL"), False),
        (("XPENDING", "{}", "grp"), False),  # (the extended form has idle times)
    ],
}


def value_of(raw: bytes) -> bytes:
    return parse(raw)[1]  # type: ignore[no-any-return]


def compare_all(ref: RawClient, ours: RawClient) -> int:
    """Every key of databases 0-15 the same in both (type, value, encoding, DUMP where
    both write the same bytes, TTL to the second); returns how many keys."""
    n = 0
    for db in range(16):
        ref.call("SELECT", db)
        ours.call("SELECT", db)
        keys = sorted(k[1] for k in parse(ref.call("KEYS", "*"))[1])
        assert sorted(k[1] for k in parse(ours.call("KEYS", "*"))[1]) == keys, f"db {db}"
        for key in keys:
            n += 1
            kind = value_of(ref.call("TYPE", key))
            assert value_of(ours.call("TYPE", key)) == kind, key
            for read, unordered in READS[kind]:
                args = [a.replace("{}", key.decode()) if isinstance(a, str) else a for a in read]
                a, b = ref.call(*args), ours.call(*args)
                if unordered:
                    assert canonical(parse(b), 2) == canonical(parse(a), 2), (args, a, b)
                else:
                    assert a == b, (args, a, b)
            enc = ref.call("OBJECT", "ENCODING", key)
            assert ours.call("OBJECT", "ENCODING", key) == enc, key
            if enc != b"$9\r\nhashtable\r\n" and kind != b"stream":
                assert ours.call("DUMP", key) == ref.call("DUMP", key), key
            ttl_ref = int(value_of(ref.call("TTL", key)))
            ttl_ours = int(value_of(ours.call("TTL", key)))
            assert abs(ttl_ref - ttl_ours) <= 2, (key, ttl_ref, ttl_ours)
    ref.call("SELECT", 0)
    ours.call("SELECT", 0)
    assert ours.call("FCALL", "hi", 0) == ref.call("FCALL", "hi", 0) == b"$2\r\nhi\r\n"
    return n


@pytest.fixture(scope="module")
def saved() -> Iterator[tuple[ServerProcess, Path]]:
    """A redis-server holding every type, and the RDB file its SAVE wrote."""
    ref = start_redis()
    c = RawClient(ref.port)
    fill(c)
    assert c.call("SAVE") == b"+OK\r\n"
    c.close()
    time.sleep(1.0)  # s:gone's expiry passes
    yield ref, ref.workdir / "dump.rdb"
    ref.stop()


def run_import(rdb: Path, storage: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "import", "--rdb", str(rdb), "--storage", f"file://{storage}", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_then_serve(saved: tuple[ServerProcess, Path], tmp_path: Path) -> None:
    ref_proc, rdb = saved
    res = run_import(rdb, tmp_path / "data")
    assert res.returncode == 0, res.stderr
    assert "1 already expired, skipped" in res.stderr
    assert "reading dump.rdb" in res.stderr  # the progress bar, on stderr
    ours = start_temporalstore(workdir=tmp_path)
    try:
        ref, oc = RawClient(ref_proc.port), RawClient(ours.port)
        assert compare_all(ref, oc) == 19
        assert oc.call("EXISTS", "s:gone") == b":0\r\n"
        # Each key's first version is the import.
        assert b"restore" in oc.call("TS.HISTORY", "l:big")
        oc.close()
        ref.close()
    finally:
        ours.stop()
    # Importing again into the same storage is refused.
    again = run_import(rdb, tmp_path / "data")
    assert again.returncode == 1
    assert "already holds data" in again.stderr


def test_serve_import_survives_kill(saved: tuple[ServerProcess, Path], tmp_path: Path) -> None:
    ref_proc, rdb = saved
    ours = start_temporalstore(["--import-rdb", str(rdb)], workdir=tmp_path)
    try:
        assert any("imported" in line for line in ours.log_lines)
        ref, oc = RawClient(ref_proc.port), RawClient(ours.port)
        assert compare_all(ref, oc) == 19
        oc.close()
        ref.close()
        ours.proc.kill()  # SIGKILL: only what storage holds comes back
        ours.proc.wait()
    finally:
        ours.stop()
    again = start_temporalstore(workdir=tmp_path)
    try:
        oc, ref = RawClient(again.port), RawClient(ref_proc.port)
        assert compare_all(ref, oc) == 19
        oc.close()
        ref.close()
    finally:
        again.stop()


def test_corrupt_files_refused_before_writing(
    saved: tuple[ServerProcess, Path], tmp_path: Path
) -> None:
    _ref, rdb = saved
    data = rdb.read_bytes()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x20
    assert data.count(b"in database 1") == 1
    cases = {
        # A value changed that still parses: only the CRC-64 finds it.
        "flipped.rdb": (data.replace(b"in database 1", b"in database 2"), "wrong RDB checksum"),
        "garbled.rdb": (bytes(flipped), "not a valid RDB file"),
        "truncated.rdb": (data[: len(data) - 100], "not a valid RDB file"),
        "short.rdb": (data[:-3], "not a valid RDB file"),
        "notrdb.rdb": (b"hello world", "no REDIS signature"),
        "future.rdb": (b"REDIS0012" + data[9:], "version 12"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        storage = tmp_path / ("st-" + name)
        res = run_import(path, storage)
        assert res.returncode == 1, (name, res.stderr)
        assert message in res.stderr, (name, res.stderr)
        assert not storage.exists(), name  # nothing written, not even a claim
    storage = ["--storage", f"file://{tmp_path / 'st-serve'}"]
    res = subprocess.run(
        [*CLI, "serve", "--port", "0", "--import-rdb", str(tmp_path / "flipped.rdb"), *storage],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and "checksum" in res.stderr
    assert not (tmp_path / "st-serve").exists()
    res = run_import(rdb, tmp_path / "few-dbs", "--databases", "4")
    assert res.returncode == 1 and "database 5" in res.stderr


def test_file_without_checksum(tmp_path: Path) -> None:
    ref = start_redis(["--rdbchecksum", "no", "--rdbcompression", "no"])
    try:
        c = RawClient(ref.port)
        c.call("RPUSH", "l", *range(100))
        c.call("SET", "k", "v" * 50)
        c.call("SAVE")
        res = run_import(ref.workdir / "dump.rdb", tmp_path / "data")
        assert res.returncode == 0, res.stderr
        assert "saved without a checksum" in res.stderr
        ours = start_temporalstore(workdir=tmp_path)
        try:
            oc = RawClient(ours.port)
            assert oc.call("LRANGE", "l", 0, -1) == c.call("LRANGE", "l", 0, -1)
            assert oc.call("GET", "k") == c.call("GET", "k")
            oc.close()
        finally:
            ours.stop()
        c.close()
    finally:
        ref.stop()
    assert os.path.exists(tmp_path / "data")


def test_parse_hand_made_file() -> None:
    """An RDB 9 file: aux fields, RESIZEDB, seconds and ms expiries, LRU/LFU hints, an
    empty key (skipped and counted, as Redis does), a FUNCTION2 record; then the same
    file with a module value, a module aux record and a pre-release function record."""
    from commands.rdb import RdbError, crc64
    from commands.rdb_file import parse_rdb
    from commands.rdb_write import rdb_len
    from tests.test_dump import _raw, ziplist

    def file(body: bytes) -> bytes:
        data = b"REDIS0009" + body + b"\xff"
        return data + crc64(data).to_bytes(8, "little")

    body = b"\xfa" + _raw(b"redis-ver") + _raw(b"6.2.0") + b"\xfe\x00\xfb\x03\x01"
    body += b"\xfd" + (2_000_000_000).to_bytes(4, "little") + b"\x00" + _raw(b"a") + _raw(b"1")
    body += b"\xfc" + (1_000).to_bytes(8, "little") + b"\x00" + _raw(b"old") + _raw(b"x")
    body += b"\xf8\x05\xf9\x07\x0a" + _raw(b"empty") + _raw(ziplist([]))
    body += b"\xfe\x02\x0a" + _raw(b"l") + _raw(ziplist([b"x", 5]))
    body += b"\xf5" + _raw(b"#!lua name=x\nredis.register_function('f', function() end)")
    c = parse_rdb(file(body))
    assert (c.version, c.empty_keys, len(c.functions)) == (9, 1, 1)
    assert [(db, k, e) for db, k, _v, e in c.keys] == [
        (0, b"a", 2_000_000_000_000),
        (0, b"old", 1_000),
        (2, b"l", None),
    ]
    assert list(c.keys[2][2]) == [b"x", b"5"]
    assert c.aux == {b"redis-ver": b"6.2.0"}
    module = b"\x07" + _raw(b"m") + rdb_len(0x1234567890ABC << 10 | 3)
    for extra, message in (
        (module, "no matching module type"),
        (b"\xf7" + rdb_len(77 << 10), "AUX module data"),
        (b"\xf6" + _raw(b"f"), "Pre-release function format"),
    ):
        with pytest.raises(RdbError, match=message):
            parse_rdb(file(body + extra))


def test_bad_function_library_refused(tmp_path: Path) -> None:
    """A library Redis would refuse (here: Lua that does not compile) stops the import
    before any key is written."""
    from commands.rdb import crc64
    from tests.test_dump import _raw

    body = b"\x00" + _raw(b"k") + _raw(b"v")
    body += b"\xf5" + _raw(b"#!lua name=broken\nthis is not lua")
    data = b"REDIS0010" + body + b"\xff"
    path = tmp_path / "bad-lib.rdb"
    path.write_bytes(data + crc64(data).to_bytes(8, "little"))
    res = run_import(path, tmp_path / "data")
    assert res.returncode == 1, res.stderr
    assert "function library refused" in res.stderr
    assert "imported" not in res.stderr
