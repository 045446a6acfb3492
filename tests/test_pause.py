"""CLIENT PAUSE/UNPAUSE, CLIENT UNBLOCK and CLIENT REPLY against redis-server, RESP2 and
RESP3: errors byte for byte, and multi-client scenarios run the same way on both
servers whose transcripts (every reply, and whether a held client has answered yet)
must be equal."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from tests.conftest import Differ
from tests.resp_client import RawClient, encode_command


def _pending(c: RawClient, wait: float = 0.25) -> bytes:
    """What `c` has been sent within `wait` seconds (b"" when nothing: it is held)."""
    return c.read_pending(wait)


def _blocked(c: RawClient) -> int:
    m = re.search(rb"blocked_clients:(\d+)", c.call("INFO", "clients"))
    assert m is not None
    return int(m[1])


def _wait_blocked(c: RawClient, n: int) -> int:
    for _ in range(100):
        if _blocked(c) == n:
            break
        time.sleep(0.02)
    return _blocked(c)


Scenario = Callable[[RawClient, Callable[[], RawClient], list[object]], None]


def _compare(d: Differ, scenario: Scenario) -> None:
    transcripts = []
    for main in (d.ref, d.ours):
        port = main.sock.getpeername()[1]
        extra: list[RawClient] = []

        def client(port: int = port, extra: list[RawClient] = extra) -> RawClient:
            c = RawClient(port)
            if d.resp == 3:
                c.call("HELLO", "3")
            extra.append(c)
            return c

        log: list[object] = []
        try:
            scenario(main, client, log)
        finally:
            main.call("CLIENT", "UNPAUSE")
            for c in extra:
                c.close()
        transcripts.append(log)
    assert transcripts[1] == transcripts[0], f"redis: {transcripts[0]}\nours:  {transcripts[1]}"
    d.record(len(transcripts[0]), True)


def test_pause_errors(diff: Differ) -> None:
    diff.run("""
        CLIENT PAUSE
        CLIENT PAUSE x
        CLIENT PAUSE -1
        CLIENT PAUSE 10 foo
        CLIENT PAUSE 10 write x
        CLIENT PAUSE 1.5
        CLIENT UNPAUSE x
        CLIENT UNPAUSE
        CLIENT UNBLOCK
        CLIENT UNBLOCK x
        CLIENT UNBLOCK 1 foo
        CLIENT UNBLOCK 99999999
        CLIENT UNBLOCK 99999999 ERROR
        CLIENT UNBLOCK 1 timeout x
        CLIENT REPLY
        CLIENT REPLY foo
        CLIENT REPLY on x
        CLIENT REPLY ON
    """)


def _write_pause(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    main.call("SET", "pfoo", "bar")
    main.call("DEL", "pause-hll")
    main.call("PFADD", "pause-hll", "x")
    log.append(main.call("CLIENT", "PAUSE", "100000", "WRITE"))
    reader = client()
    log += [reader.call("GET", "pfoo"), reader.call("PING"), _blocked(main)]
    held = [client() for _ in range(4)]
    held[0].send(encode_command("SET", "pfoo", "new"))
    held[1].send(encode_command("PFCOUNT", "pause-hll"))
    held[2].send(encode_command("PUBLISH", "ch", "msg"))
    held[3].send(encode_command("EVAL", "return 1", "0"))
    log.append(_wait_blocked(main, 4))
    log += [_pending(c) for c in held]
    ro = client()
    log.append(ro.call("EVAL", "#!lua flags=no-writes\nreturn 'unique'", "0"))
    log.append(ro.call("EVAL_RO", "return redis.call('get', 'pfoo')", "0"))
    log += [ro.call("MULTI"), ro.call("GET", "pfoo"), ro.call("EXEC")]
    log.append(ro.call("SET", "pfoo"))  # arity errors answer at once
    log.append(main.call("GET", "pfoo"))
    log.append(main.call("CLIENT", "UNPAUSE"))
    log += [c.read_reply() for c in held]
    log += [main.call("GET", "pfoo"), _wait_blocked(main, 0)]


def test_pause_write(diff: Differ) -> None:
    _compare(diff, _write_pause)


def _pause_all(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    other = client()
    log.append(main.call("CLIENT", "PAUSE", "300", "ALL"))
    other.send(encode_command("PING"))
    other.send(encode_command("GET", "nothing"))
    log.append(_pending(other, 0.1))
    log.append(other.read_reply())  # the pause times out by itself
    log.append(other.read_reply())


def test_pause_all_times_out(diff: Differ) -> None:
    _compare(diff, _pause_all)


def _exec_held(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    tx = client()
    log += [tx.call("MULTI"), tx.call("SET", "ptx", "1")]
    log.append(main.call("CLIENT", "PAUSE", "60000", "WRITE"))
    tx.send(encode_command("EXEC"))
    log += [_wait_blocked(main, 1), _pending(tx)]
    log += [main.call("CLIENT", "UNPAUSE"), tx.read_reply()]
    # A pause queued inside a transaction starts after it.
    log += [main.call("MULTI"), main.call("SET", "ptx2", "a")]
    log += [main.call("CLIENT", "PAUSE", "60000", "WRITE"), main.call("SET", "ptx3", "b")]
    log += [main.call("EXEC")]
    tx.send(encode_command("SET", "ptx4", "c"))
    log += [_wait_blocked(main, 1), _pending(tx)]
    log += [main.call("MGET", "ptx", "ptx2", "ptx3", "ptx4")]
    log += [main.call("CLIENT", "UNPAUSE"), tx.read_reply()]


def test_pause_exec(diff: Differ) -> None:
    _compare(diff, _exec_held)


def _expiry(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    def expired() -> int:
        m = re.search(rb"expired_keys:(\d+)", main.call("INFO", "stats"))
        assert m is not None
        return int(m[1])

    main.call("DEL", "pexp1", "pexp2")
    log += [main.call("MULTI"), main.call("SET", "pexp1", "x", "PX", "10")]
    log += [main.call("SET", "pexp2", "y", "PX", "10")]
    log += [main.call("CLIENT", "PAUSE", "50000", "WRITE"), main.call("EXEC")]
    before = expired()
    time.sleep(0.4)  # active expiry runs meanwhile
    log += [main.call("GET", "pexp1"), main.call("GET", "pexp2"), expired() - before]
    log.append(main.call("CLIENT", "UNPAUSE"))
    log += [main.call("GET", "pexp1"), main.call("GET", "pexp2"), expired() - before]


def test_pause_holds_expiry(diff: Differ) -> None:
    _compare(diff, _expiry)


def _unblock(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    waiter = client()
    cid = int(waiter.call("CLIENT", "ID")[1:-2])
    main.call("DEL", "ublist")
    for how in ([], ["TIMEOUT"], ["ERROR"]):
        waiter.send(encode_command("BLPOP", "ublist", "0"))
        log.append(_wait_blocked(main, 1))
        log.append(main.call("CLIENT", "UNBLOCK", str(cid), *how))
        log.append(waiter.read_reply())
        log.append(main.call("CLIENT", "UNBLOCK", str(cid), *how))
    waiter.send(encode_command("XREAD", "BLOCK", "0", "STREAMS", "ubstream", "$"))
    log.append(_wait_blocked(main, 1))
    log += [main.call("CLIENT", "UNBLOCK", str(cid)), waiter.read_reply()]
    log.append(waiter.call("PING"))


def test_client_unblock(diff: Differ) -> None:
    _compare(diff, _unblock)


def _reply(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    c = client()
    c.send(
        b"".join(
            encode_command(*args)
            for args in (
                ("CLIENT", "REPLY", "OFF"),
                ("PING", "pong"),
                ("CLIENT", "REPLY", "SKIP"),
                ("PING", "pong2"),
                ("CLIENT", "REPLY", "ON"),
                ("PING", "pong3"),
                ("CLIENT", "REPLY", "SKIP"),
                ("PING", "skipped"),
                ("PING", "shown"),
                ("CLIENT", "REPLY", "SKIP"),
                ("CLIENT", "REPLY", "SKIP"),
                ("PING", "a"),
                ("PING", "b"),
                ("CLIENT", "REPLY", "SKIP"),
                ("CLIENT", "REPLY", "ON"),
                ("PING", "c"),
                ("CLIENT", "REPLY", "SKIP"),
                ("BLPOP", "replylist", "0"),
                ("PING", "d"),
            )
        )
    )
    log.append(_pending(c, 0.4))
    main.call("RPUSH", "replylist", "x")
    log.append(_pending(c, 0.4))
    c.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("QUIT"))
    log.append(c.read_closed())


def test_client_reply(diff: Differ) -> None:
    _compare(diff, _reply)


def _reply_pubsub(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    """(Un)subscribe confirmations and messages are pushes: CLIENT REPLY OFF lets them
    through (Redis' `PubSub messages with CLIENT REPLY OFF`)."""
    c = client()
    c.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("SUBSCRIBE", "rch"))
    c.send(encode_command("PSUBSCRIBE", "rc*"))
    log.append(_pending(c, 0.3))
    log.append(main.call("PUBLISH", "rch", "hello"))
    log.append(_pending(c, 0.3))
    c.send(encode_command("UNSUBSCRIBE", "rch") + encode_command("PUNSUBSCRIBE", "rc*"))
    c.send(encode_command("PING"))
    log.append(_pending(c, 0.3))


def test_client_reply_off_lets_pushes_through(diff: Differ) -> None:
    _compare(diff, _reply_pubsub)


def _served_in_pause(main: RawClient, client: Callable[[], RawClient], log: list[object]) -> None:
    """A blocked BLPOP served by a write the pause lets through (the EXEC that paused)
    is answered during the pause, as Redis does."""
    waiter = client()
    main.call("DEL", "pl")
    waiter.send(encode_command("BLPOP", "pl", "0"))
    log.append(_wait_blocked(main, 1))
    log += [main.call("MULTI"), main.call("CLIENT", "PAUSE", "60000", "WRITE")]
    log += [main.call("LPUSH", "pl", "x"), main.call("EXEC"), _pending(waiter)]


def test_blocked_command_served_during_pause(diff: Differ) -> None:
    _compare(diff, _served_in_pause)
