"""The asyncio listener and one `Connection` per client.

Reading: a `RequestReader` (proxy.reader) turns each chunk into requests. Writing:
every reply of a batch is encoded into one buffer and written once. When the socket's
write buffer passes its high-water mark the connection stops reading until it drains,
so a client that does not read its replies cannot make us buffer without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, cast

from commands.cleanup import session_closed
from commands.client_control import quiet_reply
from commands.config_table import config_get_value
from commands.dispatch import DISPATCHER
from commands.errors import MAX_CLIENTS, TRYAGAIN_RAFT, TRYAGAIN_STORAGE
from commands.info import sync_expired
from commands.limits import output_limit_reached
from commands.replies import (
    Blocked,
    Deferred,
    ErrorReply,
    Reply,
)
from commands.resp import ProtocolError, encode
from commands.session import Durability, ServerCore, Session
from proxy.listeners import move_listener
from proxy.pipeline import READY, receive, send, serve_ready, write
from proxy.pipeline import run as run_batch
from proxy.reader import RequestReader
from store.coldhistory import hot_bytes, use_kind
from store.tasks import cancel_and_wait

log = logging.getLogger("temporalstore")

# A client that stops reading while we still owe it replies: hard cap (whatever
# client-output-buffer-limit says; reading from it is paused long before this).
OUTPUT_HARD_LIMIT = 256 * 1024 * 1024
HELD_PAUSE_ITEMS = 100_000
# Graceful shutdown waits this long for object storage to take every pending write.
SHUTDOWN_DRAIN_S = 30.0
# ... and then this long for the replies that became durable to be handed to sockets.
SHUTDOWN_RELEASE_S = 1.0


PROTECTED_MODE_DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no "
    b"password is set for the default user. In this mode connections are only accepted from "
    b"the loopback interface. If you want to connect from external computers to Redis you may "
    b"adopt one of the following solutions: 1) Just disable protected mode sending the command "
    b"'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from "
    b"the same host the server is running, however MAKE SURE Redis is not publicly accessible "
    b"from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) "
    b"Alternatively you can just disable the protected mode by editing the Redis configuration "
    b"file, and setting the protected mode option to 'no', and then restarting the server. 3) "
    b"If you started the server manually just for testing, restart it with the "
    b"'--protected-mode no' option. 4) Setup a an authentication password for the default "
    b"user. NOTE: You only need to do one of the above things in order for the server to start "
    b"accepting connections from the outside.\r\n"
)


def is_loopback(peer: Any) -> bool:
    """A client on this host: a loopback address (or a Unix socket)."""
    if not isinstance(peer, tuple) or not peer:
        return True
    host = str(peer[0])
    return host.startswith("127.") or host in ("::1", "localhost") or host.startswith("::ffff:127.")


def protected_denied(state: ServerCore, peer: Any) -> bool:
    """Redis' protected mode: with no password, only loopback clients are accepted."""
    return (
        state.config.params.get("protected-mode", "yes") == "yes"
        and state.config.requirepass is None
        and not is_loopback(peer)
    )


def _int_param(state: ServerCore, name: str, default: int) -> int:
    try:
        return int(state.config.params.get(name, default))
    except ValueError:
        return default


@dataclass(slots=True)
class BlockState:
    """A blocking command waiting for a commit to one of `keys` or for its timeout."""

    argv: list[bytes]  # run again when a key is touched
    blocked: Blocked
    timer: asyncio.TimerHandle | None = None
    keys: list[tuple[int, bytes]] = field(default_factory=list)
    scheduled: bool = False  # a retry is queued on the loop already


