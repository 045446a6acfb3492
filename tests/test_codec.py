"""The record codec: the plain-value fast path writes exactly the bytes of the
strict (extension-type) path, and every value type round-trips with its type."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flusher.codec import _pack, decode_record, encode_record
from store import R_CMDS, R_LSN, R_META, R_OPS, R_TIME, UpdateRecord
from store.values import HashSet, HashTable, ZSet
from tests.helpers import write_metas

PLAIN = st.one_of(
    st.binary(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.none(),
    st.sampled_from(["set", "hset", "lpush"]),
)
NESTED = st.one_of(
    PLAIN,
    st.tuples(PLAIN, PLAIN),
    st.lists(st.tuples(st.binary(max_size=5), st.floats(allow_nan=False)), max_size=3).map(tuple),
)


def _strict(r: UpdateRecord) -> bytes:
    meta = None if r[R_META] is None else tuple(r[R_META])
    return _pack((r[R_LSN], r[R_TIME], r[R_OPS], r[R_CMDS], meta))


@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 15), st.tuples(st.binary(max_size=4), st.integers(0, 15))),
            st.binary(max_size=10),
            st.lists(NESTED, min_size=1, max_size=4).map(tuple),
        ),
        min_size=1,
        max_size=4,
    ),
    write_metas(99, 4),
)
def test_plain_records_encode_as_the_strict_packer_does(ops: list[Any], meta: Any) -> None:
    r = (7, 1_700_000_000_000, tuple(ops), tuple("set" for _ in ops), meta)
    assert encode_record(r) == _strict(r)


def test_values_keep_their_types_through_a_record() -> None:
    z = ZSet()
    z.add(b"m", 1.5)
    values: list[Any] = [
        HashTable({b"f": b"v"}),
        {b"f": b"v"},
        deque([b"a", b"b"]),
        {b"x"},
        HashSet([b"y"]),
        z,
    ]
    for v in values:
        r = (3, 5, ((0, b"k", ("restore", v, None)),), ("restore",), None)
        data = encode_record(r)
        assert data == _strict(r)
        back = decode_record(data)
        got = back[R_OPS][0][2][1]
        assert type(got) is type(v)
        if isinstance(v, ZSet):
            assert isinstance(got, ZSet) and list(got.scores.items()) == list(v.scores.items())
        else:
            assert got == v


def test_a_raw_string_comes_back_as_bytes() -> None:
    """msgpack writes a bytearray (APPEND's raw string) as a binary, so it comes
    back as bytes: embstr when short, as Redis reloads it from an RDB file."""
    r = (3, 5, ((0, b"k", ("set", bytearray(b"raw"), None)),), ("set",), None)
    got = decode_record(encode_record(r))[R_OPS][0][2][1]
    assert type(got) is bytes
    assert got == b"raw"
