"""MIGRATE and RESTORE-ASKING, as a redis-server 7.0 not in cluster mode serves them.

MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
        [AUTH password | AUTH2 username password] [KEYS key [key ...]]
    As redis-server's migrateCommand: each key that exists is sent to the target as
    `RESTORE key ttl payload [REPLACE]` (the DUMP payload, the remaining TTL), after
    AUTH and SELECT when needed, over a connection kept for 10 s per host:port (INFO's
    migrate_cached_sockets); each key the target accepted is deleted here unless COPY.
    Like Redis, the call waits for the target synchronously (the server answers no one
    else meanwhile, bounded by `timeout` ms per connect, write and read), so a MIGRATE
    to this server itself times out, as it does on redis-server.
RESTORE-ASKING key ttl payload [...]
    RESTORE under the name a cluster node sends between nodes: the same command here
    (registered by `commands.dump`, with RESTORE).
"""

from __future__ import annotations

import random
import socket
import time

from commands.dispatch import command_stats, count_error
from commands.errors import NOT_INTEGER, SYNTAX, CommandError
from commands.migrate_cache import _SOCKETS, _Cached, cached_sockets
from commands.parsing import get_int
from commands.rdb_write import dump_of
from commands.registry import COMMANDS, Flag, command
from commands.replies import OK, ErrorReply, Reply, Simple
from commands.replstate import encode_command
from commands.session import ServerCore, Session
from store import now_ms
from store.ops import DEL

MIGRATE_KEYS_NONEMPTY = (
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
)
CONNECT_FAILED = "IOERR error or timeout connecting to the client"
TARGET_ERROR = b"ERR Target instance replied with error: %s"

CACHE_ITEMS = 64  # MIGRATE_SOCKET_CACHE_ITEMS


def _close(server: ServerCore, name: bytes) -> None:
    cs = _SOCKETS.get(server, {}).pop(name, None)
    if cs is not None:
        cs.sock.close()


def _get_socket(server: ServerCore, host: bytes, port: bytes, timeout: float) -> _Cached | None:
    """The cached connection to host:port, or a new one; None when the connection
    was refused."""
    cached_sockets(server)
    cache = _SOCKETS.setdefault(server, {})
    name = host + b":" + port
    cs = cache.get(name)
    if cs is not None:
        cs.last_use = time.time()
        return cs
    if len(cache) >= CACHE_ITEMS:
        _close(server, random.choice(list(cache)))
    digits = port.lstrip(b" \t\n\v\f\r")
    sign = digits[:1] in (b"-", b"+")
    n = len(digits[sign:]) - len(digits[sign:].lstrip(b"0123456789"))
    port_n = int(digits[: sign + n]) if n else 0  # atoi
    try:
        sock = socket.create_connection(
            (host.decode("utf-8", "replace"), port_n & 0xFFFF), timeout=timeout
        )
    except (TimeoutError, socket.gaierror, ValueError, UnicodeError):
        raise CommandError(CONNECT_FAILED) from None
    except OSError:
        # Redis connects without blocking and waits until the socket is writable,
        # which a refused connection is: the refusal shows when it writes.
        return None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cs = cache[name] = _Cached(sock)
    return cs


def _parse(argv: list[bytes]) -> tuple[bool, bool, list[bytes] | None, int, int]:
    """(copy, replace, AUTH arguments or None, first key, number of keys)."""
    flags: set[bytes] = set()
    auth: list[bytes] | None = None
    first, num = 3, 1
    j = 6
    while j < len(argv):
        more = len(argv) - 1 - j
        opt = argv[j].lower()
        if opt in (b"copy", b"replace"):
            flags.add(opt)
        elif opt == b"auth":
            if not more:
                raise CommandError(SYNTAX)
            j += 1
            auth = [argv[j]]
        elif opt == b"auth2":
            if more < 2:
                raise CommandError(SYNTAX)
            auth = [argv[j + 1], argv[j + 2]]
            j += 2
        elif opt == b"keys":
            if argv[3]:
                raise CommandError(MIGRATE_KEYS_NONEMPTY)
            first, num = j + 1, len(argv) - j - 1
            break
        else:
            raise CommandError(SYNTAX)
        j += 1
    return b"copy" in flags, b"replace" in flags, auth, first, num


def _failed(s: Session, text: bytes) -> ErrorReply:
    """An error reply that keeps the deletions made before it (a raised CommandError
    would undo them), counted as the dispatcher counts errors."""
    s.server.stats.error_replies += 1
    count_error(s, text)
    command_stats(s, MIGRATE).failed += 1
    return ErrorReply(text)


@command("migrate", -6, Flag.WRITE, 3, 3, 1)
def cmd_migrate(s: Session, argv: list[bytes]) -> Reply:
    copy, replace, auth, first, num = _parse(argv)
    timeout = get_int(argv[5], NOT_INTEGER)
    dbid = get_int(argv[4], NOT_INTEGER)
    if timeout <= 0:
        timeout = 1000
    db = s.db
    keys = [k for k in argv[first : first + num] if db.get(k) is not None]
    if not keys:
        return Simple(b"NOKEY")
    host, port = argv[1], argv[2]
    name = host + b":" + port
    may_retry = True
    while True:
        cs = _get_socket(s.server, host, port, timeout / 1000)
        if cs is not None:
            cs.sock.settimeout(timeout / 1000)
        out = [encode_command([b"AUTH", *auth])] if auth is not None else []
        select = cs is None or cs.last_dbid != dbid
        if select:
            out.append(encode_command([b"SELECT", b"%d" % dbid]))
        sent: list[bytes] = []
        for key in keys:
            at = db.ttl_ms(key)
            ttl = 0
            if at is not None:
                ttl = at - now_ms()
                if ttl < 0:
                    continue
                ttl = max(ttl, 1)
            value = db.peek(key)
            if value is None:
                continue
            restore = [b"RESTORE", key, b"%d" % ttl, dump_of(s, value)]
            out.append(encode_command([*restore, b"REPLACE"] if replace else restore))
            sent.append(key)
        try:
            if cs is None:
                raise ConnectionRefusedError
            cs.sock.sendall(b"".join(out))
        except OSError as e:
            _close(s.server, name)
            if may_retry and not isinstance(e, TimeoutError):
                may_retry = False
                continue
            raise CommandError("IOERR error or timeout writing to target instance") from None
        error: bytes | None = None
        done = 0
        try:
            auth_line = cs.read_line() if auth is not None else b""
            select_line = cs.read_line() if select else b""
            for key in sent:
                line = cs.read_line()
                done += 1
                # An AUTH or SELECT error fails every key; a RESTORE error its own.
                for reply in (auth_line, select_line, line):
                    if reply[:1] == b"-":
                        error = error or reply
                        break
                else:
                    if not copy:
                        s.store.apply(db, key, (DEL,))
        except OSError as e:
            _close(s.server, name)
            if error is None and not done and may_retry and not isinstance(e, TimeoutError):
                may_retry = False
                continue
            if error is None:
                return _failed(s, b"IOERR error or timeout reading to target instance")
        if error is not None:
            cs.last_dbid = -1
            return _failed(s, TARGET_ERROR % error[1:])
        cs.last_dbid = dbid
        return OK


MIGRATE = COMMANDS[b"migrate"]