class Connection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.reader: RequestReader | None = None
        self.backlog: deque[list[bytes]] = deque()
        # The protocol error after the backlog's requests: the connection ends there.
        self.backlog_error: ProtocolError | None = None
        self.waiting = False  # blocked or deferred: later requests wait
        self.closing = False
        self.paused = False
        self.session: Session | None = None
        self.block_state: BlockState | None = None
        self.held: list[bytes] | None = None  # replies waiting for durability (sync mode)
        self.held_lsn = 0  # the LSN they wait for (in object storage)
        # Where the replies of writes to raft tables are, so that a failed commit in
        # etcd answers them with an error (the rest of the held replies go as they
        # are): (start, end, raft LSN) in the batch's replies (`raft_marks`, set by
        # proxy.pipeline.run), then in `held` (`held_marks`). A raft write whose reply
        # is written elsewhere (a deferred or blocked command) cannot be placed:
        # `raft_unplaced` is its LSN, and its failure closes the connection instead.
        self.raft_marks: list[tuple[int, int, int]] = []
        self.held_marks: list[tuple[int, int, int]] = []
        self.raft_seen = 0
        self.raft_unplaced = 0
        self.close_when_released = False
        self.output_blocked = False  # stopped mid-pipeline until the client reads
        self.soft_since = 0.0  # when its output went past the soft limit (0: it is not)
        self.last_write_len = 0  # bytes of the latest write (one reply may be huge)

    # -- asyncio callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("sockname")
        state = self.server.state
        self.session = Session(
            state,
            addr=_fmt_addr(peer),
            laddr=_fmt_addr(sock),
            push=self.push,
            close=self.kill,
        )
        self.session.output_size = self.transport.get_write_buffer_size
        self.session.unblock = self.unblock
        self.reader = RequestReader(self.session)
        state.stats.connections_received += 1
        if protected_denied(state, peer):
            state.stats.rejected_connections += 1
            self.closing = True
            self.transport.write(PROTECTED_MODE_DENIED)
            self.transport.close()
            return
        if len(state.clients) >= _int_param(state, "maxclients", 10000):
            # As Redis: the error, then the connection is closed.
            state.stats.rejected_connections += 1
            self.closing = True
            self.transport.write(b"-" + MAX_CLIENTS.encode() + b"\r\n")
            self.transport.close()
            return
        state.clients[self.session.id] = self.session
        self.server.connections.add(self)
        self.transport.set_write_buffer_limits(high=4 * 1024 * 1024)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        # The connection and its session refer to each other: only the cyclic GC frees
        # them, and after gc.freeze() it rarely does. Drop the input buffers now, or
        # every closed connection keeps what it last read (hundreds of KB each).
        if self.reader is not None:
            self.reader.clear()
        self.server.connections.discard(self)
        s = self.session
        if s is not None:
            self.server.state.clients.pop(s.id, None)
            self._cancel_block()
            session_closed(s)
            # Break the session's references back to this connection (its push and
            # close callbacks): reference counting then frees both at once, instead
            # of a cycle that gc.freeze() after a checkpoint would keep for good.
            s.push = _ignore_reply
            s.close = _nothing

    def pause_writing(self) -> None:
        if self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        # One reply may be larger than the cap (SRANDMEMBER -20000000, as Redis
        # allows): what counts is what is owed beyond the write that crossed it.
        if (
            self.transport is not None
            and self.transport.get_write_buffer_size() - self.last_write_len > OUTPUT_HARD_LIMIT
        ):
            self.transport.abort()

    def resume_writing(self) -> None:
        if self.transport is not None and self.paused:
            self.paused = False
            self.transport.resume_reading()
        if self.output_blocked:
            self.output_blocked = False
            self._resume()

    def data_received(self, data: bytes) -> None:
        receive(self, data)  # proxy.pipeline (compiled)

    def _query_overflow(self) -> None:
        s = self.session
        assert s is not None
        # As Redis, logged without the buffer's bytes (they may hold a password).
        log.warning(
            "closing client id=%d addr=%s: it reached the max query buffer length (%d)",
            s.id,
            s.addr,
            s.server.limits.query_buffer,
        )
        self.kill()

    # -- executing ---------------------------------------------------------------

    def _run(
        self, requests: list[list[bytes]] | deque[list[bytes]], error: ProtocolError | None
    ) -> None:
        run_batch(self, requests, error)  # proxy.pipeline (compiled)

    def _write(self, out: list[bytes]) -> None:
        """Send replies, or hold them while this connection's writes are not yet
        durable in sync mode (replies stay in order; later replies queue behind)."""
        s = self.session
        if s is not None and s.last_raft_lsn > self.raft_seen:
            self.raft_seen = self.raft_unplaced = s.last_raft_lsn
        write(self, out)  # proxy.pipeline (compiled)

    def _raft_reply(self, start: int, end: int) -> None:
        """proxy.pipeline.run: the replies out[start:end] of the batch are a raft
        write's."""
        s = self.session
        assert s is not None
        self.raft_marks.append((start, end, s.last_raft_lsn))
        self.raft_seen = s.last_raft_lsn

    def _write_held(self, out: list[bytes]) -> None:
        """Replies behind others held for durability: they queue behind them."""
        assert self.held is not None
        if self.raft_marks:
            base = len(self.held)
            self.held_marks += [(a + base, b + base, lsn) for a, b, lsn in self.raft_marks]
            self.raft_marks = []
        self.held.extend(out)
        if sum(map(len, out)) and len(self.held) > HELD_PAUSE_ITEMS and not self.paused:
            self.paused = True
            if self.transport is not None:
                self.transport.pause_reading()

    def _hold_replies(self, out: list[bytes], dur: Durability) -> None:
        """The first replies to wait for this connection's writes to be durable."""
        self.held = list(out)
        self.held_marks, self.raft_marks = self.raft_marks, []
        self._await_durable(dur)

    def _await_durable(self, dur: Durability) -> None:
        """Send the held replies once this connection's writes are durable: a callback
        from the flusher (no task per write), or a task when etcd's log is waited for."""
        s = self.session
        assert s is not None
        # A session that never wrote to raft tables (0) does not ask for raft_lsn.
        if s.last_raft_lsn and s.last_raft_lsn > dur.raft_lsn:
            task = asyncio.get_running_loop().create_task(self._release(dur))
            self.server.releases.add(task)
            task.add_done_callback(self.server.releases.discard)
        else:
            self.held_lsn = s.last_sync_lsn
            dur.on_durable(s.last_sync_lsn, self._durable)

    def _durable(self, exc: Exception | None) -> None:
        """`Durability.on_durable`'s callback: writes up to `held_lsn` are durable
        (or cannot be: `exc`)."""
        s = self.session
        assert s is not None
        if exc is not None:
            self._not_durable(exc)
            return
        if s.last_sync_lsn > self.held_lsn or s.last_raft_lsn:
            # Written to while held (those writes too), or to raft tables (asked).
            dur = s.server.durability
            assert dur is not None
            if s.last_sync_lsn > dur.durable_lsn or s.last_raft_lsn > dur.raft_lsn:
                self._await_durable(dur)
                return
        self._send_held()

    def _not_durable(self, e: Exception) -> None:
        """Fenced or shutting down: these writes are not durable."""
        assert self.session is not None
        log.warning("closing client %d: its writes cannot be made durable: %s", self.session.id, e)
        self.held = None
        self.held_marks = []
        self.kill()

    def _raft_failed(self, dur: Durability) -> bool:
        """etcd did not commit this connection's raft writes: answer each of them
        that object storage does not hold either with TRYAGAIN_RAFT in place of its
        reply (what storage holds is durable: its reply stands), and send the held
        replies; the connection goes on. False when a raft write's reply cannot be
        placed (then the connection is closed, as a sync write's is)."""
        s = self.session
        held = self.held
        assert s is not None
        committed = dur.raft_lsn
        if held is None or self.raft_unplaced > committed or self.raft_seen < s.last_raft_lsn:
            return False
        error: list[bytes] = []
        encode(ErrorReply(TRYAGAIN_RAFT.encode()), s.resp, error)
        for start, end, lsn in self.held_marks:
            if lsn > committed:
                held[start:end] = [b"".join(error)] + [b""] * (end - start - 1)
                s.server.stats.error_replies += 1
        log.warning(
            "client %d: raft writes up to LSN %d not committed in etcd: answered TRYAGAIN",
            s.id,
            s.last_raft_lsn,
        )
        # Nothing more to wait for: their outcome is unknown and was answered so.
        s.last_raft_lsn = 0
        self._send_held()
        return True

    async def _release(self, dur: Durability) -> None:
        s = self.session
        assert s is not None
        try:
            while True:
                target, raft = s.last_sync_lsn, s.last_raft_lsn
                await dur.wait_durable(target)
                if raft > dur.raft_lsn:
                    try:
                        await dur.wait_raft(raft)
                    except Exception:
                        if self.closing or not self._raft_failed(dur):
                            raise
                        return
                if s.last_sync_lsn <= target and s.last_raft_lsn <= raft:
                    break
        except Exception as e:
            self._not_durable(e)
            return
        self._send_held()

    def _send_held(self) -> None:
        held, self.held = self.held or [], None
        self.held_marks = []
        send(self, held)  # proxy.pipeline (compiled), without `_send`'s frame
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        if self.close_when_released:
            self._close_after_write()

    def _wait_capacity(self) -> None:
        """The first backlog request is a write refused for lack of flush capacity."""
        s = self.session
        assert s is not None
        dur = s.server.durability
        assert dur is not None
        self.waiting = True

        async def wait() -> None:
            try:
                ok = await dur.wait_capacity(s.server.write_wait_s)
            except Exception:
                ok = False
            if self.closing:
                return
            if not ok and self.backlog:
                self.backlog.popleft()
                text = TRYAGAIN_STORAGE.format(dur.last_error()).replace("\r", " ")
                out: list[bytes] = []
                encode(ErrorReply(text.replace("\n", " ").encode()), s.resp, out)
                s.server.stats.error_replies += 1
                self._write(out)
            self._resume()

        task = asyncio.get_running_loop().create_task(wait())
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    def _send(self, out: list[bytes]) -> None:
        send(self, out)  # proxy.pipeline (compiled)

    def check_output_limit(self) -> None:
        """client-output-buffer-limit for this client's class (pubsub while subscribed):
        past the hard limit, or past the soft one for longer than its seconds, the
        connection is closed, as Redis does. Counted: the bytes queued in the transport."""
        t = self.transport
        s = self.session
        if t is None or s is None or t.is_closing():
            return
        kind = "slave" if s.redis_replica else "normal"  # a Redis replica (SYNC, PSYNC)
        limit = s.server.limits.output["pubsub" if s.channels or s.patterns else kind]
        if not limit.active:
            return
        used = t.get_write_buffer_size()
        since = output_limit_reached(limit, used, self.soft_since, time.time())
        if since >= 0:
            self.soft_since = since
            return
        log.warning(
            "client id=%d addr=%s closed for overcoming of output buffer limits (%d bytes)",
            s.id,
            s.addr,
            used,
        )
        self.closing = True
        t.abort()

    def _close_after_write(self) -> None:
        self.closing = True
        if self.held is not None:
            self.close_when_released = True
        elif self.transport is not None:
            self.transport.close()

    def _resume(self) -> None:
        """Continue with requests that arrived while we were blocked."""
        self.waiting = False
        if (self.backlog or self.backlog_error is not None) and not self.closing:
            backlog, error = self.backlog, self.backlog_error
            self.backlog, self.backlog_error = deque(), None
            self._run(backlog, error)

    # -- blocking commands -----------------------------------------------------------

    def _block(self, argv: list[bytes], b: Blocked) -> None:
        s = self.session
        assert s is not None
        self.waiting = True
        s.blocked = True
        st = BlockState(b.retry_argv or argv, b)
        self.block_state = st
        if b.timeout > 0:
            st.timer = asyncio.get_running_loop().call_later(b.timeout, self._block_timeout)
        self._observe(st, b)

    def _observe(self, st: BlockState, b: Blocked) -> None:
        s = self.session
        assert s is not None
        st.keys = list(b.keys)
        for dbi, key in b.keys:
            s.store.observe(dbi, key, self._key_touched)

    def _unobserve(self, st: BlockState) -> None:
        s = self.session
        if s is None:
            return
        for dbi, key in st.keys:
            s.store.unobserve(dbi, key, self._key_touched)
        st.keys = []

    def _key_touched(self, dbi: int, key: bytes) -> None:
        st = self.block_state
        if st is None or st.scheduled:
            return
        st.scheduled = True
        if not READY:
            asyncio.get_running_loop().call_soon(serve_ready)
        READY.append(self)

    def _retry_block(self) -> None:
        st = self.block_state
        s = self.session
        if st is None or s is None or self.closing:
            return
        st.scheduled = False
        self._unobserve(st)
        server = s.server
        start = server.clock_mark = time.perf_counter_ns()
        reply = DISPATCHER.execute(s, st.argv)
        if server.clock_mark != start:
            _uncount_retry(s, server.clock_mark - start)
        if type(reply) is Blocked:
            assert isinstance(reply, Blocked)
            if reply.retry_argv:
                st.argv = reply.retry_argv
            self._observe(st, reply)
            return
        self._finish_block(reply)

    def _block_timeout(self) -> None:
        st = self.block_state
        if st is None:
            return
        self._unobserve(st)
        self._finish_block(st.blocked.on_timeout)

    def _finish_block(self, reply: Reply) -> None:
        s = self.session
        assert s is not None
        self._cancel_block()
        s.blocked = False
        if s.reply_mode:
            reply = quiet_reply(s, reply)
        out: list[bytes] = []
        encode(reply, s.resp, out)
        self._write(out)
        # Commands that arrived meanwhile run from the event loop, not inside the command
        # whose commit served this one.
        asyncio.get_running_loop().call_soon(self._resume)

    def _cancel_block(self) -> None:
        st = self.block_state
        if st is not None:
            self._unobserve(st)
            if st.timer is not None:
                st.timer.cancel()
            self.block_state = None

    def _defer(self, d: Deferred) -> None:
        self.waiting = True

        def done(reply: Reply) -> None:
            if self.closing:
                return
            s = self.session
            assert s is not None
            if s.reply_mode:
                reply = quiet_reply(s, reply)
            out: list[bytes] = []
            encode(reply, s.resp, out)
            self._write(out)
            self._resume()

        d.start(done)

    # -- CLIENT PAUSE, CLIENT UNBLOCK ------------------------------------------------

    def _hold(self) -> None:
        """The first backlog request is held by CLIENT PAUSE: wait for the pause to
        end (counted as blocked, as Redis counts a paused client)."""
        s = self.session
        assert s is not None
        self.waiting = True
        s.blocked = True
        s.server.ops.pause.waiters.append(self._unpaused)

    def _unpaused(self) -> None:
        s = self.session
        if s is None or self.closing:
            return
        s.blocked = False
        self._resume()

    def unblock(self, error: bool) -> bool:
        """CLIENT UNBLOCK: end this connection's blocking command with its timeout reply
        or an UNBLOCKED error (sent on the loop's next turn); False if none waits."""
        st = self.block_state
        s = self.session
        if st is None or s is None:
            return False
        self._cancel_block()
        if error:
            s.server.stats.error_replies += 1
            reply: Reply = ErrorReply(b"UNBLOCKED client unblocked via CLIENT UNBLOCK")
        else:
            reply = st.blocked.on_timeout
        asyncio.get_running_loop().call_soon(self._finish_block, reply)
        return True

    # -- out of band ---------------------------------------------------------------

    def push(self, reply: Reply) -> None:
        """A pub/sub message: written at once (`_send` applies the output limits)."""
        t = self.transport
        s = self.session
        if t is None or s is None or t.is_closing():
            return
        out: list[bytes] = []
        encode(reply, s.resp, out)
        self._write(out)

    def kill(self) -> None:
        """Close this connection (CLIENT KILL, shutdown)."""
        self.closing = True
        if self.transport is not None:
            self.transport.close()


