"""What the dispatcher records of a command beyond its counters: the slowlog entry and
the latency monitor's sample of a slow one (`note_slow`, called only for a command
that reached `ServerState.slow_ns`), and the MONITOR line (`feed_monitors`, called
only while someone monitors).

Arguments that carry secrets are shown as "(redacted)" where Redis 7.0 redacts them
(AUTH, HELLO AUTH, ACL SETUSER, CONFIG SET of sensitive parameters, MIGRATE
AUTH/AUTH2). Slowlog entries keep at most 32 arguments (the last then reads "... (N
more arguments)"), each at most 128 bytes (then "... (N more bytes)"). Commands
flagged skip_slowlog (EXEC, ...) are not logged, the commands they ran are; a blocking
command is logged when it is served, not when it blocks.
"""

from __future__ import annotations

import time

from commands.ops_state import MONITOR_LINES, REPLY_MONITOR, SlowEntry
from commands.parsing import string2ll
from commands.registry import Command, Flag
from commands.replies import Blocked, Encoded, Reply
from commands.session import Session

MAX_ARGC = 32
MAX_STRING = 128
REDACTED = b"(redacted)"
# Parameters whose CONFIG SET value is redacted (Redis' SENSITIVE_CONFIG).
SENSITIVE_CONFIGS = frozenset({b"masteruser", b"masterauth", b"requirepass"})


def _redact_hello(argv: list[bytes], out: list[bytes]) -> None:
    if len(argv) < 2:
        return
    ver = string2ll(argv[1])
    if ver is None or ver < 2 or ver > 3:
        return  # refused before its options are read
    j = 2
    while j < len(argv):
        opt = argv[j].lower()
        more = len(argv) - 1 - j
        if opt == b"auth" and more >= 2:
            out[j + 1] = out[j + 2] = REDACTED
            j += 3
        elif opt == b"setname" and more >= 1:
            j += 2
        else:
            return


def _redact_migrate(argv: list[bytes], out: list[bytes]) -> None:
    j = 6
    while j < len(argv):
        opt = argv[j].lower()
        more = len(argv) - 1 - j
        if opt in (b"copy", b"replace"):
            j += 1
        elif opt == b"auth" and more:
            out[j + 1] = REDACTED
            j += 2
        elif opt == b"auth2" and more >= 2:
            out[j + 1] = out[j + 2] = REDACTED
            j += 3
        else:
            return


def redacted(cmd: Command, argv: list[bytes]) -> list[bytes]:
    """The arguments as SLOWLOG and MONITOR show them: secrets replaced where Redis 7.0's
    commands redact them (redactClientCommandArgument)."""
    name = cmd.name
    if name not in _REDACTING:
        return argv
    out = list(argv)
    if name == "auth":
        if len(argv) <= 3:
            out[1] = REDACTED
            if len(argv) == 3:
                out[2] = REDACTED
    elif name == "hello":
        _redact_hello(argv, out)
    elif name == "acl|setuser":
        out[2:] = [REDACTED] * (len(argv) - 2)
    elif name == "config|set":
        if len(argv) % 2 == 0:
            for i in range(2, len(argv) - 1, 2):
                if argv[i].lower() in SENSITIVE_CONFIGS:
                    out[i + 1] = REDACTED
    elif name == "migrate":
        _redact_migrate(argv, out)
    return out


_REDACTING = frozenset({"auth", "hello", "acl|setuser", "config|set", "migrate"})


def peer_id(s: Session) -> bytes:
    """The client's address as Redis names it ("?:0" for a script's own client)."""
    if s.extra.get("script"):
        return b"?:0"
    return s.addr.encode()


def _trimmed(argv: list[bytes]) -> list[bytes]:
    argc = len(argv)
    shown = argv if argc <= MAX_ARGC else argv[:MAX_ARGC]
    out = []
    for j, a in enumerate(shown):
        if argc > MAX_ARGC and j == MAX_ARGC - 1:
            out.append(b"... (%d more arguments)" % (argc - MAX_ARGC + 1))
        elif len(a) > MAX_STRING:
            out.append(a[:MAX_STRING] + b"... (%d more bytes)" % (len(a) - MAX_STRING))
        else:
            out.append(bytes(a))
    return out


def note_slow(s: Session, cmd: Command, argv: list[bytes], reply: Reply, dur_ns: int) -> None:
    """A command took `dur_ns`, at least the least anything records: the latency
    monitor's `command`/`fast-command` event and the slowlog, as Redis' call() does."""
    if type(reply) is Blocked:
        return  # logged when it is served
    server = s.server
    ops = server.ops
    us = dur_ns // 1000
    ops.add_latency("fast-command" if cmd.flags & Flag.FAST else "command", us // 1000)
    if ops.slowlog_us < 0 or us < ops.slowlog_us or cmd.flags & Flag.SKIP_SLOWLOG:
        return
    entry = SlowEntry(
        ops.slowlog_next_id,
        int(time.time()),
        us,
        _trimmed(redacted(cmd, argv)),
        peer_id(s),
        s.name or b"",
    )
    ops.slowlog_next_id += 1
    ops.slowlog.appendleft(entry)
    while len(ops.slowlog) > ops.slowlog_max:
        ops.slowlog.pop()


# -- MONITOR ----------------------------------------------------------------------------

# Commands that feed monitors themselves, before the commands they run (Redis' eval.c,
# functions.c): the dispatcher skips them afterwards (they are flagged skip_monitor).
FEED_FIRST = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})


def _repr(a: bytes) -> bytes:
    """Redis' sdscatrepr: quoted, with C escapes for what is not printable."""
    out = bytearray(b'"')
    for c in a:
        if c == 0x5C or c == 0x22:
            out += b"\\%c" % c
        elif c in _ESCAPES:
            out += _ESCAPES[c]
        elif 0x20 <= c <= 0x7E:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    out += b'"'
    return bytes(out)


_ESCAPES = {0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x07: b"\\a", 0x08: b"\\b"}


def monitor_line(s: Session, argv: list[bytes], cmd: Command | None) -> Encoded:
    """`+<unix>.<usec> [<db> <addr>] "arg" ...` (a script's commands: `[<db> lua]`)."""
    now = time.time()
    sec = int(now)
    where = b"lua" if s.extra.get("script") else s.addr.encode()
    args = redacted(cmd, argv) if cmd is not None else argv
    return Encoded(
        b"+%d.%06d [%d %b] %b\r\n"
        % (sec, int((now - sec) * 1_000_000), s.dbi, where, b" ".join(map(_repr, args)))
    )


def feed_monitors(s: Session, argv: list[bytes], cmd: Command | None = None) -> None:
    """Push a command's line to every MONITOR client (a blocked command's retries
    are not shown again)."""
    if s.blocked:
        return
    line = monitor_line(s, argv, cmd)
    for m in list(s.server.monitors.values()):
        if m is s and s.reply_mode == REPLY_MONITOR:
            s.extra.setdefault(MONITOR_LINES, []).append(line)  # after its own reply
        else:
            m.push(line)


def feed_script_call(s: Session, cmd: Command, argv: list[bytes]) -> None:
    if cmd.name in FEED_FIRST:
        feed_monitors(s, argv, cmd)
