"""ACL users: ACL SETUSER/GETUSER/LIST/USERS/DELUSER/WHOAMI/CAT/DRYRUN/LOG/LOAD/SAVE,
AUTH as a user, NOPERM for commands, keys and channels (inside MULTI and at EXEC too),
--aclfile, and the categories of our TS.* verbs.

Most tests are differential against redis-server. The `diff` servers are shared by the
whole suite: every user made here has a name starting with `acl-` and is deleted at the
end of its test, and the default user is never changed there (tests that change it
start servers of their own).

Redis describes single-command rules (`+get +set`) in its hash table's order, which is
seeded at random on each start: such rule lists are compared with those words sorted
(`rules_normalized`); everything else is compared byte for byte."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import commands.families  # noqa: F401  (the whole command table, as the server has it)
from commands.acl_categories import CATEGORIES
from commands.registry import COMMANDS
from tests.conftest import ROOT, Differ, ServerProcess, start_redis, start_temporalstore
from tests.resp_client import RawClient, parse

PASSWORD_HASH = b"30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"  # "pw"


OWN = (b"ts.", b"waitaof", b"client|setinfo")


def _sorted_rules(text: bytes) -> bytes:
    """A rule list with its single-command words (after the categories) sorted, and
    those naming our own commands left out: Redis 7.0 has none of them, and where the
    categories chosen do not cover them they are named one by one."""
    words = text.split(b" ")
    single = [w for w in words if w[:1] in (b"+", b"-") and w[1:2] != b"@"]
    others = [w for w in words if w not in single]
    return b" ".join(others + sorted(w for w in single if not w[1:].startswith(OWN)))


def rules_normalized(raw: bytes) -> Any:
    """A reply with every rule list in it (ACL LIST lines, GETUSER's commands) sorted."""

    def walk(v: Any) -> Any:
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "$" and b"@all" in v[1]:
            return ("$", _sorted_rules(v[1]))
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], list):
            return (v[0], [walk(x) for x in v[1]])
        return v

    return walk(parse(raw))


def port_of(c: RawClient) -> int:
    port: int = c.sock.getpeername()[1]
    return port


def connect(port: int, resp: int) -> RawClient:
    c = RawClient(port)
    if resp == 3:
        assert c.call("HELLO", "3").startswith(b"%")
    return c


class Pair:
    """A connection to each server (same protocol), compared reply by reply."""

    def __init__(self, diff: Differ, user: str | None = None, password: str = "pw") -> None:
        self.diff = diff
        self.ref = connect(port_of(diff.ref), diff.resp)
        self.ours = connect(port_of(diff.ours), diff.resp)
        if user is not None:
            self.check("AUTH", user, password)

    def check(
        self, *args: str | bytes | int, normalize: Callable[[bytes], Any] | None = None
    ) -> bytes:
        r, o = self.ref.call(*args), self.ours.call(*args)
        same = (normalize(r) == normalize(o)) if normalize else r == o
        self.diff.record(1, same)
        assert same, f"{args!r} (RESP{self.diff.resp})\nredis: {r!r}\nours:  {o!r}"
        return r

    def run(self, script: str) -> None:
        import shlex

        for line in script.strip().splitlines():
            if line.strip() and not line.strip().startswith("#"):
                self.check(*shlex.split(line.strip()))

    def closed(self) -> tuple[bool, bool]:
        return self.ref.read_closed(), self.ours.read_closed()

    def close(self) -> None:
        self.ref.close()
        self.ours.close()


@pytest.fixture
def users(diff: Differ) -> Iterator[list[str]]:
    """Names of the users a test makes; deleted afterwards (from fresh connections: the
    test's own may be logged in as a user, or closed)."""
    made: list[str] = []
    yield made
    for port in (port_of(diff.ref), port_of(diff.ours)):
        c = RawClient(port)
        try:
            if made:
                c.call("ACL", "DELUSER", *made)
            lines = [x[1] for x in parse(c.call("ACL", "LIST"))[1]]
            assert b"user default on nopass ~* &* +@all" in lines  # left as it was
            assert not [n for n in lines if n.startswith(b"user acl-")]
        finally:
            c.close()


def run_acl(diff: Differ, script: str) -> None:
    """Like `diff.run`, with the rule lists in ACL GETUSER and ACL LIST replies sorted."""
    import shlex

    for line in script.strip().splitlines():
        args = shlex.split(line.strip())
        describes = args[:2] in (["ACL", "GETUSER"], ["ACL", "LIST"])
        diff.check(*args, normalize=rules_normalized if describes else None)


