"""How a connection looks from outside, the core's: its CLIENT LIST / CLIENT INFO line
(`info_line`, which the ACL LOG records too), its type, and the rules for the names a
client gives itself (`set_client_name`: CLIENT SETNAME and HELLO SETNAME). The CLIENT
commands are the `commands.client` family's."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from commands.errors import CLIENT_NAME_SPACES, CommandError
from commands.registry import COMMANDS

if TYPE_CHECKING:
    from commands.session import Session


RBS = 1024  # a Redis client's reply buffer once it has shrunk


BASE_MEMORY = 1824  # the client struct and friends: tot-mem reads like Redis'


def valid_attr(value: bytes) -> bool:
    """What CLIENT LIST can show: printable ASCII without spaces."""
    return all(33 <= c <= 126 for c in value)


def set_client_name(s: Session, name: bytes) -> None:
    if not valid_attr(name):
        raise CommandError(CLIENT_NAME_SPACES)
    s.name = name or None


CLIENT_TYPES = {
    b"normal": "normal",
    b"slave": "slave",
    b"replica": "slave",
    b"pubsub": "pubsub",
    b"master": "master",
}


def client_type(c: Session) -> str:
    if c.redis_replica:  # SYNC/PSYNC (commands.redis_repl)
        return "slave"
    return "pubsub" if c.channels or c.patterns else "normal"


def _last_command(c: Session) -> str:
    """The full name of the last command run, where the dispatcher records it
    (`last_cmd_name`); else the command `last_cmd` names (a container without its
    subcommand)."""
    name = getattr(c, "last_cmd_name", None)
    if isinstance(name, str):
        return name
    cmd = COMMANDS.get(c.last_cmd) or COMMANDS.get(c.last_cmd.lower())
    return cmd.name if cmd is not None else "NULL"


def _flags(c: Session) -> str:
    out = "O" if c.monitor else "S" if c.redis_replica else ""
    if c.channels or c.patterns:
        out += "P"
    if c.multi is not None:
        out += "x"
    if c.blocked:
        out += "b"
    t = c.tracking
    if t is not None:
        out += "t" + ("R" if t.broken else "") + ("B" if t.bcast else "")
    if c.watch_dirty:
        out += "d"
    if c.killed:
        out += "c"
    if c.extra.get("no-evict"):
        out += "e"
    return out or "N"


def redirect_of(c: Session) -> int:
    """CLIENT GETREDIR, CLIENT LIST's redir=: the redirect client (0: none), -1 when
    tracking is off."""
    t = c.tracking
    return -1 if t is None else int(t.redirect)


def info_line(c: Session, me: Session | None = None, argv: list[bytes] | None = None) -> bytes:
    """One CLIENT LIST line (no newline). `me`/`argv`: the session asking and its command,
    whose query buffer and argv still hold that command, as in Redis."""
    now = time.time()
    current = c is me
    if current and argv is not None:
        running = sum(len(a) + len(str(len(a))) + 5 for a in argv) + len(str(len(argv))) + 3
        argv_mem = sum(len(a) for a in argv)
        cmd = "client|" + argv[1].lower().decode("utf-8", "replace")
        idle = 0
    else:
        running = argv_mem = 0
        cmd = _last_command(c)
        idle = int(now - c.last_interaction)
    qbuf, qbuf_free = c.qbuf.figures(running)
    multi = len(c.multi) if c.multi is not None else -1
    multi_mem = sum(len(a) for _, args in c.multi for a in args) if c.multi else 0
    tot_mem = BASE_MEMORY + qbuf + qbuf_free + multi_mem
    name = (c.name or b"").decode("ascii", "replace")
    return (
        f"id={c.id} addr={c.addr} laddr={c.laddr} fd={7 + c.id} name={name} "
        f"age={int(now - c.created)} idle={idle} flags={_flags(c)} db={c.dbi} "
        f"sub={len(c.channels)} psub={len(c.patterns)} ssub=0 multi={multi} qbuf={qbuf} "
        f"qbuf-free={qbuf_free} argv-mem={argv_mem} multi-mem={multi_mem} rbs={RBS} rbp=0 "
        f"obl=0 oll=0 omem=0 tot-mem={tot_mem} events=r cmd={cmd} "
        f"user={c.user.decode('utf-8', 'replace')} redir={redirect_of(c)} resp={c.resp}"
    ).encode()
