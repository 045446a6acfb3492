"""Connection limits: --maxclients (Redis' error, as redis-server gives it) and
--timeout for idle clients."""

from __future__ import annotations

import time

from commands.limits import OUTPUT_LIMITS_DEFAULT
from tests.conftest import Differ, proc_status_kb, start_redis, start_temporalstore
from tests.resp_client import RawClient


def test_maxclients_matches_redis() -> None:
    ref = start_redis(["--maxclients", "3"])
    ours = start_temporalstore(["--maxclients", "3"])
    try:
        for server in (ref, ours):
            held = [RawClient(server.port) for _ in range(3)]
            for c in held:
                assert c.call("PING") == b"+PONG\r\n"
            extra = RawClient(server.port)
            assert extra.read_reply() == b"-ERR max number of clients reached\r\n"
            assert extra.read_closed()
            extra.close()
            held.pop().close()
            time.sleep(0.2)
            again = RawClient(server.port)
            assert again.call("PING") == b"+PONG\r\n"
            again.close()
            for c in held:
                c.close()
    finally:
        ref.stop()
        ours.stop()


def test_idle_clients_are_closed_after_timeout() -> None:
    ours = start_temporalstore(["--timeout", "1"])
    try:
        idle = RawClient(ours.port)
        busy = RawClient(ours.port)
        sub = RawClient(ours.port)
        sub.call("SUBSCRIBE", "news")
        assert idle.call("PING") == b"+PONG\r\n"
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert busy.call("PING") == b"+PONG\r\n"
            time.sleep(0.2)
        assert idle.read_closed()
        assert busy.call("PING") == b"+PONG\r\n"  # active clients stay
        assert sub.call("PING") == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"  # subscribers stay
        assert busy.call("CONFIG", "GET", "timeout") == b"*2\r\n$7\r\ntimeout\r\n$1\r\n1\r\n"
        for c in (idle, busy, sub):
            c.close()
    finally:
        ours.stop()


def test_protected_mode_accepts_only_loopback_without_a_password() -> None:
    from commands.session import Config, ServerState
    from proxy.server import PROTECTED_MODE_DENIED, protected_denied
    from store import Store

    state = ServerState(Store(), Config())
    remote, local6, local4 = ("10.1.2.3", 5555), ("::1", 5555, 0, 0), ("127.0.0.1", 5555)
    assert protected_denied(state, remote)
    assert not protected_denied(state, local4) and not protected_denied(state, local6)
    assert not protected_denied(state, ("::ffff:127.0.0.1", 1, 0, 0))
    state.config.requirepass = "secret"
    assert not protected_denied(state, remote)
    state.config.requirepass = None
    state.config.params["protected-mode"] = "no"
    assert not protected_denied(state, remote)
    assert PROTECTED_MODE_DENIED.startswith(b"-DENIED Redis is running in protected mode")
    assert PROTECTED_MODE_DENIED.endswith(b"\r\n") and PROTECTED_MODE_DENIED.count(b"\r\n") == 1


def test_bound_beyond_loopback_still_serves_loopback_clients() -> None:
    ours = start_temporalstore(["--host", "0.0.0.0", "--protected-mode", "yes"])
    try:
        c = RawClient(ours.port)
        assert c.call("PING") == b"+PONG\r\n"
        assert c.call("CONFIG", "GET", "protected-mode") == (
            b"*2\r\n$14\r\nprotected-mode\r\n$3\r\nyes\r\n"
        )
        c.close()
    finally:
        ours.stop()


# -- output buffer limits ------------------------------------------------------------------


def vm_rss(pid: int) -> int:
    """A process' resident set size in bytes."""
    return proc_status_kb(pid) * 1024


OUTPUT_LIMIT_CASES = [
    "pubsub 1kb 2KB 3",
    "normal 1 2",
    "",
    "master 1 1 1",
    "replica 10mb 5mb 30",
    "normal -1 0 0",
    "normal 1 1 -1",
    "normal 1 1 +5",
    "normal 1 1  5",
    "normal 1 1 5x",
    "NORMAL 1g 1G 1",
    "normal 1 1 99999999999",
    "normal 1 1 4294967296",
    "normal 99999999999999999999999 1 1",
    "foo 1 1 1 normal 1 1 1",
    "normal 1 1 ",
    "normal 1 1 \t5",
    " normal 1 1 5",
    "normal 1mb 1 1 pubsub 2 2 2 slave 3 3 3",
]