def test_setuser_getuser_list(diff: Differ, users: list[str]) -> None:
    users += ["acl-a", "acl-b", "acl-c", "acl-d", "acl-e"]
    run_acl(
        diff,
        """
        ACL SETUSER acl-a
        ACL GETUSER acl-a
        ACL SETUSER acl-a on >pw ~app:* %R~ro:* %W~wo:* &news.* +@read -@hash +hset
        ACL GETUSER acl-a
        ACL SETUSER acl-b reset
        ACL GETUSER acl-b
        ACL SETUSER acl-b on nopass allkeys allchannels +@all -@dangerous
        ACL GETUSER acl-b
        ACL SETUSER acl-c on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4
        ACL SETUSER acl-c >other >pw <other ~a* ~a* %R~a* %RW~b* resetkeys ~k* +get
        ACL GETUSER acl-c
        ACL SETUSER acl-c nopass
        ACL GETUSER acl-c
        ACL SETUSER acl-c resetpass off -get +select|0 +select|1
        ACL GETUSER acl-c
        ACL SETUSER acl-d on >pw (~x* +get) "(%R~y* &c +@read" -@write) ~z* +@string
        ACL GETUSER acl-d
        ACL SETUSER acl-d clearselectors
        ACL GETUSER acl-d
        ACL SETUSER acl-e on nopass +client|list +config -config|set skip-sanitize-payload
        ACL SETUSER acl-e allcommands -@admin +@admin nocommands +@pubsub &*
        ACL GETUSER acl-e
        ACL SETUSER acl-e sanitize-payload reset
        ACL GETUSER acl-e
        ACL USERS
        ACL LIST
        ACL DELUSER acl-e acl-e nosuch
        ACL USERS
    """,
    )
    run_acl(
        diff,
        """
        ACL SETUSER acl-e on +get +set +hset -@all +ping +echo
        ACL SETUSER acl-e +@hash -hset -hget +client|kill +config
        ACL GETUSER acl-e
        ACL LIST
        ACL SETUSER acl-e +@all -get -set -client|kill -@geo
        ACL GETUSER acl-e
        ACL SETUSER acl-e -@all +@read -@hash +@write -@admin
        ACL GETUSER acl-e
    """,
    )
    # One single-command rule, so one possible order: byte for byte, unsorted.
    diff.check("ACL", "SETUSER", "acl-a", "reset", "on", "nopass", "~*", "+@read", "-get")
    diff.check("ACL", "GETUSER", "acl-a")
    ref, ours = diff.both("ACL", "LIST")
    assert [x for x in parse(ref)[1] if b"acl-a" in x[1]] == [
        x for x in parse(ours)[1] if b"acl-a" in x[1]
    ]


def test_setuser_errors(diff: Differ, users: list[str]) -> None:
    users += ["acl-err", "acl x"]
    diff.check("ACL", "SETUSER", b"acl\x00x")
    diff.check("ACL", "SETUSER", b"acl\tx")
    diff.check("ACL", "SETUSER", "acl-err", b"bad\nrule")
    diff.check("ACL", "SETUSER", "acl-err", b"+get\x00x", b"%R~a\x00b")
    diff.run("""
        ACL SETUSER "acl x"
        ACL SETUSER acl-err on nosuchrule
        ACL SETUSER acl-err +nosuch
        ACL SETUSER acl-err -nosuch
        ACL SETUSER acl-err +@nosuch
        ACL SETUSER acl-err +config|nosuch
        ACL SETUSER acl-err +config|get|x
        ACL SETUSER acl-err +get|
        ACL SETUSER acl-err + - +@
        ACL SETUSER acl-err #abc
        ACL SETUSER acl-err #30C952FAB122C3F9759F02A6D95C3758B246B4FEE239957B2D4FEE46E26170C4
        ACL SETUSER acl-err !abc
        ACL SETUSER acl-err <nosuchpassword
        ACL SETUSER acl-err allkeys ~x
        ACL SETUSER acl-err allchannels &x
        ACL SETUSER acl-err %RR~x
        ACL SETUSER acl-err %~x
        ACL SETUSER acl-err %X~x
        ACL SETUSER acl-err "~a b"
        ACL SETUSER acl-err "&a b"
        ACL SETUSER acl-err (~x +get
        ACL SETUSER acl-err on (~x +nosuch)
        ACL SETUSER acl-err (on)
        ACL GETUSER acl-err
        ACL SETUSER acl-err on >pw +get
        ACL SETUSER acl-err off +set +nosuch
        ACL GETUSER acl-err
        ACL SETUSER acl-err %R %R~ ~ "" +@ALL ALLKEYS
        ACL GETUSER acl-err
    """)


