"""flusher.plainpack writes exactly the bytes msgpack writes for plain records, and
leaves everything else to msgpack (the segment format does not change)."""

from __future__ import annotations

from collections import deque
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from flusher import codec, plainpack
from flusher.codec import decode_record, encode_record, encode_records
from store import R_OPS, UpdateRecord, WriteMeta, native
from store.values import HashTable
from tests.helpers import write_metas

MSGPACK = msgpack.Packer(use_bin_type=True)

# Every msgpack integer width, at and around each boundary, both signs.
EDGES = [
    e + d for b in (0, 5, 7, 8, 15, 16, 31, 32, 63, 64) for e in (2**b, -(2**b)) for d in (-1, 0, 1)
] + [-32, -33, 0x7F, 0x80, -0x80, -0x81]
INTS = st.one_of(st.integers(), st.sampled_from(EDGES))
# bytes and str of every length class: fix/8-bit, 16-bit, 32-bit headers.
LENGTHS = st.sampled_from([0, 1, 31, 32, 33, 255, 256, 257, 65535, 65536])
BYTES = st.one_of(st.binary(max_size=40), LENGTHS.map(lambda n: b"x" * n))
STRS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["set", "hset", "lpush", "zadd", "incrby"]),
    LENGTHS.map(lambda n: "y" * n),
    st.just("é" * 20),  # 40 UTF-8 bytes: the header counts bytes, not characters
)
SCALARS = st.one_of(INTS, BYTES, STRS, st.floats(), st.none(), st.booleans())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5).map(tuple),
        st.lists(inner, min_size=15, max_size=17).map(tuple),  # fixarray/array16 edge
        st.builds(WriteMeta, st.integers(0, 2**40), BYTES, st.none() | BYTES),
    ),
    max_leaves=12,
)


def _same(packed: bytes | None, want: bytes) -> None:
    assert packed is not None
    assert packed == want


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_any_plain_value_packs_as_msgpack_does(x: Any) -> None:
    try:
        want = MSGPACK.pack(x)
    except (OverflowError, ValueError, UnicodeEncodeError):
        # msgpack refuses it (an int past 64 bits, a lone surrogate): so do we, and
        # the caller's msgpack fallback raises msgpack's own error.
        assert plainpack.pack(x) is None
        return
    _same(plainpack.pack(x), want)


OPS = st.lists(
    st.tuples(st.integers(0, 15), BYTES, st.lists(VALUES, min_size=1, max_size=4).map(tuple)),
    min_size=1,
    max_size=4,
).map(tuple)
# LSNs and times at the edges of the common head (uint32 LSN, uint64 time) and past.
HEADS = st.sampled_from(
    [1, 0xFF, 0x100, 0xFFFF, 0x10000, 2**32 - 1, 2**32, 2**62 - 1, 2**62, 2**64 - 1]
)
RECORDS = st.tuples(
    st.one_of(st.integers(1, 2**63 - 1), HEADS),
    st.one_of(st.integers(0, 2**63 - 1), HEADS),
    OPS,
    st.lists(STRS, max_size=4).map(tuple),
    write_metas(2**40, 8),
)


def _records_as_msgpack(records: list[UpdateRecord]) -> None:
    """pack_records writes msgpack's bytes for `records`, or None where msgpack
    refuses them; the codec writes msgpack's bytes either way."""
    try:
        want = b"".join(MSGPACK.pack(r) for r in records)
    except (OverflowError, ValueError, UnicodeEncodeError):
        assert plainpack.pack_records(records) is None
        return
    _same(plainpack.pack_records(records), want)
    assert encode_records(records) == want
    for r in records:
        assert encode_record(r) == MSGPACK.pack(r)


@settings(max_examples=100, deadline=None)
@given(st.lists(RECORDS, min_size=1, max_size=8))
def test_records_pack_as_msgpack_packs_them(records: list[UpdateRecord]) -> None:
    _records_as_msgpack(records)


def test_what_is_not_plain_is_left_to_msgpack() -> None:
    for odd in (
        bytearray(b"raw"),
        [1, 2],
        {b"f": b"v"},
        deque([b"a"]),
        HashTable({b"f": b"v"}),
        2**64,
        -(2**63) - 1,
        "\ud800",
        (((((((((((((((((((1,),),),),),),),),),),),),),),),),),),),
    ):
        assert plainpack.pack((1, (b"k", odd))) is None
    r = (3, 5, ((0, b"k", ("set", bytearray(b"raw"), None)),), ("set",), None)
    plain = (4, 5, ((0, b"k", ("set", b"v", None)),), ("set",), None)
    assert plainpack.pack_records([plain, r]) is None
    # ... and the codec still writes them, record by record, as before.
    assert encode_records([plain, r]) == encode_record(plain) + encode_record(r)
    assert decode_record(encode_record(r))[R_OPS][0][2][1] == b"raw"


