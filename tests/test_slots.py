"""Redis Cluster's hash slots (store.slots): CRC16 and the key slot against Redis'
known vectors and redis-py's own implementation (Hypothesis), the slot spread of
`redis-cli --cluster create`, and the slot map's JSON form."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot as redis_key_slot

from store.slots import SLOTS, Shard, SlotMap, crc16, key_slot, spread


def test_crc16_known_vectors() -> None:
    # Redis' crc16.c: "123456789" -> 0x31C3 (its own test vector).
    assert crc16(b"123456789") == 0x31C3
    assert crc16(b"") == 0


@pytest.mark.parametrize(
    ("key", "slot"),
    [
        (b"foo", 12182),
        (b"bar", 5061),
        (b"{user1000}.following", 3443),
        (b"{user1000}.followers", 3443),
        (b"123456789", 0x31C3 % SLOTS),
        (b"{}", crc16(b"{}") % SLOTS),  # an empty tag: the whole key
    ],
)
def test_key_slot_vectors(key: bytes, slot: int) -> None:
    assert key_slot(key) == slot == redis_key_slot(key)


def test_hash_tag_rules() -> None:
    # From Redis' cluster specification: the first { and the first } after it.
    assert key_slot(b"foo{}{bar}") == crc16(b"foo{}{bar}") % SLOTS  # empty tag: whole key
    assert key_slot(b"foo{{bar}}zap") == crc16(b"{bar") % SLOTS
    assert key_slot(b"foo{bar}{zap}") == crc16(b"bar") % SLOTS


@given(st.binary(max_size=64))
def test_key_slot_as_redis_py(key: bytes) -> None:
    assert key_slot(key) == redis_key_slot(key)


@given(st.binary(max_size=8), st.binary(max_size=8), st.binary(max_size=8))
def test_key_slot_with_braces_as_redis_py(a: bytes, b: bytes, c: bytes) -> None:
    key = a + b"{" + b + b"}" + c
    assert key_slot(key) == redis_key_slot(key)


def test_spread_as_redis_cli() -> None:
    assert spread(3) == [(0, 5460), (5461, 10922), (10923, 16383)]
    assert spread(1) == [(0, SLOTS - 1)]
    for n in (2, 5, 7, 100):
        ranges = spread(n)
        assert ranges[0][0] == 0 and ranges[-1][1] == SLOTS - 1
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))


def test_slot_map_json_round_trip() -> None:
    m = SlotMap(3, [Shard("a" * 40, "127.0.0.1", 7000, [(0, 99), (200, 300)])])
    back = SlotMap.from_json(m.to_json())
    assert back == m and back.assigned == 201 and back.owner[250] == 0 and back.owner[150] == -1
    with pytest.raises(ValueError):
        SlotMap(1, [Shard("a", "h", 1, [(0, 10)]), Shard("b", "h", 2, [(10, 20)])])
