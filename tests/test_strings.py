"""Differential tests of the string family against redis-server, RESP2 and RESP3."""

from __future__ import annotations

from tests.conftest import Differ


def test_set_get_and_options(diff: Differ) -> None:
    diff.run("""
        SET k v
        GET k
        GET missing
        SET k v2 NX
        SET k v3 XX
        GET k
        SET n 1 XX
        SET k v4 GET
        SET k v5 NX GET
        SET k v EX 100
        SET k v EX 0
        SET k v EX -5
        SET k v EX abc
        SET k v PX 100 EX 100
        SET k v KEEPTTL EX 10
        SET k v NX XX
        SET k v FOO
        SET k v EX
        SET k v KEEPTTL
        SET k v EXAT 1
        SET k v PXAT 99999999999999
        SET k v EX 9223372036854775807
        SET k v PX 9223372036854775807
        SETNX k x
        SETNX k2 x
        SETEX k 0 v
        SETEX k 10 v
        PSETEX k 10000 v
        PSETEX k -1 v
        SET
        SET k
        GET a b
    """)


def test_counter_overflow_around_the_tagged_int_bound(diff: Differ) -> None:
    """The overflow test is skipped while both operands are below 2**62: sums on
    either side of the int64 bounds from operands at and past it."""
    diff.run("""
        SET c 4611686018427387903
        INCRBY c 4611686018427387903
        INCRBY c 1
        INCR c
        GET c
        SET c 4611686018427387904
        INCRBY c 4611686018427387904
        INCRBY c 4611686018427387903
        GET c
        SET c -4611686018427387904
        INCRBY c -4611686018427387904
        DECR c
        GET c
        SET c -4611686018427387903
        DECRBY c 4611686018427387906
        INCRBY d 9223372036854775807
        INCR d
        INCRBY e -9223372036854775808
        INCRBY e -1
        DECRBY e 1
        GET e
    """)


def test_counters(diff: Differ) -> None:
    diff.run("""
        INCR c
        INCRBY c 10
        DECR c
        DECRBY c 5
        DECRBY c -9223372036854775808
        INCRBY c abc
        SET c 9223372036854775807
        INCR c
        SET c -9223372036854775808
        DECR c
        SET c " 1"
        INCR c
        SET c 007
        INCR c
        SET f 10.5
        INCRBYFLOAT f 0.1
        INCRBYFLOAT f -5
        INCRBYFLOAT f 1e300
        INCRBYFLOAT f abc
        INCRBYFLOAT g 0.1
        INCRBYFLOAT g 0.2
        INCRBYFLOAT g 3.0e3
        INCRBYFLOAT g inf
        SET s abc
        INCRBYFLOAT s 1
        INCR s
        RPUSH l a
        INCR l
        GET l
    """)


def test_ranges_and_append(diff: Differ) -> None:
    diff.run("""
        APPEND a hello
        APPEND a " world"
        STRLEN a
        STRLEN nope
        GETRANGE a 0 4
        GETRANGE a -5 -1
        GETRANGE a 5 2
        GETRANGE a -1 -5
        GETRANGE a 0 100
        GETRANGE nope 0 1
        SETRANGE a 6 there
        GET a
        SETRANGE b 3 xy
        GET b
        SETRANGE c 0 ""
        SETRANGE a -1 x
        SETRANGE a 536870912 x
        OBJECT ENCODING a
    """)


def test_multi_key_and_getex(diff: Differ) -> None:
    diff.run("""
        MSET a 1 b 2 c 3
        MGET a b c d
        MSET a 1 b
        MSETNX a 1 z 2
        MSETNX y 1 z 2
        MGET y z
        RPUSH l x
        MGET a l
        GETSET a 10
        GETSET new 1
        GETDEL a
        GETDEL a
        GETEX b
        GETEX b EX 100
        TTL b
        GETEX b PERSIST
        TTL b
        GETEX b EX 10 PERSIST
        GETEX b KEEPTTL
        GETEX b EXAT 1
        EXISTS b
        GETEX l
    """)