def _uncount_retry(s: Session, dur: int) -> None:
    """A blocked command run again is the same call: as Redis, its calls are counted
    once (when it blocked), and its latency histogram holds one sample."""
    st = s.server.command_stats.get(s.last_cmd_name)
    if st is not None:
        st.calls -= 1
        if s.server.latency_tracking and st.hist[dur.bit_length()]:
            st.hist[dur.bit_length()] -= 1


def _ignore_reply(reply: Reply) -> None:
    """A closed connection's session drops what is pushed to it."""


def _nothing() -> None:
    """Closing a closed connection's session does nothing."""


def _fmt_addr(a: Any) -> str:
    if isinstance(a, tuple) and len(a) >= 2:
        host = a[0]
        return f"[{host}]:{a[1]}" if ":" in str(host) else f"{host}:{a[1]}"
    return str(a or "")


class Server:
    """Listens, tracks connections, runs active expiry, shuts down gracefully."""

    def __init__(self, state: ServerCore) -> None:
        self.state = state
        self.connections: set[Connection] = set()
        self.servers: list[asyncio.base_events.Server] = []
        self.stopping: asyncio.Event | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        # Connections' waits for etcd's log (raft tables) before they send held
        # replies; waits for object storage alone are flusher callbacks (on_durable).
        self.releases: set[asyncio.Task[None]] = set()
        self.port = 0
        self.tls_port = 0
        self.plain: list[asyncio.base_events.Server] = []  # the plain TCP listeners

    async def start(
        self, host: str, port: int, tls: ssl.SSLContext | None = None, tls_port: int = 0
    ) -> int:
        """Listen on `port` (0: a free one; negative: no plain TCP listener) and, given a
        TLS context, on `tls_port` too; the same protocol is served on both."""
        loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        if port >= 0:
            srv = await loop.create_server(
                lambda: Connection(self), host, port, reuse_address=True, backlog=511
            )
            self.servers.append(srv)
            self.plain = [srv]
            self.port = srv.sockets[0].getsockname()[1]
        self.state.config.port = self.port  # 0 without a plain listener, as Redis shows
        self.state.listen_port = lambda port: move_listener(self, port, lambda: Connection(self))
        if tls is not None:
            srv = await loop.create_server(
                lambda: Connection(self), host, tls_port, ssl=tls, reuse_address=True, backlog=511
            )
            self.servers.append(srv)
            self.tls_port = srv.sockets[0].getsockname()[1]
            self.state.config.params["tls-port"] = str(self.tls_port)
        self.state.shutdown_requested = self.request_shutdown
        for job in (self._cron(), self._tier_history()):
            task = loop.create_task(job)
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return self.port

    def request_shutdown(self) -> None:
        if self.stopping is not None:
            self.stopping.set()

    async def _cron(self) -> None:
        """Active expiry, ten times a second (Redis' hz 10); idle clients and output
        buffer limits once a second."""
        ticks = 0
        state = self.state
        while True:
            await asyncio.sleep(0.1)
            if state.debug.pause_cron or state.loading:  # DEBUG PAUSE-CRON, DEBUG RELOAD
                continue
            state.store.tick()  # the LRU clock
            # DEBUG SET-ACTIVE-EXPIRE 0 stops the cycle; as in Redis, it does not run
            # while a script that ran past busy-reply-threshold goes on (its keys
            # expire as of its start).
            if state.debug.active_expire and not state.busy_script:
                began = time.monotonic()
                state.store.active_expire()
                state.ops.add_latency("expire-cycle", int((time.monotonic() - began) * 1000))
            sync_expired(state)
            ticks += 1
            if ticks % 10 == 0:
                self.close_idle_clients()
                self.check_output_limits()

    async def _tier_history(self) -> None:
        """While the history in memory is past `history-memory`, older versions move to
        the spill file (store.coldhistory); with `history-memory` 0, while the plain
        entries in memory are past `history-hot-memory`, older versions are frozen into
        compressed runs in memory. In steps that take as long as the clients had since
        the last one (2-50 ms): half the core while writes outrun it, so the resident
        set stays near the budget, and nearly all of it (50 ms steps) while frozen
        history's plain entries are past twice theirs; looked at ten times a second
        otherwise."""
        state = self.state
        last = time.monotonic()
        while True:
            budget = int(config_get_value(state, "history-memory"))
            kind = "file"
            if budget <= 0:
                budget = int(config_get_value(state, "history-hot-memory"))
                kind = "memory"
            store = state.store
            if budget <= 0 or state.loading or state.debug.pause_cron or store.spill is None:
                await asyncio.sleep(0.1)
                continue
            use_kind(store, kind)
            began = time.monotonic()
            share = min(max(began - last, 0.002), 0.05)
            if kind == "memory" and hot_bytes(store) > 2 * budget:
                # Writes outran the freezing by twice its budget: 50 ms steps with one
                # pass of the clients between them, so writes slow to the rate history
                # is frozen at and memory stays bounded (what is freed stays in the
                # resident set: an overshoot would be paid for good).
                share = 0.05
            more = store.tierer.step(budget, share)
            last = time.monotonic()
            await asyncio.sleep(0 if more else 0.1)

    def check_output_limits(self) -> None:
        """A client past its soft output limit is closed once it has stayed there long
        enough, even when nothing more is written to it (Redis' clientsCron)."""
        for conn in list(self.connections):
            if conn.transport is not None and conn.transport.get_write_buffer_size():
                conn.check_output_limit()

    def close_idle_clients(self) -> None:
        """`timeout` (seconds, 0 = never): close clients idle that long, except those
        blocked, subscribed, in MULTI or Redis replicas, as Redis does."""
        limit = _int_param(self.state, "timeout", 0)
        if limit <= 0:
            return
        now = time.time()
        for conn in list(self.connections):
            s = conn.session
            if (
                s is not None
                and not s.blocked
                and not (s.channels or s.patterns)
                and s.multi is None
                and not s.redis_replica
                and now - s.last_interaction > limit
            ):
                conn.kill()

    async def serve_until_stopped(self) -> None:
        assert self.stopping is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_shutdown)
        await self.stopping.wait()
        await self.close()

    async def close(self) -> None:
        """Shut down in order: stop accepting and reading requests; let object storage
        take every pending write, so that replies held for sync durability go out;
        then close every connection (after what it is owed is written) and stop tasks."""
        for srv in self.servers:
            srv.close()
        for conn in list(self.connections):
            conn.closing = True  # later input is ignored, held replies still go out
        dur = self.state.durability
        if dur is not None:
            durable = await self._drain(dur)
            if self.releases:
                await asyncio.wait(
                    set(self.releases), timeout=SHUTDOWN_RELEASE_S if durable else 0.1
                )
        for conn in list(self.connections):
            conn.kill()
        for srv in self.servers:
            await srv.wait_closed()
        await cancel_and_wait(*self.tasks, *self.releases)
        log.info("shut down")

    async def _drain(self, dur: Durability) -> bool:
        """Wait until every write so far is durable: True if all are."""
        try:
            durable = await dur.drain(SHUTDOWN_DRAIN_S)
        except Exception as e:  # fenced: nothing more can become durable
            log.error("shutdown: pending writes cannot be made durable: %s", e)
            return False
        if not durable:
            log.error(
                "shutdown: writes past LSN %d were not durable after %.0f s: %s",
                dur.durable_lsn,
                SHUTDOWN_DRAIN_S,
                dur.last_error(),
            )
        return durable