RANDOM_RULES = [
    *(f"{sign}@{c}" for sign in "+-" for c in (*CATEGORIES, "all")),
    *(f"{sign}{c}" for sign in "+-" for c in ("get", "set", "config", "config|get",
      "client", "client|kill", "hset", "del", "geoadd", "eval", "acl", "acl|setuser",
      "object|encoding", "xadd", "ping")),
    "+select|0", "+debug|x", "allcommands", "nocommands", "~a*", "%R~r*", "%W~w*", "&c*",
    "allkeys", "resetkeys", "reset", "on", "nopass", ">pw", "(~s* +get)", "clearselectors",
    "%RR~x", "#abc", "<nope", "+nosuch", "allchannels", "&x",
]  # fmt: skip
RANDOM_CALLS = [
    ("get", "a1"), ("get", "s1"), ("set", "w1", "v"), ("set", "r1", "v"), ("get", "r1"),
    ("config", "get", "x"), ("client", "kill", "x"), ("select", "0"), ("select", "1"),
    ("publish", "c1", "m"), ("publish", "x1", "m"), ("psubscribe", "c*"), ("ping",),
    ("copy", "r1", "w1"), ("hset", "a", "f", "v"), ("del", "a"), ("acl", "whoami"),
]  # fmt: skip


def test_random_rules_match_redis(diff: Differ) -> None:
    """Random rule lists (a fixed seed): the same replies, descriptions and DRYRUN
    verdicts as redis-server."""
    import random

    rnd = random.Random(7)
    for n in range(40):
        name = f"acl-rnd-{n}"
        try:
            for _ in range(2):
                rules = [rnd.choice(RANDOM_RULES) for _ in range(rnd.randint(1, 6))]
                diff.check("ACL", "SETUSER", name, *rules)
            diff.check("ACL", "GETUSER", name, normalize=rules_normalized)
            ref, ours = diff.both("ACL", "LIST")
            lines = [
                [_sorted_rules(x[1]) for x in parse(raw)[1] if x[1].startswith(b"user acl-rnd")]
                for raw in (ref, ours)
            ]
            assert lines[0] == lines[1], rules
            for call in RANDOM_CALLS:
                diff.check("ACL", "DRYRUN", name, *call)
        finally:
            diff.both("ACL", "DELUSER", name)


def test_acl_subcommand_errors(diff: Differ) -> None:
    diff.run("""
        ACL DELUSER default
        ACL DELUSER nosuch default
        ACL DELUSER nosuch
        ACL GETUSER nosuch
        ACL CAT nosuch
        ACL CAT read write
        ACL GENPASS 0
        ACL GENPASS 4097
        ACL GENPASS -1
        ACL GENPASS x
        ACL GENPASS 1 2
        ACL LOG x
        ACL LOG 1 2
        ACL LOAD
        ACL SAVE
        ACL LOAD x
        ACL DRYRUN nosuch get k
        ACL DRYRUN default nosuch
        ACL DRYRUN default get
        ACL DRYRUN default config
        ACL DRYRUN default config nosuch
        ACL DRYRUN default config get
        ACL DRYRUN default get k
        ACL DRYRUN default
        ACL WHOAMI
        ACL WHOAMI x
        ACL USERS x
        ACL LIST x
        ACL GETUSER
        ACL SETUSER
        ACL
        ACL NOSUCH
        ACL HELP
        ACL help x
        CLIENT KILL USER nosuch
        COMMAND INFO acl|setuser acl|whoami acl|cat acl|dryrun
    """)
    for bits, length in (("", 64), ("1", 1), ("5", 2), ("128", 32), ("4096", 1024)):
        args = ("ACL", "GENPASS", *([bits] if bits else []))
        for raw in diff.both(*args):
            kind, value = parse(raw)
            assert kind == "$" and re.fullmatch(rb"[0-9a-f]{%d}" % length, value), raw
        diff.record(1, True)


def _served() -> set[bytes]:
    names = set()
    for c in COMMANDS.values():
        names.add(c.name.encode())
        names.update(s.name.encode() for s in (c.subcommands or {}).values())
    return names