def test_config_client_output_buffer_limit_matches_redis(diff: Differ) -> None:
    try:
        diff.check("CONFIG", "GET", "client-output-buffer-limit")
        for value in OUTPUT_LIMIT_CASES:
            diff.check("CONFIG", "SET", "client-output-buffer-limit", value)
            diff.check("CONFIG", "GET", "client-output-buffer-limit")
        diff.check("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 1 1", "timeout", "x")
        diff.check("CONFIG", "GET", "client-output-buffer-limit")
    finally:
        diff.check("CONFIG", "SET", "client-output-buffer-limit", OUTPUT_LIMITS_DEFAULT)


def flood_subscriber(port: int, messages: int) -> tuple[list[bytes], RawClient]:
    """A subscriber that never reads while a publisher sends 1 MiB messages: PUBLISH's
    replies (receivers) and the subscriber's connection."""
    sub = RawClient(port)
    assert sub.call("SUBSCRIBE", "flood") == b"*3\r\n$9\r\nsubscribe\r\n$5\r\nflood\r\n:1\r\n"
    pub = RawClient(port)
    payload = b"x" * (1 << 20)
    counts = [pub.call("PUBLISH", "flood", payload) for _ in range(messages)]
    assert pub.call("PING") == b"+PONG\r\n"
    pub.close()
    return counts, sub


def test_subscriber_that_does_not_read_is_cut_off_at_the_pubsub_hard_limit() -> None:
    """Redis' default pubsub limit (32mb hard): the subscriber is disconnected, as
    redis-server does it, the server stays up and its memory stays bounded."""
    ref = start_redis()
    ours = start_temporalstore()
    try:
        for server in (ref, ours):
            before = vm_rss(server.proc.pid)
            counts, sub = flood_subscriber(server.port, 96)
            # Receivers: 1 while it is connected, then 0 once it was cut off (well
            # before 96 MiB were queued for it: 32 MiB plus what the sockets hold).
            assert counts[0] == b":1\r\n" and counts[-1] == b":0\r\n", counts
            cut = counts.index(b":0\r\n")
            assert 32 <= cut < 64 and set(counts[cut:]) == {b":0\r\n"}, counts
            assert sub.read_closed()
            sub.close()
            if server is ours:
                assert vm_rss(server.proc.pid) - before < 64 * 1024 * 1024
            c = RawClient(server.port)
            assert c.call("PUBSUB", "NUMSUB", "flood") == b"*2\r\n$5\r\nflood\r\n:0\r\n"
            c.close()
        assert ours.proc.poll() is None
        assert any("output buffer limits" in line for line in ours.log_lines)
    finally:
        ref.stop()
        ours.stop()


def test_soft_output_limit_closes_a_subscriber_that_stays_past_it() -> None:
    """Past the soft limit for longer than its seconds, with nothing more published:
    the server cron closes the subscriber (as Redis' clientsCron does); one that
    catches up in time stays."""
    ours = start_temporalstore(["--client-output-buffer-limit", "pubsub 0 4mb 1"])
    try:
        admin = RawClient(ours.port)
        assert admin.call("CONFIG", "GET", "client-output-buffer-limit") == (
            b"*2\r\n$26\r\nclient-output-buffer-limit\r\n$59\r\n"
            b"normal 0 0 0 slave 268435456 67108864 60 pubsub 0 4194304 1\r\n"
        )
        counts, sub = flood_subscriber(ours.port, 24)
        assert set(counts) == {b":1\r\n"}  # no hard limit: every message was queued
        deadline = time.monotonic() + 10
        numsub = b""
        while time.monotonic() < deadline:
            numsub = admin.call("PUBSUB", "NUMSUB", "flood")
            if numsub.endswith(b":0\r\n"):
                break
            time.sleep(0.2)
        assert numsub == b"*2\r\n$5\r\nflood\r\n:0\r\n"
        assert sub.read_closed()
        sub.close()
        # A subscriber that reads what it is sent is never cut off.
        reader = RawClient(ours.port)
        reader.call("SUBSCRIBE", "calm")
        for _ in range(8):
            assert admin.call("PUBLISH", "calm", b"y" * (1 << 20)) == b":1\r\n"
            assert reader.read_reply().startswith(b"*3\r\n$7\r\nmessage\r\n")
        time.sleep(1.5)
        assert admin.call("PUBLISH", "calm", "end") == b":1\r\n"
        reader.close()
        admin.close()
    finally:
        ours.stop()


