"""History at bounded cost (issue 11): what a write costs does not grow with the
versions a seal or a branch pins. Asserted by counting the work, never by timing."""

from __future__ import annotations

from typing import Any

import pytest

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
