"""Differential tests of the bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
BITFIELD, BITFIELD_RO) against redis-server, RESP2 and RESP3, and of their versions."""

from __future__ import annotations

import random
import signal

from tests.conftest import Differ, ServerProcess, start_temporalstore
from tests.resp_client import RawClient


def test_setbit_getbit(diff: Differ) -> None:
    diff.run("""
        SETBIT b 7 1
        SETBIT b 7 1
        SETBIT b 7 0
        SETBIT b 100 1
        GET b
        STRLEN b
        GETBIT b 100
        GETBIT b 101
        GETBIT b 100000
        GETBIT missing 3
        OBJECT ENCODING b
        SETBIT new 0 0
        GET new
        OBJECT ENCODING new
        SET n 5
        SETBIT n 0 0
        OBJECT ENCODING n
        GET n
        SETBIT n 2 0
        GET n
        GETBIT n 2
        SETBIT b -1 1
        SETBIT b 4294967296 1
        SETBIT b 9223372036854775807 1
        SETBIT b abc 1
        SETBIT b 1.5 1
        SETBIT b 1 2
        SETBIT b 1 -1
        SETBIT b 1 x
        GETBIT b -1
        GETBIT b 4294967296
        RPUSH l a
        SETBIT l 0 1
        GETBIT l 0
        SETBIT l -1 1
        SETBIT
        GETBIT b
        SETBIT b 1 1 1
    """)


def test_setbit_at_the_largest_offset(redis_ref: ServerProcess) -> None:
    """A 512 MB bitmap: its last bit, then its length, count and search, and away. On a
    server of its own, killed at the end: the shared one would keep the deleted 512 MB
    value in its history and write it into every checkpoint."""
    ours = start_temporalstore()
    try:
        for resp in (2, 3):
            d = Differ(redis_ref.port, ours.port, resp)
            try:
                d.run("""
                    SETBIT huge 4294967295 1
                    GETBIT huge 4294967295
                    GETBIT huge 4294967294
                    STRLEN huge
                    BITCOUNT huge
                    BITCOUNT huge 0 -1 BIT
                    BITPOS huge 1
                    BITPOS huge 0 -1
                    BITCOUNT huge -1 -1
                    SETBIT huge 4294967295 0
                    BITPOS huge 1 -2
                    DEL huge
                """)
            finally:
                d.close()
    finally:
        ours.proc.send_signal(signal.SIGKILL)
        ours.stop()


def test_bitcount(diff: Differ) -> None:
    diff.run("""
        SET k foobar
        BITCOUNT k
        BITCOUNT k 0 0
        BITCOUNT k 1 1
        BITCOUNT k 1 1 BYTE
        BITCOUNT k 5 30 BIT
        BITCOUNT k 0 -1 bit
        BITCOUNT k -5 -1 BIT
        BITCOUNT k -1 -5
        BITCOUNT k -1 -5 FOO
        BITCOUNT k 1 -100
        BITCOUNT k -100 100
        BITCOUNT k 100 200
        BITCOUNT k 3 2
        BITCOUNT k 9 9 BIT
        BITCOUNT k 0
        BITCOUNT k 0 1 FOO
        BITCOUNT k 0 1 BIT extra
        BITCOUNT k x 1
        BITCOUNT k 1 x
        BITCOUNT missing
        BITCOUNT missing 0
        BITCOUNT missing x y z w
        SET n 12345
        BITCOUNT n
        BITCOUNT n 1 2 BIT
        SET e ""
        BITCOUNT e
        BITCOUNT e 0 -1 BIT
        HSET h f v
        BITCOUNT h
        BITCOUNT
    """)