# -- query buffer and bulk length ----------------------------------------------------------


def _send_big_bulk(c: RawClient, length: int, chunks: int) -> None:
    """A SET whose value is announced as `length` bytes, sent in 256 KiB chunks."""
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % length + b"x" * (1 << 18))
    try:
        for _ in range(chunks):
            c.send(b"x" * (1 << 18))
    except OSError:
        pass  # closed while we were still sending


def test_query_buffer_and_bulk_length_limits_match_redis() -> None:
    flags = ["--client-query-buffer-limit", "1mb", "--proto-max-bulk-len", "1mb"]
    ref = start_redis(flags)
    ours = start_temporalstore(flags)
    try:
        for server in (ref, ours):
            admin = RawClient(server.port)
            assert admin.call("CONFIG", "GET", "client-query-buffer-limit") == (
                b"*2\r\n$25\r\nclient-query-buffer-limit\r\n$7\r\n1048576\r\n"
            )
            assert admin.call("CONFIG", "GET", "proto-max-bulk-len") == (
                b"*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n1048576\r\n"
            )
            # A bulk longer than proto-max-bulk-len: Redis' error as soon as the
            # header arrives, even with data behind it in the same read.
            c = RawClient(server.port)
            _send_big_bulk(c, 2_000_000, 0)
            assert c.read_reply() == b"-ERR Protocol error: invalid bulk length\r\n"
            assert c.read_closed()
            c.close()
            # Allowed by the bulk length but past the query buffer limit: the
            # connection is closed without a reply.
            assert admin.call("CONFIG", "SET", "proto-max-bulk-len", "10mb") == b"+OK\r\n"
            c = RawClient(server.port)
            _send_big_bulk(c, 3_000_000, 12)
            assert c.read_closed() and c.buf == b""
            c.close()
            # Many small requests add up to more than the limit: they are served.
            c = RawClient(server.port)
            c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n" * 60000)
            replies = b""
            while len(replies) < 5 * 60000:
                chunk = c.sock.recv(1 << 20)
                assert chunk
                replies += chunk
            assert replies == b"+OK\r\n" * 60000
            c.close()
            # Raised past the value's length, the same SET goes through.
            assert admin.call("CONFIG", "SET", "client-query-buffer-limit", "8mb") == b"+OK\r\n"
            c = RawClient(server.port)
            c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n" + b"x" * 3_000_000 + b"\r\n")
            assert c.read_reply() == b"+OK\r\n"
            assert c.call("STRLEN", "k") == b":3000000\r\n"
            c.close()
            assert admin.call("CONFIG", "SET", "client-query-buffer-limit", "100") == (
                b"-ERR CONFIG SET failed (possibly related to argument "
                b"'client-query-buffer-limit') - argument must be between 1048576 and "
                b"9223372036854775807 inclusive\r\n"
            )
            admin.close()
        assert ours.proc.poll() is None
        assert any("max query buffer length" in line for line in ours.log_lines)
    finally:
        ref.stop()
        ours.stop()


# -- maxmemory ---------------------------------------------------------------------------------

OOM_ERROR = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"


