"""MIGRATE, and the cluster commands of a server that is not a cluster node, against
redis-server: the same MIGRATE from both servers to a third one (a redis-server),
replies byte-compared and what arrived compared key by key; COMMAND's view of them
(movablekeys, GETKEYS, LIST FILTERBY PATTERN)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.conftest import Differ, ServerProcess, start_redis
from tests.resp_client import RawClient
from tests.test_notifications import events
from tests.test_notifications import sub as sub  # the subscriber fixture
from tests.test_pubsub import Pair


@pytest.fixture(scope="module")
def target() -> Iterator[ServerProcess]:
    p = start_redis()
    yield p
    p.stop()


def test_cluster_commands_are_disabled(diff: Differ) -> None:
    diff.run("""
        CLUSTER INFO
        CLUSTER HELP
        CLUSTER RESET HARD
        CLUSTER KEYSLOT foo
        CLUSTER NOPE
        CLUSTER
        ASKING
        READONLY
        READWRITE
        READONLY extra
        COMMAND INFO cluster|info asking readonly restore-asking
        COMMAND DOCS cluster|slots
    """)


def test_command_introspection(diff: Differ) -> None:
    diff.run("""
        COMMAND INFO migrate
        COMMAND GETKEYS MIGRATE host 6379 k 0 100
        COMMAND GETKEYS MIGRATE host 6379 "" 0 100 COPY KEYS a b c
        COMMAND GETKEYSANDFLAGS MIGRATE host 6379 "" 0 100 AUTH pw KEYS a b
        COMMAND LIST FILTERBY PATTERN set
        ~COMMAND LIST FILTERBY PATTERN config|*re*
        ~COMMAND LIST FILTERBY PATTERN cl*help
        ~COMMAND LIST FILTERBY PATTERN cluster*
        COMMAND LIST FILTERBY PATTERN non_exists*
    """)


def test_migrate_argument_errors(diff: Differ) -> None:
    diff.run("""
        MIGRATE 127.0.0.1 1 k 0 100 KEYS a
        MIGRATE 127.0.0.1 1 "" 0 100 COPY NOPE
        MIGRATE 127.0.0.1 1 k 0 100 AUTH
        MIGRATE 127.0.0.1 1 k 0 100 AUTH2 user
        MIGRATE 127.0.0.1 1 k 0 x
        MIGRATE 127.0.0.1 1 k x 100
        MIGRATE 127.0.0.1 1 k 0 100
        MIGRATE 127.0.0.1 1 "" 0 100 KEYS a b
        MIGRATE 127.0.0.1 1 k
        SET k v
        MIGRATE 127.0.0.1 1 k 0 100
        MIGRATE 127.0.0.1 notaport k 0 100
        GET k
    """)


class Migration:
    """The same commands on both servers, MIGRATE sending each to its own database
    of the target (redis-server's to `ref_db`, ours to `ours_db`)."""

    def __init__(self, diff: Differ, target: ServerProcess, ref_db: int, ours_db: int) -> None:
        self.diff = diff
        self.port = str(target.port)
        self.dbs = (str(ref_db), str(ours_db))
        self.t = RawClient(target.port)
        for db in self.dbs:
            self.t.call("SELECT", db)
            self.t.call("FLUSHDB")

    def migrate(self, key: str, *opts: str) -> bytes:
        ref = self.diff.ref.call("MIGRATE", "127.0.0.1", self.port, key, self.dbs[0], "2000", *opts)
        ours = self.diff.ours.call(
            "MIGRATE", "127.0.0.1", self.port, key, self.dbs[1], "2000", *opts
        )
        assert ours == ref, (opts, ref, ours)
        return ref

    def on_target(self, *args: str) -> bytes:
        """A command run in both databases of the target: the same reply."""
        replies = []
        for db in self.dbs:
            self.t.call("SELECT", db)
            replies.append(self.t.call(*args))
        assert replies[0] == replies[1], (args, replies)
        return replies[0]


def test_migrate_moves_copies_and_replaces(diff: Differ, target: ServerProcess) -> None:
    m = Migration(diff, target, 1, 2)
    diff.run("""
        SET str hello PX 500000
        RPUSH list a b c
        HSET hash f 1 g 2
        ZADD z 1 a 2 b
        SADD s x y
    """)
    assert m.migrate("str") == b"+OK\r\n"
    m.migrate("list", "COPY")
    diff.check("EXISTS", "str", "list")
    for key in ("str", "list"):
        m.on_target("DUMP", key)
    for db in m.dbs:  # the TTL left travels with the key
        m.t.call("SELECT", db)
        assert 490000 < int(m.t.call("PTTL", "str")[1:-2]) <= 500000
    # The key exists there now: BUSYKEY unless REPLACE.
    m.migrate("list", "COPY")
    diff.run("RPUSH list d")
    m.migrate("list", "COPY", "REPLACE")
    m.on_target("LRANGE", "list", "0", "-1")
    # Several keys: missing ones skipped, only acknowledged ones deleted here.
    m.on_target("SET", "z", "taken")
    m.migrate("", "KEYS", "nokey", "hash", "z", "s")
    diff.run("""
        EXISTS hash
        TYPE z
        EXISTS s
        MIGRATE 127.0.0.1 1 "" 0 100 KEYS nokey-1 nokey-2
    """)
    m.on_target("HGETALL", "hash")
    m.on_target("SORT", "s", "ALPHA")  # a set's order is its payload's
    m.on_target("GET", "z")
    m.t.close()


def test_migrate_auth_and_cached_sockets(diff: Differ, target: ServerProcess) -> None:
    m = Migration(diff, target, 3, 4)
    diff.run("SET k v")
    m.migrate("k", "COPY", "AUTH", "nopass")
    m.migrate("k", "COPY", "AUTH2", "default", "nopass")
    m.migrate("k", "COPY")
    for c in (diff.ref, diff.ours):
        info = c.call("INFO", "stats")
        assert b"migrate_cached_sockets:1\r\n" in info
    m.on_target("GET", "k")
    m.t.close()


def test_migrate_timeouts_and_refusals(diff: Differ) -> None:
    """A target that accepts and never answers: the read times out (IOERR reading); a
    port nobody listens on: IOERR connecting. The key stays."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = str(silent.getsockname()[1])
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    free = str(closed.getsockname()[1])
    closed.close()
    try:
        diff.check("SET", "k", "v")
        diff.check("MIGRATE", "127.0.0.1", port, "k", "0", "200")
        diff.check("MIGRATE", "127.0.0.1", free, "k", "0", "200")
        diff.check("GET", "k")
    finally:
        silent.close()


def test_restore_asking_is_restore(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b c
        SET s hello
    """)
    ref, ours = diff.both("DUMP", "l")
    assert ref == ours

    def bulk(reply: bytes) -> bytes:
        return reply.split(b"\r\n", 1)[1][:-2]

    payload = bulk(diff.ref.call("DUMP", "s"))
    diff.check("RESTORE-ASKING", "l2", "0", bulk(ref))
    diff.check("RESTORE-ASKING", "s", "0", payload)
    diff.check("RESTORE-ASKING", "s", "0", payload, "REPLACE")
    diff.check("RESTORE-ASKING", "s2", "0", b"bad")
    diff.check("RESTORE-ASKING", "s2")
    diff.check("LRANGE", "l2", "0", "-1")


def test_migrate_notifies_del(diff: Differ, sub: Pair, target: ServerProcess) -> None:
    """Each key the target took is deleted here with a `del` event, as in Redis (both
    servers send to the same target database, REPLACE letting the second through)."""
    script = f"""
        SET mk v
        RPUSH ml a b
        MIGRATE 127.0.0.1 {target.port} "" 5 2000 REPLACE KEYS mk nokey ml
        SET mk2 v
        MIGRATE 127.0.0.1 {target.port} mk2 5 2000 COPY REPLACE
    """
    assert events(diff, sub, script, "KEA") > 0