def test_acl_cat(diff: Differ) -> None:
    assert diff.check("ACL", "CAT") == b"*21\r\n" + b"".join(
        b"$%d\r\n%s\r\n" % (len(c), c.encode()) for c in CATEGORIES
    )
    served = _served()
    known = {x[1] for x in parse(diff.ref.call("COMMAND", "LIST"))[1]}
    for category in [*CATEGORIES, "READ", "Admin"]:
        ref, ours = diff.both("ACL", "CAT", category)
        r = {x[1] for x in parse(ref)[1]}
        o = {x[1] for x in parse(ours)[1]}
        # Redis' commands that we serve, plus ours (TS.*, WAITAOF, CLIENT SETINFO...).
        assert o == (r & served) | (o - known), category
        assert o <= served, category
        diff.record(1, True)


def test_acl_cat_agrees_with_command_info(ts_server: ServerProcess) -> None:
    """Every command ACL CAT lists under a category has it in COMMAND INFO, and back."""
    c = RawClient(ts_server.port)
    try:
        names = sorted(_served())
        infos = parse(c.call("COMMAND", "INFO", *names))[1]
        cats: dict[bytes, set[bytes]] = {}
        for name, info in zip(names, infos, strict=True):
            cats[name] = {x[1] for x in info[1][6][1]}
        for category in CATEGORIES:
            listed = {x[1] for x in parse(c.call("ACL", "CAT", category))[1]}
            described = {n for n, cs in cats.items() if b"@" + category.encode() in cs}
            assert listed == described, category
    finally:
        c.close()


def test_dryrun(diff: Differ, users: list[str]) -> None:
    users += ["acl-dry"]
    diff.run("""
        ACL SETUSER acl-dry on ~app:* %R~ro:* %W~wo:* &chan.* +@read +set +publish +subscribe
        ACL SETUSER acl-dry +psubscribe +select|0 +client|id -hget +copy +lmove
        ACL DRYRUN acl-dry get app:1
        ACL DRYRUN acl-dry get other
        ACL DRYRUN acl-dry get ro:1
        ACL DRYRUN acl-dry get wo:1
        ACL DRYRUN acl-dry set wo:1 v
        ACL DRYRUN acl-dry set ro:1 v
        ACL DRYRUN acl-dry set app:1 v GET
        ACL DRYRUN acl-dry mget app:1 ro:1 wo:1
        ACL DRYRUN acl-dry mget app:1 other
        ACL DRYRUN acl-dry copy ro:1 wo:1
        ACL DRYRUN acl-dry copy wo:1 ro:1
        ACL DRYRUN acl-dry lmove ro:1 wo:1 left right
        ACL DRYRUN acl-dry hget app:1 f
        ACL DRYRUN acl-dry hset app:1 f v
        ACL DRYRUN acl-dry del app:1
        ACL DRYRUN acl-dry publish chan.a m
        ACL DRYRUN acl-dry publish other m
        ACL DRYRUN acl-dry subscribe chan.a chan.b other
        ACL DRYRUN acl-dry psubscribe chan.*
        ACL DRYRUN acl-dry psubscribe chan.a
        ACL DRYRUN acl-dry unsubscribe other
        ACL DRYRUN acl-dry select 0
        ACL DRYRUN acl-dry select 1
        ACL DRYRUN acl-dry client id
        ACL DRYRUN acl-dry client list
        ACL DRYRUN acl-dry auth x y
        ACL DRYRUN acl-dry ping
        ACL DRYRUN acl-dry keys *
        ACL SETUSER acl-dry (~other +hget)
        ACL DRYRUN acl-dry hget other f
        ACL DRYRUN acl-dry hget app:1 f
        ACL DRYRUN acl-dry get other
    """)