def test_bitpos(diff: Differ) -> None:
    diff.run(r"""
        SET k "\xff\xf0\x00"
        BITPOS k 0
        BITPOS k 1
        BITPOS k 1 2
        BITPOS k 1 2 -1
        SET k "\x00\xff\xf0"
        BITPOS k 1 0
        BITPOS k 1 2
        BITPOS k 1 2 -1 BYTE
        BITPOS k 1 7 15 BIT
        BITPOS k 1 7 -3 BIT
        BITPOS k 0 8 -1 BIT
        BITPOS k 0 12 -1 BIT
        SET ones "\xff\xff\xff"
        BITPOS ones 0
        BITPOS ones 0 0
        BITPOS ones 0 0 -1
        BITPOS ones 0 1 BIT
        BITPOS ones 0 1 -1 BIT
        BITPOS ones 1 100
        SET zeros "\x00\x00"
        BITPOS zeros 1
        BITPOS zeros 0
        BITPOS zeros 1 0 -1 BIT
        BITPOS zeros 0 3 5 BIT
        BITPOS missing 0
        BITPOS missing 1
        BITPOS missing 1 x
        BITPOS k 2
        BITPOS k x
        BITPOS k 1 x
        BITPOS k 1 0 x
        BITPOS k 1 0 1 FOO
        BITPOS k 1 0 1 BIT extra
        BITPOS k 1 -1 -3
        SET e ""
        BITPOS e 0
        BITPOS e 1
        BITPOS e 0 0 -1 BIT
        SET n 42
        BITPOS n 1
        RPUSH l a
        BITPOS l 1
        BITPOS k
    """)


def test_bitop(diff: Differ) -> None:
    diff.run(r"""
        SET a foobar
        SET b abcdef
        SET c "\xff\x00"
        BITOP AND d a b
        GET d
        OBJECT ENCODING d
        BITOP OR d a b c
        GET d
        BITOP XOR d a c missing
        GET d
        BITOP NOT d c
        GET d
        BITOP NOT d missing
        EXISTS d
        BITOP AND d missing other
        EXISTS d
        SET d x EX 100
        BITOP OR d a
        TTL d
        BITOP and a a b
        GET a
        BITOP NOT d a b
        BITOP FOO d a
        BITOP AND d
        RPUSH l x
        BITOP AND d a l
        BITOP NOT l a
        TYPE l
        SET n 10
        BITOP NOT d n
        GET d
    """)


def test_bitfield(diff: Differ) -> None:
    diff.run("""
        BITFIELD bf SET i8 0 100 GET i8 0
        BITFIELD bf INCRBY i5 100 1 GET u4 0
        BITFIELD bf INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1
        BITFIELD bf SET u8 #1 255 GET u8 #1 GET i8 #1
        BITFIELD bf OVERFLOW WRAP INCRBY u8 #1 1
        BITFIELD bf OVERFLOW SAT INCRBY u8 #1 -1000
        BITFIELD bf OVERFLOW FAIL INCRBY u8 #1 1000 GET u8 #1
        BITFIELD bf OVERFLOW FAIL INCRBY i8 #1 -1000
        BITFIELD bf OVERFLOW SAT SET i32 1 -9223372036854775808
        BITFIELD bf OVERFLOW SAT SET i32 1 9223372036854775807
        BITFIELD bf OVERFLOW SAT SET u32 1 -1
        BITFIELD bf OVERFLOW WRAP SET u7 1 -1
        BITFIELD bf SET i64 0 -1 GET i64 0 GET u63 1
        BITFIELD bf OVERFLOW SAT INCRBY i64 0 -9223372036854775808
        BITFIELD bf OVERFLOW WRAP INCRBY i64 0 -9223372036854775808
        BITFIELD bf OVERFLOW FAIL INCRBY i64 0 -9223372036854775808
        BITFIELD bf OVERFLOW SAT INCRBY u63 0 9223372036854775807
        BITFIELD bf OVERFLOW SAT INCRBY u63 0 -9223372036854775808
        GET bf
        BITFIELD bf
        BITFIELD fails OVERFLOW FAIL INCRBY u2 0 100
        GET fails
        BITFIELD bf GET u64 0
        BITFIELD bf GET i65 0
        BITFIELD bf GET i0 0
        BITFIELD bf GET x8 0
        BITFIELD bf GET u 0
        BITFIELD bf GET i8 -1
        BITFIELD bf GET i8 #-1
        BITFIELD bf GET i8 4294967296
        BITFIELD bf GET i8 #536870912
        BITFIELD bf SET i8 0 x
        BITFIELD bf SET i8 0
        BITFIELD bf OVERFLOW FOO GET i8 0
        BITFIELD bf OVERFLOW
        BITFIELD bf FOO i8 0
        BITFIELD bf GET i8 0 SET i8 0 1 GET x 0
        BITFIELD_RO bf GET i8 0 GET u4 #3
        BITFIELD_RO bf SET i8 0 1
        BITFIELD_RO bf INCRBY i8 0 1
        BITFIELD_RO missing GET u8 0
        BITFIELD missing GET u8 0
        EXISTS missing
        SET n 123
        BITFIELD n GET u8 0 SET u8 8 0
        OBJECT ENCODING n
        RPUSH l x
        BITFIELD l GET u8 0
        BITFIELD_RO l GET u8 0
        BITFIELD l SET u8 0 1
        BITFIELD
    """)


