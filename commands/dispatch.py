"""From a parsed request to a reply: lookup, arity, auth gate, MULTI queueing,
subscribe context, the call in the store's transaction, and the commit that gives
it a version (one for a whole MULTI/EXEC block)."""

from __future__ import annotations

import logging
import time
from typing import Final

from commands.cleanup import unwatch_all
from commands.cluster_mode import route as cluster_route
from commands.common import get_string
from commands.errors import (
    FENCED,
    LOADING,
    NOAUTH,
    NOREPLICAS,
    NOT_IN_MULTI,
    READONLY,
    READONLY_VIEW,
    SUBSCRIBE_CONTEXT,
    UNKNOWN_COMMAND,
    UNKNOWN_SUBCOMMAND,
    WRONG_ARITY,
    CommandError,
)
from commands.evict import memory_check
from commands.hotwrites import hset_one, incr_by, push
from commands.limits import OOM
from commands.maxmemory import memory_pressed, oom_rejects
from commands.notify import notify_after
from commands.ops_log import feed_monitors, feed_script_call, note_slow
from commands.permissions import denied as acl_denied
from commands.propagate import after_call as propagate_after
from commands.registry import (
    COMMANDS,
    DIRECT_DECR,
    DIRECT_GET,
    DIRECT_HSET,
    DIRECT_INCR,
    DIRECT_LPUSH,
    DIRECT_RPUSH,
    DIRECT_SET,
    PROTECTED_REFUSAL,
    Command,
    CommandStats,
    Flag,
)
from commands.replies import OK, PAUSED, QUEUED, ErrorReply, Reply
from commands.session import ServerCore, Session
from store import PrunedError
from store.commitpath import set_string

log = logging.getLogger("temporalstore")
# Bound once: compiled, a Final is a C static (no module dict lookup per command), and
# `.get` on the typed dict is a C call (a bound `COMMANDS.get` was a method call).
_COMMANDS: Final = COMMANDS
_monotonic: Final = time.monotonic
_perf_ns: Final = time.perf_counter_ns
_OK: Final = OK  # commands.replies is not compiled: its names are module dict lookups


def _clean(text: bytes) -> bytes:
    """Redis replaces newlines in error texts so the reply stays one line."""
    return text.replace(b"\r", b" ").replace(b"\n", b" ")


def unknown_command_error(argv: list[bytes]) -> bytes:
    args = b""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + a[: 128 - len(args)] + b"' "
    return _clean(UNKNOWN_COMMAND.encode().replace(b"{}", argv[0][:128], 1).replace(b"{}", args, 1))


def lookup(argv: list[bytes]) -> Command | bytes:
    """The command for a request, or the error text that rejects it."""
    name = argv[0]
    cmd = COMMANDS.get(name)
    if cmd is None:
        cmd = COMMANDS.get(name.lower())
        if cmd is None:
            return unknown_command_error(argv)
    if cmd.subcommands is not None and len(argv) >= 2:
        sub = cmd.subcommands.get(argv[1].lower())
        if sub is None:
            return _clean(
                UNKNOWN_SUBCOMMAND.encode()
                .replace(b"{}", argv[1][:128], 1)
                .replace(b"{}", cmd.name.upper().encode(), 1)
            )
        cmd = sub
    arity = cmd.arity
    n = len(argv)
    if (arity > 0 and n != arity) or n < -arity:
        return WRONG_ARITY.format(cmd.name).encode()
    return cmd


def is_local_client(s: Session) -> bool:
    """Redis' islocalClient: a Unix socket, or a TCP peer at 127.0.0.1 or ::1 (an
    in-process session, which has no address, is local too)."""
    host = s.addr.rpartition(":")[0] if ":" in s.addr else s.addr
    return host in ("", "127.0.0.1", "[::1]") or host.startswith("/")


def protected_allowed(s: Session, config: str) -> bool:
    """Redis' allowProtectedAction: the config (no|yes|local) lets this client act."""
    allowed = s.server.config.params.get(config, "no")
    return allowed == "yes" or (allowed == "local" and is_local_client(s))


def protected_refusal(s: Session, cmd: Command) -> bytes | None:
    """Redis' refusal of a protected command (DEBUG, MODULE) its config does not allow."""
    if protected_allowed(s, cmd.protected):
        return None
    name = cmd.name.partition("|")[0].upper()
    return PROTECTED_REFUSAL.format(name, cmd.protected).encode()


def _writes(s: Session, cmd: Command) -> bool:
    """A write command, or an EXEC whose queue holds one (Redis' is_write_command)."""
    if cmd.is_write:
        return True
    return cmd.name == "exec" and s.multi is not None and any(c.is_write for c, _ in s.multi)