def test_auth_and_noperm(diff: Differ, users: list[str]) -> None:
    users += ["acl-u", "acl-off", "acl-any"]
    diff.run("""
        ACL SETUSER acl-u on >pw ~app:* %R~ro:* &chan.* +@read +@string -getdel +select|0
        ACL SETUSER acl-u +publish +client|info +client|setname +hello +reset +acl|whoami +ping
        ACL SETUSER acl-off off >pw +@all ~*
        ACL SETUSER acl-any on nopass +@all ~* &*
        SET app:1 v
    """)
    p = Pair(diff)
    try:
        p.run("""
            AUTH acl-u wrong
            AUTH acl-off pw
            AUTH nosuch pw
            ACL WHOAMI
            AUTH acl-u pw
            ACL WHOAMI
            GET app:1
            GET other
            GET ro:1
            SET ro:1 v
            SET app:2 v
            GETDEL app:2
            HGET app:1 f
            SELECT 0
            SELECT 1
            PUBLISH chan.x m
            PUBLISH other m
            MGET app:1 other
            ACL LIST
            CLIENT SETNAME acl-client
            AUTH acl-any anything
            ACL WHOAMI
            AUTH default x
            ACL WHOAMI
            AUTH acl-u pw
            RESET
            ACL WHOAMI
            AUTH acl-off pw
        """)
        diff.check("ACL", "SETUSER", "acl-off", "on")
        p.check("AUTH", "acl-off", "pw")
        p.check("ACL", "WHOAMI")
        # Turning a user off does not log out its connections (as Redis).
        diff.check("ACL", "SETUSER", "acl-off", "off")
        p.check("GET", "app:1")
        p.check("HELLO", str(diff.resp), "AUTH", "acl-off", "pw")
        r, o = (
            p.ref.call("HELLO", str(diff.resp), "AUTH", "acl-u", "pw"),
            p.ours.call("HELLO", str(diff.resp), "AUTH", "acl-u", "pw"),
        )
        assert re.sub(rb"id\r\n:\d+", b"", r) == re.sub(rb"id\r\n:\d+", b"", o)
        for c in (p.ref, p.ours):
            info = parse(c.call("CLIENT", "INFO"))[1]
            assert b" user=acl-u " in info, info
        diff.check("CLIENT", "KILL", "USER", "acl-u")
        assert p.closed() == (True, True)
    finally:
        p.close()


def test_multi_and_exec(diff: Differ, users: list[str]) -> None:
    users += ["acl-tx", "acl-noexec"]
    diff.run("""
        ACL SETUSER acl-tx on >pw ~app:* +multi +exec +discard +get +set +acl +watch
        ACL SETUSER acl-noexec on >pw ~* +multi +get
    """)
    p = Pair(diff, "acl-tx")
    q = Pair(diff, "acl-noexec")
    try:
        p.run("""
            MULTI
            GET app:1
            GET other
            HGET app:1 f
            EXEC
            MULTI
            SET app:1 v
            GET app:1
            ACL SETUSER acl-tx -get
            GET app:1
            EXEC
            MULTI
            ACL SETUSER acl-tx +get resetkeys ~other
            SET app:1 w
            GET other
            EXEC
            MULTI
            DISCARD
        """)
        q.run("""
            MULTI
            GET x
            EXEC
            GET x
            WATCH x
        """)
        diff.check("ACL", "SETUSER", "acl-tx", "~app:*")
        diff.check("GET", "app:1")
    finally:
        p.close()
        q.close()


def _log_normalized(raw: bytes) -> Any:
    """ACL LOG with each entry's age and client info (times, ids, ports) left out."""
    kind, entries = parse(raw)
    out = []
    for entry in entries:
        items = entry[1]
        pairs = dict(zip((k[1] for k in items[0::2]), items[1::2], strict=True))
        info = pairs.pop(b"client-info")[1]
        pairs.pop(b"age-seconds")
        cmd = re.search(rb" cmd=(\S+) user=(\S+) ", info)
        assert cmd is not None, info
        out.append((entry[0], sorted(pairs.items()), cmd.groups()))
    return kind, out


def test_acl_log(diff: Differ, users: list[str]) -> None:
    users += ["acl-log"]
    diff.run("""
        ACL SETUSER acl-log on >pw ~app:* &c +get +publish +multi +exec +acl|log
        ACL LOG RESET
        ACL LOG
    """)
    p = Pair(diff)
    try:
        p.run("""
            AUTH acl-log wrong
            AUTH nosuch pw
            AUTH acl-log pw
            GET other
            GET other
            GET app:1
            SET app:1 v
            PUBLISH nope m
            MULTI
            GET other2
            EXEC
        """)
        for args in (("ACL", "LOG"), ("ACL", "LOG", "2"), ("ACL", "LOG", "-1")):
            p.check(*args, normalize=_log_normalized)
        diff.check("ACL", "LOG", "100", normalize=_log_normalized)
        diff.check("ACL", "LOG", "RESET")
        diff.check("ACL", "LOG")
    finally:
        p.close()