def test_a_common_set_record() -> None:
    meta = WriteMeta(12, b"me", None)
    for lsn in (7, 700, 70_000):
        r = (lsn, 1_790_000_000_000, ((0, b"k", ("set", b"v", None)),), ("set",), meta)
        _same(plainpack.pack_records([r, r]), MSGPACK.pack(r) * 2)


def test_common_push_and_hset_records() -> None:
    """One value (LPUSH) or one field and value (HSET) take `_one`'s shortest path;
    more, or longer ones, the general one: msgpack's bytes either way."""
    ops = [
        ("lpush", (b"v",)),
        ("lpush", (b"a", b"b")),
        ("lpush", (b"x" * 256,)),
        ("hset", ((b"f", b"vv"),)),
        ("hset", ((b"", b"v"), (b"g", b""))),
        ("hset", ((b"f" * 255, b"v" * 256),)),
    ]
    for op in ops:
        for dbi in (0, 5):
            r = (700, 1_790_000_000_000, ((dbi, b"key", op),), (op[0],), None)
            _same(plainpack.pack_records([r, r]), MSGPACK.pack(r) * 2)


def test_the_codec_uses_it_when_compiled() -> None:
    """As Python it is slower than msgpack's C packer: the codec takes it only when
    compiled, and either way writes msgpack's bytes."""
    assert plainpack.COMPILED is (native.STATE == "compiled")
    assert codec._OWN_PLAIN is plainpack.COMPILED
    r = (700, 1_790_000_000_000, ((0, b"k", ("set", b"v", None)),), ("set",), None)
    _same(encode_records([r, r]), MSGPACK.pack(r) * 2)


# The common record (`plainpack._one`): one op on a small database, one command, no
# metadata, a head in the fast widths; with the edges of its shape around it (a
# database past 127, a key of 256 bytes, an op of 16 items, no op name, metadata).
ONE_OP = st.tuples(
    st.one_of(st.integers(0, 127), st.sampled_from([128, 2**40, -1])),
    st.one_of(st.binary(max_size=40), st.sampled_from([b"k" * 255, b"k" * 256])),
    st.one_of(
        st.tuples(STRS).map(tuple),
        st.builds(lambda name, rest: (name, *rest), STRS, st.lists(VALUES, max_size=4)),
        st.lists(VALUES, min_size=15, max_size=17).map(tuple),
        # LPUSH's and HSET's shapes: values, or pairs of them (one of either: fast)
        st.builds(lambda name, xs: (name, tuple(xs)), STRS, st.lists(BYTES, max_size=2)),
        st.builds(
            lambda name, ps: (name, tuple(ps)), STRS, st.lists(st.tuples(BYTES, BYTES), max_size=2)
        ),
    ),
)
COMMON = st.tuples(
    st.integers(0x100, 2**32 - 1),
    st.integers(2**32, 2**62 - 1),
    ONE_OP.map(lambda op: (op,)),
    STRS.map(lambda s: (s,)),
    st.none() | write_metas(2**40, 8),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(COMMON, min_size=1, max_size=6))
def test_common_records_pack_as_msgpack_packs_them(records: list[UpdateRecord]) -> None:
    _records_as_msgpack(records)


# Records of a few keys, times, databases, ops and commands, in batches:
# `plainpack._one`'s parts kept from the record before (`_LAST`) must follow each
# change of any of them, within a batch and from one batch to the next.
REPEATING = st.tuples(
    st.integers(0x100, 0x300),
    st.sampled_from([2**32, 2**32 + 1]),
    st.tuples(
        st.sampled_from([0, 1, 127]),
        st.sampled_from([b"", b"k", b"counter:1", b"counter:2"]),
        st.sampled_from(
            [
                ("set", b"v", None),
                ("set", b"17", -1),
                ("set", b"x" * 300, None),
                ("lpush", (b"a",)),
                ("rpush", (b"a", b"b")),
                ("hset", ((b"f", b"v"),)),
                ("hsetf", b"f", b"v"),
                ("del",),
            ]
        ),
    ).map(lambda op: (op,)),
    st.sampled_from([("set",), ("incr",), ("hset",), ("lpush",)]),
    st.none(),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(REPEATING, min_size=1, max_size=8), min_size=1, max_size=3))
def test_records_of_repeated_keys_pack_as_msgpack_packs_them(
    batches: list[list[UpdateRecord]],
) -> None:
    for records in batches:
        _records_as_msgpack(records)
