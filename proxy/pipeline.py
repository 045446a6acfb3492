"""A connection's batch of requests, run: each request dispatched in order, its reply
encoded into the batch's one output buffer, and the batch stopped where a reply
blocks, defers, is paused or closes the connection (the rest waits in the
connection's backlog). Compiled with the dispatcher (tools/compiled.py); the asyncio
glue around it (reading, writing, blocking, durability waits) is `proxy.server`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Final, Protocol, cast

from commands.client_control import quiet_reply
from commands.dispatch import DISPATCHER, lookup
from commands.hotwrites import LAST_INTEGER
from commands.registry import COMMANDS, Command
from commands.replies import OK, Blocked, CloseAfterReply, Deferred, ErrorReply, Paused
from commands.resp import ProtocolError, encode
from commands.session import Durability, ServerCore, Session
from proxy.reader import QUERY_BUFFER_OVERFLOW, RequestReader


class Connection(Protocol):
    """What a batch needs of its connection (`proxy.server.Connection`, which calls
    this module: the server imports the pipeline, never the reverse). Compiled, this
    is read as the Python object it is, attribute by attribute, as before."""

    transport: asyncio.Transport | None
    reader: RequestReader | None
    backlog: deque[list[bytes]]
    backlog_error: ProtocolError | None
    waiting: bool
    closing: bool
    paused: bool
    session: Session | None
    held: list[bytes] | None
    raft_marks: list[tuple[int, int, int]]
    output_blocked: bool
    soft_since: float
    last_write_len: int

    def _block(self, argv: list[bytes], b: Blocked) -> None: ...

    def _close_after_write(self) -> None: ...

    def _defer(self, d: Deferred) -> None: ...

    def _hold(self) -> None: ...

    def _hold_replies(self, out: list[bytes], dur: Durability) -> None: ...

    def _query_overflow(self) -> None: ...

    def _raft_reply(self, start: int, end: int) -> None: ...

    def _wait_capacity(self) -> None: ...

    def _write_held(self, out: list[bytes]) -> None: ...

    def _retry_block(self) -> None: ...

    def check_output_limit(self) -> None: ...


BATCH_OUTPUT_LIMIT = 4 * 1024 * 1024
OK_ENCODED: Final = b"+OK\r\n"  # the same in RESP2 and RESP3
# Bound once: compiled, a Final is a C static (no module dict lookup per request, and
# for the clocks no attribute lookup on `time` either).
_wall: Final = time.time
_perf_ns: Final = time.perf_counter_ns
_COMMANDS: Final = COMMANDS  # `.get` on the typed dict: a C call, not a method call
_OK: Final = OK
_BLOCKED: Final = Blocked
_DEFERRED: Final = Deferred
_CLOSE_AFTER_REPLY: Final = CloseAfterReply
_PAUSED: Final = Paused
_NIL2: Final = b"$-1\r\n"  # None in RESP2 (a nil bulk string) and in RESP3
_NIL3: Final = b"_\r\n"
_COLON: Final = b":"
_CRLF: Final = b"\r\n"
# The headers of short bulk strings, made once (formatting one per reply costs more).
_BULK_HEADERS: Final = [b"$%d\r\n" % n for n in range(1024)]
# Integer replies (HSET's 0 and 1, short lists' lengths), made once.
_SMALL: Final = 1024
_INTEGERS: Final = [b":%d\r\n" % n for n in range(_SMALL)]
_LAST_INTEGER: Final = LAST_INTEGER
# Connections whose blocked command a commit may now serve, in the order their keys were
# touched. Served right after the command that touched them (before the next command of
# any client runs, as Redis' handleClientsBlockedOnKeys does), and from the event loop
# for commits made outside a command (expiry, replication).
READY: Final[deque[Connection]] = deque()


def serve_ready() -> None:
    """Retry every ready blocked command; one served may ready others (a BLMOVE into a
    list another client waits on), and they are served in the same pass."""
    while READY:
        READY.popleft()._retry_block()


def is_write(argv: list[bytes]) -> bool:
    # The table's entry as named (the dispatcher's fast path); `lookup` for the rest
    # (other cases, subcommands).
    cmd = COMMANDS.get(argv[0])
    if cmd is not None and cmd.subcommands is None:
        return cmd.is_write
    found = lookup(argv)
    return isinstance(found, Command) and found.is_write


def receive(conn: Connection, data: bytes) -> None:
    """`Connection.data_received`: read `data` into requests and run them (or queue
    them behind a blocked, deferred or paused command)."""
    s = conn.session
    reader = conn.reader
    assert s is not None and reader is not None
    server: ServerCore = s.server  # its fields read directly when compiled
    server.stats.net_input_bytes += len(data)
    if conn.closing:
        return
    requests, error = reader.feed(data)
    now = _wall()  # the read's time, for the query buffer and CLIENT LIST idle=
    s.qbuf.read(len(data), requests, reader.held(), now)
    if error is QUERY_BUFFER_OVERFLOW:
        conn._query_overflow()
        return
    if conn.waiting:
        # Nothing after a protocol error runs: the connection ends there.
        if conn.backlog_error is None:
            conn.backlog.extend(requests)
            conn.backlog_error = error
        return
    run(conn, requests, error, now)


def write(conn: Connection, out: list[bytes]) -> None:
    """`Connection._write`: send replies, or hold them while this connection's writes
    are not yet durable in sync mode (replies stay in order; later ones queue behind)."""
    if not out:
        return
    if conn.held is not None:
        conn._write_held(out)
        return
    s = conn.session
    assert s is not None
    server: ServerCore = s.server
    dur = server.durability
    # LSNs start at 1: a session that never wrote to sync or raft data (0) waits for
    # nothing, without asking the durability object.
    if dur is not None and (
        (s.last_sync_lsn and s.last_sync_lsn > dur.durable_lsn)
        or (s.last_raft_lsn and s.last_raft_lsn > dur.raft_lsn)
    ):
        conn._hold_replies(out, dur)
        return
    send(conn, out)
    if conn.raft_marks:  # committed in etcd already
        conn.raft_marks = []


def send(conn: Connection, out: list[bytes]) -> None:
    """`Connection._send`: one write of the replies to the socket."""
    t = conn.transport
    if out and t is not None and not t.is_closing():
        data = b"".join(out) if len(out) > 1 else out[0]
        s = conn.session
        assert s is not None
        server: ServerCore = s.server
        size = len(data)
        server.stats.net_output_bytes += size
        conn.last_write_len = size
        t.write(data)
        if t.get_write_buffer_size():
            conn.check_output_limit()
        elif conn.soft_since:
            conn.soft_since = 0.0


def run(
    conn: Connection,
    requests: list[list[bytes]] | deque[list[bytes]],
    error: ProtocolError | None,
    now: float = 0.0,
) -> None:
    """Run `requests` (then answer `error`, which ends the connection) for `conn`;
    `now`: the time they were read (0.0: read the clock)."""
    s = conn.session
    assert s is not None and conn.transport is not None
    out: list[bytes] = []
    s.batch_out = out  # what is pending for this connection (SYNC refuses to run behind it)
    dispatcher = DISPATCHER  # its methods called directly (a C call when compiled)
    s.last_interaction = now or _wall()  # CLIENT LIST idle=
    # A list (just read) is walked by index; a deque (the backlog) is consumed.
    queue: deque[list[bytes]] | None = None
    items: list[list[bytes]] = []
    if isinstance(requests, list):  # a type test in C (deque's isinstance is a call)
        items = requests
    else:
        queue = requests
    i = 0
    n = 0
    server: ServerCore = s.server
    server.clock_mark = _perf_ns()  # the first command's start
    # The last command's name and table entry: a pipeline mostly repeats one command,
    # and comparing a few bytes costs less than hashing a new name for the lookup. (The
    # table is filled once, as the command modules are imported.)
    last_name = b""
    last_cmd: Command | None = None
    # The capacity check of the durability object in force, looked up once per batch
    # (and again only if the object changes): a call per write, no attribute lookup.
    checked: Any = None
    over_capacity: Any = None
    while True:
        if queue is None:
            if i >= len(items):
                break
            argv = items[i]
            i += 1
        elif queue:
            argv = queue.popleft()
        else:
            break
        name = argv[0]
        s.last_cmd = name
        if name == last_name:
            cmd = last_cmd
        else:
            cmd = _COMMANDS.get(name)  # the dispatcher's fast path uses it too
            last_name = name
            last_cmd = cmd
        dur = server.durability
        if dur is not checked:
            checked = dur
            over_capacity = None if dur is None else dur.over_capacity
        if (
            over_capacity is not None
            and (cmd.is_write if cmd is not None and cmd.subcommands is None else is_write(argv))
            and over_capacity()
        ):
            # Object storage is behind: hold this write (and what follows) until
            # the backlog drains, or answer TRYAGAIN (reads are not held).
            conn.backlog.extendleft(reversed([argv, *_rest(items, queue, i)]))
            conn.backlog_error = error
            write(conn, out)
            conn._wait_capacity()
            return
        raft_before = s.last_raft_lsn
        start = len(out)
        reply: Any = dispatcher.execute_named(s, argv, cmd)
        if READY:
            serve_ready()
        if s.reply_mode:
            reply = quiet_reply(s, reply)  # CLIENT REPLY OFF|SKIP
        t = type(reply)
        # The commonest replies first, encoded here (no call); then the ones that
        # stop this batch; then the codec.
        if t is bytes:
            size = len(reply)
            head = _BULK_HEADERS[size] if size < 1024 else b"$%d\r\n" % size
            out.append(b"".join((head, reply, b"\r\n")))
        elif reply is _OK:
            out.append(OK_ENCODED)
        elif t is int:  # INCR, HSET, ...: ":<n>\r\n" in RESP2 and RESP3 (not a bool)
            number: int = reply  # typed: compiled, formatted without bytes.__mod__
            if 0 <= number < _SMALL:
                out.append(_INTEGERS[number])
            elif reply is _LAST_INTEGER.number:  # INCR's value: its digits as stored
                digits = cast(bytes, _LAST_INTEGER.digits)  # set with `number`
                out.append(_COLON)
                out.append(digits)
                out.append(_CRLF)
            else:
                out.append(b":%d\r\n" % number)
        elif reply is None:  # GET of a missing key, ...
            out.append(_NIL2 if s.resp == 2 else _NIL3)
        elif t is _BLOCKED or t is _DEFERRED or t is _CLOSE_AFTER_REPLY or t is _PAUSED:
            if t is _PAUSED:
                # CLIENT PAUSE holds this command: it and the rest run when it ends.
                conn.backlog.append(argv)
            if t is _CLOSE_AFTER_REPLY:
                encode(reply.reply, s.resp, out)
                write(conn, out)
                conn._close_after_write()
                return
            conn.backlog.extend(_rest(items, queue, i))
            conn.backlog_error = error
            write(conn, out)
            if t is _BLOCKED:
                conn._block(argv, reply)
            elif t is _PAUSED:
                conn._hold()
            else:
                conn._defer(reply)
            return
        else:
            encode(reply, s.resp, out)
        if s.last_raft_lsn != raft_before:
            conn._raft_reply(start, len(out))  # answered with an error if etcd fails it
        if s.killed:
            break
        n += 1
        if not n & 63 and sum(map(len, out)) > BATCH_OUTPUT_LIMIT:
            # A big pipeline of big replies: hand this much to the socket, and if
            # the client is not reading, stop here until it drains (the rest of
            # the requests wait in the backlog, and reading is paused).
            write(conn, out)
            out = s.batch_out = []
            if conn.paused:
                conn.backlog.extendleft(reversed(_rest(items, queue, i)))
                conn.waiting = True
                conn.output_blocked = True
                conn.backlog_error = error
                return
    if error is not None:
        encode(ErrorReply(error.text), s.resp, out)
        write(conn, out)
        conn._close_after_write()
        return
    write(conn, out)
    if s.killed:
        conn._close_after_write()


def _rest(items: list[list[bytes]], queue: deque[list[bytes]] | None, i: int) -> list[list[bytes]]:
    """The requests after the one being run."""
    return list(queue) if queue is not None else items[i:]
