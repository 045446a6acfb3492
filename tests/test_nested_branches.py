"""Branches of branches: forks of a branch (now or at a point) read through the chain of
parents as of each fork; TS.MERGE between any two branches; TS.BRANCH LIST shows each
parent; dropping a parent is refused unless CASCADE; replay and checkpoints give back the
same tree. A Hypothesis state machine checks every line against a model of dicts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import commands.families  # noqa: F401
from commands.branch_lookup import checkout_branch
from commands.session import Session
from flusher.checkpoint import image, load_image
from store import Store
from tests.helpers import make_session, run


def on(s: Session, line: str) -> None:
    if line == "main":
        s.branch = None
        s.select(s.dbi)
    else:
        checkout_branch(s, line.encode())


def contents(s: Session, line: str) -> dict[bytes, bytes]:
    on(s, line)
    keys = sorted(run(s, "KEYS", "*"))
    values = run(s, "MGET", *keys) if keys else []
    assert run(s, "DBSIZE") == len(keys)
    on(s, "main")
    return dict(zip(keys, values, strict=True))


def test_a_branch_of_a_branch_reads_through_its_parents() -> None:
    s, _ = make_session(1)
    run(s, "SET", "k", "main0")
    run(s, "SET", "m", "m0")
    run(s, "TS.BRANCH", "CREATE", "a")
    on(s, "a")
    run(s, "SET", "k", "a1")
    at = s.store.lsn
    run(s, "SET", "k", "a2")
    run(s, "SET", "only-a", "1")
    on(s, "main")
    assert run(s, "TS.BRANCH", "CREATE", "b", "FROM", "BRANCH", "a") == b"OK"
    assert run(s, "TS.BRANCH", "CREATE", "b0", "FROM", "BRANCH", "a", "AT", "VERSION", str(at))
    run(s, "SET", "m", "m1")  # after every fork: no branch sees it
    on(s, "a")
    run(s, "SET", "k", "a3")  # after b's fork: b does not see it
    assert contents(s, "b") == {b"k": b"a2", b"m": b"m0", b"only-a": b"1"}
    assert contents(s, "b0") == {b"k": b"a1", b"m": b"m0"}
    listed = {x[b"name"]: x for x in run(s, "TS.BRANCH", "LIST")}
    assert listed[b"a"][b"parent"] == b"main" and listed[b"b"][b"parent"] == b"a"
    assert listed[b"b0"][b"fork"] == at
    # TS.ASOF on the grandchild before it changed the key reads its parents' history.
    on(s, "b")
    assert run(s, "TS.ASOF", "k", "VERSION", str(at)) == b"a1"
    run(s, "SET", "k", "b1")
    assert run(s, "TS.HISTORY", "k")[-1][b"command"] == b"set"
    on(s, "main")
    # Errors.
    assert run(s, "TS.BRANCH", "CREATE", "x", "FROM", "BRANCH", "nope") == (
        b"ERR no such branch 'nope'"
    )
    assert run(s, "TS.BRANCH", "CREATE", "x", "FROM", "BRANCH", "a", "NEAR", "1") == (
        b"ERR syntax error"
    )
    assert run(s, "TS.BRANCH", "DROP", "a") == (
        b"ERR branch 'a' has branches forked from it (b, b0): drop them first, "
        b"or TS.BRANCH DROP ... CASCADE to drop them too"
    )
    assert run(s, "TS.BRANCH", "DROP", "a", "NOW") == b"ERR syntax error"
    on(s, "b")
    assert run(s, "TS.BRANCH", "DROP", "a", "CASCADE") == b"OK"
    assert s.branch is None and s.store.branches == {}


def test_merges_between_any_two_branches() -> None:
    s, _ = make_session(1)
    run(s, "SET", "k", "0")
    run(s, "TS.BRANCH", "CREATE", "a")
    run(s, "TS.BRANCH", "CREATE", "b", "FROM", "BRANCH", "a")
    run(s, "TS.BRANCH", "CREATE", "c", "FROM", "BRANCH", "a")
    on(s, "b")
    run(s, "SET", "k", "b")
    run(s, "SET", "nb", "1")
    on(s, "a")
    run(s, "SET", "k", "a")  # a changed k after b forked: merging b into a conflicts
    on(s, "main")
    assert run(s, "TS.MERGE", "b", "INTO", "a") == (
        b"ERR CONFLICT merging 'b' into 'a': changed on both sides: k"
    )
    assert run(s, "TS.MERGE", "b", "INTO", "a", "STRATEGY", "OURS") == 1  # nb only
    assert contents(s, "a") == {b"k": b"a", b"nb": b"1"}
    # Into the main line: k was not changed on main since a left it.
    assert run(s, "TS.MERGE", "b") == 2
    assert contents(s, "main") == {b"k": b"b", b"nb": b"1"}
    # A sibling into a sibling: c never changed k, so no conflict.
    assert run(s, "TS.MERGE", "b", "INTO", "c") == 2
    assert contents(s, "c") == contents(s, "b")


@pytest.mark.parametrize("how", ["replay", "checkpoint"])
def test_the_tree_survives_replay_and_checkpoints(how: str) -> None:
    s, sink = make_session(1)
    run(s, "SET", "k", "0")
    run(s, "TS.BRANCH", "CREATE", "a")
    on(s, "a")
    run(s, "SET", "k", "a")
    on(s, "main")
    run(s, "TS.BRANCH", "CREATE", "b", "FROM", "BRANCH", "a")
    on(s, "b")
    run(s, "SET", "j", "b")
    on(s, "main")
    fresh = Store(databases=1)
    if how == "replay":
        for r in sink.records:
            fresh.replay(r)
    else:
        raw, _n = image(s.store)
        load_image(fresh, raw, "test")
    assert fresh.branches[b"b"].parent == b"a" and fresh.branches[b"a"].parent is None
    t, _ = make_session(1)
    t.store = t.server.store = fresh
    t.select(0)
    assert contents(t, "b") == {b"k": b"a", b"j": b"b"} == contents(s, "b")


KEYS = [b"a", b"b", b"c"]
NAMES = ["x", "y", "z", "w"]


class NestedBranches(RuleBasedStateMachine):
    """Random writes, forks of forks, merges (THEIRS) and drops, against a model where
    each line is a dict and a fork copies its parent's dict."""

    def __init__(self) -> None:
        super().__init__()
        self.s, self.sink = make_session(1)
        self.model: dict[str, dict[bytes, bytes]] = {"main": {}}
        self.parent: dict[str, str] = {}
        self.changed: dict[str, set[bytes]] = {}

    def lines(self) -> list[str]:
        return sorted(self.model)

    @rule(data=st.data(), key=st.sampled_from(KEYS), value=st.sampled_from([b"1", b"2", b"3"]))
    def write(self, data: Any, key: bytes, value: bytes) -> None:
        line = data.draw(st.sampled_from(self.lines()))
        on(self.s, line)
        run(self.s, "SET", key, value)
        on(self.s, "main")
        self.model[line][key] = value
        self.changed.get(line, set()).add(key)

    @rule(data=st.data(), key=st.sampled_from(KEYS))
    def delete(self, data: Any, key: bytes) -> None:
        line = data.draw(st.sampled_from(self.lines()))
        on(self.s, line)
        assert run(self.s, "DEL", key) == int(key in self.model[line])
        on(self.s, "main")
        if self.model[line].pop(key, None) is not None:
            self.changed.get(line, set()).add(key)

    @precondition(lambda self: len(self.model) < 5)
    @rule(data=st.data())
    def fork(self, data: Any) -> None:
        name = data.draw(st.sampled_from([n for n in NAMES if n not in self.model]))
        parent = data.draw(st.sampled_from(self.lines()))
        args = ["TS.BRANCH", "CREATE", name]
        if parent != "main":
            args += ["FROM", "BRANCH", parent]
        assert run(self.s, *args) == b"OK"
        self.model[name] = dict(self.model[parent])
        self.parent[name] = parent
        self.changed[name] = set()

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def merge(self, data: Any) -> None:
        source = data.draw(st.sampled_from([n for n in self.lines() if n != "main"]))
        into = data.draw(st.sampled_from([n for n in self.lines() if n != source]))
        got = run(self.s, "TS.MERGE", source, "INTO", into, "STRATEGY", "THEIRS")
        src, dst = self.model[source], self.model[into]
        differ = [k for k in sorted(self.changed[source]) if src.get(k) != dst.get(k)]
        assert got == len(differ)
        for k in differ:
            if k in src:
                dst[k] = src[k]
            else:
                dst.pop(k)
            self.changed.get(into, set()).add(k)

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def drop(self, data: Any) -> None:
        name = data.draw(st.sampled_from([n for n in self.lines() if n != "main"]))
        gone = {name}
        while True:
            more = {n for n, p in self.parent.items() if p in gone} - gone
            if not more:
                break
            gone |= more
        reply = run(self.s, "TS.BRANCH", "DROP", name)
        if gone != {name}:
            assert reply.startswith(b"ERR branch '")
            reply = run(self.s, "TS.BRANCH", "DROP", name, "CASCADE")
        assert reply == b"OK"
        for n in gone:
            del self.model[n], self.parent[n], self.changed[n]

    @invariant()
    def every_line_matches(self) -> None:
        for line in self.lines():
            assert contents(self.s, line) == self.model[line], line

    def teardown(self) -> None:
        fresh = Store(databases=1)
        for r in self.sink.records:
            fresh.replay(r)
        t, _ = make_session(1)
        t.store = t.server.store = fresh
        t.select(0)
        for line in self.lines():
            assert contents(t, line) == self.model[line], line


NestedBranches.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_nested_branches_model = NestedBranches.TestCase