def test_deleting_a_user_disconnects_its_clients(diff: Differ, users: list[str]) -> None:
    users += ["acl-del", "acl-self", "acl-sub"]
    diff.run("""
        ACL SETUSER acl-del on >pw +@all ~*
        ACL SETUSER acl-self on >pw +@all ~*
        ACL SETUSER acl-sub on >pw +@all ~* resetchannels &news.* &sport
    """)
    victim, other, me = Pair(diff, "acl-del"), Pair(diff), Pair(diff, "acl-self")
    sub = Pair(diff, "acl-sub")
    try:
        other.check("PING")
        diff.check("ACL", "DELUSER", "acl-del")
        assert victim.closed() == (True, True)
        other.check("PING")  # a default-user connection stays
        me.check("ACL", "DELUSER", "acl-self")  # the reply comes, then the close
        assert me.closed() == (True, True)
        sub.check("SUBSCRIBE", "news.a")
        diff.check("ACL", "SETUSER", "acl-sub", "&more")  # more channels: kept
        sub.check("PING")
        diff.check("ACL", "SETUSER", "acl-sub", "resetchannels", "&sport")  # news.* revoked
        assert sub.closed() == (True, True)
    finally:
        for pair in (victim, other, me, sub):
            pair.close()


# -- --aclfile, requirepass ------------------------------------------------------------------

ACLFILE = """\
user default on nopass ~* &* +@all
user alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~app:* resetchannels -@all +@read +set
user bob off nopass ~* &* +@all -@dangerous

user carol on >secret %R~r* (~w* +set) resetchannels &ch -@all +get +hget
"""  # noqa: E501


@pytest.fixture
def aclfile_pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess, Path, Path]]:
    # Paths of one length, so that replies naming them differ in nothing else.
    ref_file, ours_file = tmp_path / "r" / "users.acl", tmp_path / "o" / "users.acl"
    for f in (ref_file, ours_file):
        f.parent.mkdir()
        f.write_text(ACLFILE)
    ref = start_redis(["--aclfile", str(ref_file)])
    try:
        ours = start_temporalstore(["--aclfile", str(ours_file)])
    except BaseException:
        ref.stop()
        raise
    yield ref, ours, ref_file, ours_file
    ref.stop()
    ours.stop()


def test_aclfile(aclfile_pair: tuple[ServerProcess, ServerProcess, Path, Path]) -> None:
    ref_srv, ours_srv, ref_file, ours_file = aclfile_pair
    ref, ours = RawClient(ref_srv.port), RawClient(ours_srv.port)
    carol = [RawClient(ref_srv.port), RawClient(ours_srv.port)]

    def check(*args: str, normalize: Callable[[bytes], Any] | None = None) -> None:
        r, o = ref.call(*args), ours.call(*args)
        if normalize is not None:
            r, o = normalize(r), normalize(o)  # type: ignore[assignment]
        assert r == o, (args, r, o)

    def paths(raw: bytes) -> bytes:
        for f in (ref_file, ours_file):
            raw = raw.replace(str(f).encode(), b"FILE")
        return raw

    try:
        check("ACL", "LIST", normalize=rules_normalized)
        check("ACL", "USERS")
        check("AUTH", "alice", "pw")
        check("GET", "app:1")
        check("GET", "other")
        check("AUTH", "bob", "x")
        check("AUTH", "default", "x")
        for c in carol:
            assert c.call("AUTH", "carol", "secret") == b"+OK\r\n"
            assert c.call("SET", "w1", "v") == b"+OK\r\n"
        check("CONFIG", "GET", "aclfile", normalize=paths)
        # ACL SAVE writes what ACL LIST shows.
        check("ACL", "SETUSER", "dave", "on", ">pw", "+@hash", "~h*")
        check("ACL", "SAVE")
        saved = [
            sorted(_sorted_rules(line) for line in f.read_bytes().splitlines())
            for f in (ref_file, ours_file)
        ]
        assert saved[0] == saved[1]
        assert len(saved[0]) == 5
        # A file with errors: nothing changes, and every error is named.
        bad = "user default on nopass ~* &* +@all\nuser eve on +nosuch +@nosuch\nbob\n"
        bad += "user fred %X~y\nuser eve on\nuser (bad on\n"
        for f in (ref_file, ours_file):
            f.write_text(bad)
        check("ACL", "LOAD", normalize=paths)
        check("ACL", "USERS")
        # A good file replaces the users; clients logged in as them are disconnected.
        for f in (ref_file, ours_file):
            f.write_text("user carol on nopass ~* +@all\nuser zed on >z +ping\n")
        check("ACL", "LOAD")
        check("ACL", "LIST")
        for c in carol:
            assert c.read_closed()
        check("PING")  # logged in as the default user: still connected
        # requirepass is the default user's password, as in Redis.
        check("CONFIG", "SET", "requirepass", "pw")
        check("ACL", "LIST")
        check("AUTH", "pw")
        check("CONFIG", "SET", "requirepass", "")
        check("ACL", "LIST")
        check("AUTH", "pw")
        for f in (ref_file, ours_file):
            f.unlink()
        check("ACL", "LOAD", normalize=paths)
    finally:
        for c in [ref, ours, *carol]:
            c.close()