def test_out_of_memory_replies_match_redis() -> None:
    """Both servers are driven past maxmemory (redis-server counts its own allocations,
    we count RSS, so both get `maxmemory 1mb` after writing 2 MiB); then the same
    commands get the same bytes, MULTI/EXEC included."""
    ref = start_redis()
    ours = start_temporalstore()
    try:
        replies: list[list[bytes]] = []
        for server in (ref, ours):
            a, b, admin = (RawClient(server.port) for _ in range(3))
            for i in range(2):
                admin.call("SET", f"big:{i}", b"x" * (1 << 20))
            admin.call("SET", "small", "s")
            admin.call("SET", "gone", "g")
            # Queued while there was room; EXEC comes after memory ran out.
            queued = [a.call("MULTI"), a.call("SET", "q", "v"), a.call("GET", "small")]
            b.call("MULTI")
            b.call("GET", "small")
            assert admin.call("CONFIG", "SET", "maxmemory", "1mb") == b"+OK\r\n"
            admin.close()
            out = [*queued, a.call("EXEC"), b.call("EXEC")]
            for cmd in [
                ("SET", "new", "v"),
                ("INCR", "n"),
                ("APPEND", "small", "x"),
                ("LPUSH", "l", "x"),
                ("GET", "small"),
                ("EXPIRE", "small", "100"),
                ("PERSIST", "small"),
                ("DEL", "gone"),
                ("PING",),
                ("MULTI",),
                ("GET", "small"),
                ("PING",),
                ("EXEC",),
                ("MULTI",),
                ("DISCARD",),
                ("CONFIG", "GET", "maxmemory"),
                ("SUBSCRIBE", "c"),
                ("SET", "new", "v"),
                ("UNSUBSCRIBE", "c"),
                ("CONFIG", "SET", "maxmemory", "0"),
                ("SET", "new", "v"),
                ("INCR", "n"),
            ]:
                out.append(a.call(*cmd))
            replies.append(out)
            a.close()
            b.close()
        assert replies[0] == replies[1]
        assert OOM_ERROR in replies[1]
        assert (
            b"-EXECABORT Transaction discarded because of: OOM command not allowed when used "
            b"memory > 'maxmemory'.\r\n"
        ) in replies[1]
    finally:
        ref.stop()
        ours.stop()


def test_writes_stop_past_maxmemory_and_resume_when_raised() -> None:
    """--maxmemory with Redis' units; under noeviction, writes run until the used
    memory (INFO used_memory: commands.evict) passes the limit, then DENYOOM commands
    get Redis' error while reads and DEL keep working, and CONFIG SET maxmemory 0 lets
    writes resume."""
    ours = start_temporalstore(["--maxmemory", "1gb", "--maxmemory-policy", "noeviction"])
    try:
        c = RawClient(ours.port)
        info = c.call("INFO", "memory")
        assert b"\r\nmaxmemory:1073741824\r\n" in info
        assert b"\r\nmaxmemory_human:1.00G\r\n" in info
        assert b"\r\nmaxmemory_policy:noeviction\r\n" in info
        used = int(info.split(b"\r\nused_memory:")[1].split(b"\r\n")[0])
        # 1 MiB values against 24 MiB of headroom: the 24th write passes the limit,
        # the 25th is refused (the used memory counts each value, not the RSS).
        assert c.call("CONFIG", "SET", "maxmemory", str(used + 24 * 1024 * 1024)) == b"+OK\r\n"
        value = b"v" * (1 << 20)
        written = 0
        reply = b""
        for i in range(200):
            reply = c.call("SET", f"k:{i}", value)
            if reply != b"+OK\r\n":
                break
            written += 1
        assert reply == OOM_ERROR
        assert written == 24
        assert c.call("STRLEN", "k:0") == b":1048576\r\n"
        assert c.call("HSET", "h", "f", "v") == OOM_ERROR
        assert c.call("DEL", "k:0", "k:1") == b":2\r\n"
        assert c.call("GET", "k:0") == b"$-1\r\n"
        errorstats = c.call("INFO", "errorstats")
        assert b"errorstat_OOM:count=2" in errorstats
        assert c.call("CONFIG", "SET", "maxmemory", "0") == b"+OK\r\n"
        assert c.call("SET", "after", "v") == b"+OK\r\n"
        assert b"\r\nmaxmemory:0\r\n" in c.call("INFO", "memory")
        c.close()
    finally:
        ours.stop()