def test_random_bitfield_and_ranges(diff: Differ) -> None:
    """Random BITFIELD calls (types, # offsets, overflow modes, extreme values), each
    followed by the value's bytes, and random BITCOUNT/BITPOS ranges over it."""
    rng = random.Random(14)
    types = ["i1", "i5", "i8", "i13", "i32", "i63", "i64", "u1", "u5", "u8", "u13", "u32", "u63"]
    values = [2**63 - 1, -(2**63), 0, 1, -1, 255, -300]
    for _ in range(300):
        args = ["BITFIELD", "rb"]
        for _ in range(rng.randrange(1, 4)):
            t = rng.choice(types)
            off = str(rng.randrange(80)) if rng.random() < 0.8 else f"#{rng.randrange(8)}"
            v = str(rng.choice([*values, rng.randrange(-(2**63), 2**63)]))
            r = rng.random()
            if r < 0.25:
                args += ["GET", t, off]
            elif r < 0.55:
                args += ["SET", t, off, v]
            elif r < 0.85:
                args += ["INCRBY", t, off, v]
            else:
                args += ["OVERFLOW", rng.choice(["WRAP", "SAT", "FAIL"])]
        diff.check(*args)
        diff.check("GET", "rb")
        unit = rng.choice(["BIT", "BYTE"])
        a, b = str(rng.randrange(-90, 90)), str(rng.randrange(-90, 90))
        diff.check("BITCOUNT", "rb", a, b, unit)
        diff.check("BITPOS", "rb", str(rng.randrange(2)), a, b, unit)
        diff.check("BITPOS", "rb", str(rng.randrange(2)), a)


def test_bitmap_writes_are_versions(ts_server: ServerProcess) -> None:
    """SETBIT, BITFIELD and BITOP each make a version; TS.ASOF reads every one back and
    TS.HISTORY lists them; a write that changes nothing makes none."""
    c = RawClient(ts_server.port)
    try:
        c.call("DEL", "vb", "vd")
        writes = [
            ("SETBIT", "vb", "3", "1"),
            ("SETBIT", "vb", "20", "1"),
            ("BITFIELD", "vb", "SET", "u8", "#0", "200"),
            ("SETBIT", "vb", "20", "0"),
        ]
        seen = []
        for w in writes:
            c.call(*w)
            seen.append((int(c.call("TS.VERSION")[1:-2]), c.call("GET", "vb")))
        assert c.call("SETBIT", "vb", "20", "0") == b":0\r\n"  # no change: no version
        for v, value in seen:
            assert c.call("TS.ASOF", "vb", "VERSION", str(v)) == value
        assert c.call("GET", "vb") == b"$3\r\n\xc8\x00\x00\r\n"
        hist = c.call("TS.HISTORY", "vb")
        assert hist.count(b"setbit") == 3 and hist.count(b"bitfield") == 1
        c.call("BITOP", "NOT", "vd", "vb")
        assert c.call("TS.ASOF", "vd", "BACK", "0") == b"$3\r\n7\xff\xff\r\n"
    finally:
        c.call("DEL", "vb", "vd")
        c.close()


def test_bitmap_command_table(diff: Differ) -> None:
    diff.run("""
        COMMAND INFO setbit getbit bitcount bitpos bitop bitfield bitfield_ro
        COMMAND DOCS setbit getbit bitcount bitpos bitop bitfield bitfield_ro
        COMMAND GETKEYS bitfield k GET u8 0
        COMMAND GETKEYS bitfield_ro k GET u8 0
        COMMAND GETKEYS bitop AND d a b
        COMMAND GETKEYS setbit k 1 1
        ~ACL CAT bitmap
    """)