def _serve_fails(tmp_path: Path, *flags: str) -> str:
    """Run `temporalstore serve` expecting it to refuse to start; its stderr."""
    cmd = [sys.executable, "-m", "proxy.cli", "serve", "--port", "0"]
    cmd += ["--storage", f"file://{tmp_path}/data", *flags]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=60, check=False)
    assert done.returncode != 0, done
    return done.stderr.decode()


def test_aclfile_with_errors_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "users.acl"
    path.write_text("user alice on +nosuch\nuser bob\nuser bob\nnotuser x\n")
    expected = (
        f"temporalstore: --aclfile: {path}:1: Error in applying operation '+nosuch': Unknown "
        f"command or category name in ACL. WARNING: Duplicate user 'bob' found on line 3. "
        f"{path}:4 should start with user keyword followed by the username. WARNING: ACL "
        "errors detected, no change to the previously active ACL rules was performed"
    )
    assert expected in _serve_fails(tmp_path, "--aclfile", str(path))
    missing = tmp_path / "missing.acl"
    assert (
        f"temporalstore: --aclfile: Error loading ACLs, opening file '{missing}': No such file"
        in _serve_fails(tmp_path, "--aclfile", str(missing))
    )


def test_requirepass_and_default_user() -> None:
    """--requirepass sets the default user's password; an aclfile's default user line
    replaces it (as Redis does); ACL SETUSER default takes effect for new connections."""
    ref = start_redis(["--requirepass", "sec"])
    ours = start_temporalstore(["--requirepass", "sec"])
    try:
        clients = [RawClient(ref.port), RawClient(ours.port)]
        for c in clients:
            assert c.call("AUTH", "sec") == b"+OK\r\n"
        replies = [
            [c.call(*args) for args in (
                ("ACL", "LIST"),
                ("ACL", "SETUSER", "default", "resetpass", "nopass"),
            )]
            for c in clients
        ]  # fmt: skip
        assert replies[0] == replies[1]
        fresh = [RawClient(ref.port), RawClient(ours.port)]
        assert [c.call("GET", "k") for c in fresh] == [b"$-1\r\n"] * 2
        for c in clients:
            rules = (">new", "-@all", "+get", "+auth")
            assert c.call("ACL", "SETUSER", "default", *rules) == b"+OK\r\n"
        late = [RawClient(ref.port), RawClient(ours.port)]
        for c in late:
            assert c.call("GET", "k").startswith(b"-NOAUTH"), c
            assert c.call("AUTH", "new") == b"+OK\r\n"
            assert c.call("GET", "k") == b"$-1\r\n"
            assert c.call("SET", "k", "v") == (
                b"-NOPERM this user has no permissions to run the 'set' command\r\n"
            )
        # Connections made while the default user had no password stay logged in.
        assert [c.call("GET", "k") for c in fresh] == [b"$-1\r\n"] * 2
        for c in clients + fresh + late:
            c.close()
    finally:
        ref.stop()
        ours.stop()


# -- our own commands ----------------------------------------------------------------------------