class Dispatcher:
    """Executes requests for sessions. One per server."""

    def execute(self, s: Session, argv: list[bytes]) -> Reply:
        return self.execute_named(s, argv, _COMMANDS.get(argv[0]))

    def execute_named(self, s: Session, argv: list[bytes], cmd: Command | None) -> Reply:
        """`execute`, given the table's entry for `argv[0]` as named (None if it has
        none): the connection's loop looks it up once for its capacity check and this."""
        # The common request: a command without subcommands, named as the table
        # has it (lower or upper case), of the right arity; anything else goes
        # through `lookup`, which finds the error texts too.
        if cmd is not None and cmd.subcommands is None:
            arity = cmd.arity
            if (len(argv) != arity) if arity > 0 else (len(argv) < -arity):
                return self.reject(s, WRONG_ARITY.format(cmd.name).encode(), argv)
        else:
            found = lookup(argv)
            if type(found) is bytes:
                return self.reject(s, found, argv)
            assert isinstance(found, Command)
            cmd = found
        s.last_cmd_name = cmd.name
        if cmd.protected and (refused := protected_refusal(s, cmd)) is not None:
            return self.reject(s, refused, argv, cmd)
        if not s.authenticated and not cmd.flags & Flag.NO_AUTH and s.server.users.auth_required():
            return self.reject(s, NOAUTH.encode(), argv, cmd)
        if not s.acl_all and (denied := acl_denied(s, cmd, argv)) is not None:
            return self.reject(s, denied, argv, cmd)  # NOPERM (ACL users: commands.acl)
        server: ServerCore = s.server  # its per-command fields, read directly when compiled
        if server.cluster is not None and (moved := cluster_route(s, cmd, argv)) is not None:
            return self.reject(s, moved, None, cmd)  # MOVED, CROSSSLOT (commands.cluster_mode)
        if server.limits.maxmemory and memory_pressed(s.server):  # commands.evict
            if memory_check(s.server) and oom_rejects(s, cmd):
                return self.reject(s, OOM.encode(), argv, cmd)  # evicting freed too little
        if server.min_replicas and _writes(s, cmd):  # min-replicas-to-write
            if server.replication.replicas_short(server.repl_stream):
                return self.reject(s, NOREPLICAS.encode(), argv, cmd)
        if server.loading and not cmd.flags & Flag.LOADING:
            return self.reject(s, LOADING.encode(), argv, cmd)
        if cmd.is_write and s.view_lsn is not None:
            return self.reject(s, READONLY_VIEW.encode(), argv, cmd)
        if cmd.is_write and (
            server.read_only or (server.write_deadline and _monotonic() >= server.write_deadline)
        ):
            # A replica; or a leader whose lease may be about to expire (it answers
            # nothing it cannot be sure of still leading for).
            return self.reject(s, (server.read_only or READONLY).encode(), argv, cmd)
        if cmd.is_write and server.fenced:  # the durability object's `fenced`
            return self.reject(s, FENCED.encode(), argv, cmd)
        if len(server.busy_script) and not cmd.flags & Flag.ALLOW_BUSY:
            return self.reject(s, server.busy_script, argv, cmd)  # a script runs (scripting)
        if server.gate is not None:
            # A CLIENT PAUSE in force, or MONITOR clients (commands.pause): PAUSED
            # holds the command until the pause ends; bytes reject it.
            gated = server.gate(s, cmd, argv)
            if gated is PAUSED:
                return PAUSED
            if gated is not None:
                return self.reject(s, gated, argv, cmd)
        if s.multi is not None and not cmd.is_tx_control:
            if cmd.flags & Flag.NO_MULTI:
                return self.reject(s, NOT_IN_MULTI.encode(), None, cmd)
            s.multi.append((cmd, argv))
            return QUEUED
        # len(): compiled, a size read (truthiness of a set is a generic call)
        subscribed = len(s.channels) or len(s.patterns)
        if s.resp == 2 and subscribed and not cmd.flags & Flag.SUBSCRIBE_OK:
            return self.reject(s, SUBSCRIBE_CONTEXT.format(cmd.name).encode(), argv, cmd)
        return self.call(s, cmd, argv)

    def reject(
        self,
        s: Session,
        text: bytes,
        argv: list[bytes] | None = None,
        cmd: Command | None = None,
    ) -> ErrorReply:
        if s.multi is not None:
            s.multi_error = True
        s.server.stats.error_replies += 1
        count_error(s, text)
        if cmd is not None:
            command_stats(s, cmd).rejected += 1
        if argv is not None and argv[0].lower() == b"exec":
            # A rejected EXEC aborts the transaction, naming the reason.
            s.multi = None
            s.multi_error = False
            unwatch_all(s)
            if s.server.monitors:
                feed_monitors(s, argv)  # Redis' execCommandAbort ends the MULTI it showed
            return ErrorReply(
                b"EXECABORT Transaction discarded because of: " + text.removeprefix(b"ERR ")
            )
        return ErrorReply(text)

    def call(self, s: Session, cmd: Command, argv: list[bytes]) -> Reply:
        store = s.store
        # store.begin(cmd.name, s), without its call: name the command and its writer.
        store.cmd = cmd.name
        store.writer = s
        savepoint = len(store.pending)
        server: ServerCore = s.server
        server.stats.commands_processed += 1
        # The counters exist after a command's first call: those of the command before
        # (`ServerCore.stats_cmd`), else a dict lookup, no call.
        st: CommandStats
        if cmd is server.stats_cmd:
            st = server.stats_of_cmd
        else:
            st = server.command_stats.get(cmd.name) or command_stats(s, cmd)
            server.stats_cmd = cmd
            server.stats_of_cmd = st
        # One clock read per command (commands.ops_state): it starts where the one
        # before it in the batch ended; nested ones (EXEC's, a script's) read their own.
        mark = _perf_ns() if s.in_exec else server.clock_mark
        if server.monitors and cmd.flags & Flag.SKIP_MONITOR:
            feed_script_call(s, cmd, argv)  # EVAL, FCALL: before the commands they run
        stream = server.repl_stream  # Redis replicas attached (commands.redis_repl)
        if stream is not None:
            stream.depth += 1
        reply: Reply  # typed before the first assignment (a bytes or None from get_string)
        try:
            direct = cmd.direct
            if direct == DIRECT_GET:
                reply = get_string(s, argv[1])
            elif direct == DIRECT_SET and len(argv) == 3:
                set_string(store, s.db, argv[1], argv[2])
                reply = _OK
            elif direct == DIRECT_INCR:
                reply = incr_by(s, argv[1], 1)
            elif direct == DIRECT_HSET and len(argv) == 4:
                reply = hset_one(s, argv[1], argv[2], argv[3])
            elif direct == DIRECT_LPUSH and len(argv) == 3:
                reply = push(s, argv[1], (argv[2],), True, False)
            elif direct == DIRECT_RPUSH and len(argv) == 3:
                reply = push(s, argv[1], (argv[2],), False, False)
            elif direct == DIRECT_DECR:
                reply = incr_by(s, argv[1], -1)
            else:
                assert cmd.handler is not None
                reply = cmd.handler(s, argv)
        except (CommandError, PrunedError) as e:
            # Handlers validate before they write; this is a safety net. A read under
            # a view of history retention has since dropped answers PRUNED.
            store.rollback_to(savepoint)
            text = e.text if isinstance(e, CommandError) else str(e).encode()
            s.server.stats.error_replies += 1
            count_error(s, text)
            st.failed += 1
            reply = ErrorReply(text)
        except Exception:
            # A bug must not take the connection (or the server) down: undo the
            # command's partial effect, log it, and answer with an error.
            log.exception("internal error in %r", cmd.name)
            store.rollback_to(savepoint)
            s.server.stats.error_replies += 1
            reply = ErrorReply(b"ERR internal error while running '%s'" % cmd.name.encode())
            count_error(s, reply)
            st.failed += 1
        if server.notify_flags:  # keyspace notifications (commands.notify)
            notify_after(s, cmd, argv, savepoint)
        if server.tracking is not None:  # client-side caching (commands.tracking)
            reply = server.tracking.after_call(s, cmd, argv, savepoint, reply)
        if stream is not None:  # what Redis would propagate (commands.propagate)
            propagate_after(stream, s, cmd, argv, savepoint, reply)
        st.calls += 1
        now = _perf_ns()
        dur = now - mark
        server.clock_mark = now
        st.ns += dur
        if dur >= server.slow_ns:
            note_slow(s, cmd, argv, reply, dur)  # SLOWLOG, the latency monitor
        if server.latency_tracking:
            b = dur.bit_length()
            if b == st.run_bucket:  # as the call before: a native int add when compiled
                st.run_calls += 1
            else:
                st.new_run(b)
        if server.monitors and not cmd.flags & (Flag.SKIP_MONITOR | Flag.ADMIN):
            feed_monitors(s, argv, cmd)
        # Inside EXEC the block stays open: EXEC's own call commits it, as one.
        if store.pending and not s.in_exec:
            store.commit()
        return reply


def command_stats(s: Session, cmd: Command) -> CommandStats:
    st = s.server.command_stats.get(cmd.name)
    if st is None:
        st = s.server.command_stats[cmd.name] = CommandStats()
    return st


def count_error(s: Session, text: bytes) -> None:
    """INFO errorstats: error replies by their first word (at most 128 kinds, as Redis)."""
    kind = text.split(b" ", 1)[0].decode("utf-8", "replace")
    counts = s.server.error_stats
    if kind in counts or len(counts) < 128:
        counts[kind] = counts.get(kind, 0) + 1


DISPATCHER: Final = Dispatcher()