TS_CATEGORIES = {
    "ts.version": {"@read", "@fast"},
    "ts.asof": {"@keyspace", "@read", "@slow"},
    "ts.history": {"@keyspace", "@read", "@slow"},
    "ts.diff": {"@keyspace", "@read", "@slow"},
    "ts.snapshots": {"@read", "@slow"},
    "ts.checkout": {"@read", "@slow", "@connection"},
    "ts.meta": {"@fast", "@connection"},
    "ts.seal": {"@write", "@slow"},
    "ts.unseal": {"@write", "@admin", "@slow", "@dangerous"},
    "ts.shardseal": {"@write", "@slow"},
    "ts.shardunseal": {"@write", "@admin", "@slow", "@dangerous"},
    "ts.revert": {"@keyspace", "@write", "@slow"},
    "ts.restore": {"@keyspace", "@write", "@slow", "@dangerous"},
    "ts.export": {"@keyspace", "@read", "@slow"},
    "ts.import": {"@keyspace", "@write", "@slow"},
    "ts.merge": {"@keyspace", "@write", "@slow"},
    "ts.branch|create": {"@keyspace", "@write", "@slow"},
    "ts.branch|drop": {"@keyspace", "@write", "@slow", "@dangerous"},
    "ts.branch|list": {"@keyspace", "@read", "@slow"},
    "ts.table|create": {"@write", "@admin", "@slow", "@dangerous"},
    "ts.table|alter": {"@write", "@admin", "@slow", "@dangerous"},
    "ts.table|drop": {"@write", "@admin", "@slow", "@dangerous"},
    "ts.table|list": {"@read", "@slow"},
    "ts.table|info": {"@read", "@slow"},
    "ts.waitdurable": {"@slow", "@connection"},
    "ts.fault": {"@admin", "@slow", "@dangerous"},
    "ts.lastlsn": {"@fast", "@connection"},
    "ts.waitlsn": {"@slow", "@connection"},
    "ts.follow": {"@admin", "@slow", "@dangerous"},
}


def test_ts_categories(ts_server: ServerProcess) -> None:
    c = RawClient(ts_server.port)
    try:
        names = sorted(TS_CATEGORIES)
        infos = parse(c.call("COMMAND", "INFO", *names))[1]
        for name, info in zip(names, infos, strict=True):
            got = {x[1].decode() for x in info[1][6][1]}
            assert got == TS_CATEGORIES[name], name
        for category in ("read", "write", "admin", "dangerous"):
            listed = {x[1].decode() for x in parse(c.call("ACL", "CAT", category))[1]}
            ours = {n for n, cats in TS_CATEGORIES.items() if "@" + category in cats}
            assert {n for n in listed if n.startswith("ts.")} == ours, category
    finally:
        c.close()


def test_ts_verbs_under_acl(ts_server: ServerProcess) -> None:
    admin, user = RawClient(ts_server.port), RawClient(ts_server.port)
    noperm = b"-NOPERM this user has no permissions to run the '%s' command\r\n"
    try:
        assert admin.call("SET", "acl-app:k", "v1") == b"+OK\r\n"
        assert admin.call("SET", "acl-app:k", "v2") == b"+OK\r\n"
        assert admin.call("SET", "acl-secret:k", "s") == b"+OK\r\n"
        rules = ("on", ">pw", "~acl-app:*", "+@read", "+@write", "-@admin", "-@dangerous")
        assert admin.call("ACL", "SETUSER", "acl-ts", *rules) == b"+OK\r\n"
        assert user.call("AUTH", "acl-ts", "pw") == b"+OK\r\n"
        assert user.call("TS.ASOF", "acl-app:k", "BACK", "1") == b"$2\r\nv1\r\n"
        assert user.call("TS.ASOF", "acl-secret:k", "BACK", "0") == (
            b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
        )
        assert user.call("TS.HISTORY", "acl-app:k").startswith(b"*2\r\n")
        assert user.call("TS.REVERT", "acl-app:k", "BACK", "1").startswith(b":")
        assert user.call("TS.SEAL", "acl-snap").startswith(b":")
        assert user.call("TS.UNSEAL", "acl-snap") == noperm % b"ts.unseal"
        assert user.call("TS.TABLE", "CREATE", "t:", "DURABILITY", "SYNC") == (
            noperm % b"ts.table|create"
        )
        assert user.call("TS.TABLE", "LIST").startswith(b"*")
        assert user.call("TS.RESTORE", "VERSION", "1") == noperm % b"ts.restore"
        assert admin.call("ACL", "SETUSER", "acl-ts", "-@write") == b"+OK\r\n"
        assert user.call("TS.REVERT", "acl-app:k", "BACK", "1") == noperm % b"ts.revert"
        assert user.call("TS.VERSION").startswith(b":")
        text = b"This user has no permissions to run the 'ts.seal' command"
        assert admin.call("ACL", "DRYRUN", "acl-ts", "TS.SEAL", "x") == (
            b"$%d\r\n%s\r\n" % (len(text), text)
        )
        assert admin.call("TS.UNSEAL", "acl-snap") == b":1\r\n"
    finally:
        admin.call("ACL", "DELUSER", "acl-ts")
        admin.close()
        user.close()
