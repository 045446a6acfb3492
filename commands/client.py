"""CLIENT subcommands, as Redis 7.0.15 answers them.

CLIENT ID · CLIENT SETNAME name · CLIENT GETNAME · CLIENT INFO
CLIENT LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID client-id [client-id ...]]
CLIENT KILL ip:port
CLIENT KILL [ID id] [TYPE type] [USER name] [ADDR ip:port] [LADDR ip:port] [SKIPME YES|NO] ...
CLIENT NO-EVICT ON|OFF · CLIENT GETREDIR · CLIENT TRACKINGINFO · CLIENT HELP
CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2)
CLIENT NO-TOUCH (Redis 7.2) is not served: Redis 7.0 answers it as an unknown subcommand.

CLIENT LIST/INFO lines have Redis 7.0's fields in Redis' order; buffer sizes are what an
idle Redis client reports. CLIENT PAUSE, UNPAUSE, UNBLOCK and REPLY are in
`commands.client_control`; TRACKING and CACHING in `commands.tracking`.
"""

from __future__ import annotations

from commands.client_info import (
    CLIENT_TYPES,
    client_type,
    info_line,
    redirect_of,
    set_client_name,
    valid_attr,
)
from commands.common import help_reply
from commands.errors import NO_SUCH_CLIENT, SYNTAX, CommandError
from commands.parsing import string2ll
from commands.registry import ADMIN, CONN, Flag, command, container
from commands.replies import OK, Encoded, Reply, Verbatim
from commands.session import Session

INVALID_CLIENT_ID = "ERR Invalid client ID"
CLIENT_ID_POSITIVE = "ERR client-id should be greater than 0"
UNKNOWN_CLIENT_TYPE = "ERR Unknown client type '{}'"
NO_SUCH_USER = "ERR No such user '{}'"
UNRECOGNIZED_OPTION = "ERR Unrecognized option '{}'"
ATTR_SPACES = "ERR {} cannot contain spaces, newlines or special characters."


CLIENT_HELP = [
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
]

container("client", -2, Flag.SENTINEL)


def _on_off(arg: bytes) -> bool:
    opt = arg.lower()
    if opt == b"on":
        return True
    if opt == b"off":
        return False
    raise CommandError(SYNTAX)


# -- client types and the CLIENT LIST line -----------------------------------------------------


def parse_client_type(arg: bytes) -> str:
    t = CLIENT_TYPES.get(arg.lower())
    if t is None:
        raise CommandError(UNKNOWN_CLIENT_TYPE.format(arg.decode("utf-8", "replace")))
    return t


def _lines(s: Session, argv: list[bytes], clients: list[Session]) -> Verbatim:
    return Verbatim(b"".join(info_line(c, s, argv) + b"\n" for c in clients))


# -- subcommands -------------------------------------------------------------------------------


@command("client|id", 2, CONN)
def cmd_client_id(s: Session, argv: list[bytes]) -> Reply:
    return s.id


@command("client|setname", 3, CONN)
def cmd_client_setname(s: Session, argv: list[bytes]) -> Reply:
    set_client_name(s, argv[2])
    return OK


@command("client|getname", 2, CONN)
def cmd_client_getname(s: Session, argv: list[bytes]) -> Reply:
    return s.name


@command("client|info", 2, CONN)
def cmd_client_info(s: Session, argv: list[bytes]) -> Reply:
    return _lines(s, argv, [s])


@command("client|list", -2, ADMIN)
def cmd_client_list(s: Session, argv: list[bytes]) -> Reply:
    clients = list(s.server.clients.values())
    if len(argv) == 4 and argv[2].lower() == b"type":
        t = parse_client_type(argv[3])
        return _lines(s, argv, [c for c in clients if client_type(c) == t])
    if len(argv) > 3 and argv[2].lower() == b"id":
        chosen = []
        for arg in argv[3:]:
            cid = string2ll(arg)
            if cid is None:
                raise CommandError(INVALID_CLIENT_ID)
            c = s.server.clients.get(cid)
            if c is not None:
                chosen.append(c)
        return _lines(s, argv, chosen)
    if len(argv) != 2:
        raise CommandError(SYNTAX)
    return _lines(s, argv, clients)


@command("client|kill", -3, ADMIN)
def cmd_client_kill(s: Session, argv: list[bytes]) -> Reply:
    addr = laddr = user = None
    ctype: str | None = None
    cid = 0
    skipme = True
    if len(argv) == 3:
        addr = argv[2]
        skipme = False  # the old form can kill the caller
    else:
        i = 2
        while i < len(argv):
            opt = argv[i].lower()
            if i + 1 >= len(argv):
                raise CommandError(SYNTAX)
            val = argv[i + 1]
            if opt == b"id":
                n = string2ll(val)
                if n is None or n < 1:
                    raise CommandError(CLIENT_ID_POSITIVE)
                cid = n
            elif opt == b"type":
                ctype = parse_client_type(val)
            elif opt == b"addr":
                addr = val
            elif opt == b"laddr":
                laddr = val
            elif opt == b"user":
                if s.server.users.get(val) is None:
                    raise CommandError(NO_SUCH_USER.format(val.decode("utf-8", "replace")))
                user = val
            elif opt == b"skipme":
                yes_no = val.lower()
                if yes_no not in (b"yes", b"no"):
                    raise CommandError(SYNTAX)
                skipme = yes_no == b"yes"
            else:
                raise CommandError(SYNTAX)
            i += 2
    killed = 0
    for c in list(s.server.clients.values()):
        if addr is not None and c.addr.encode() != addr:
            continue
        if laddr is not None and c.laddr.encode() != laddr:
            continue
        if ctype is not None and client_type(c) != ctype:
            continue
        if cid and c.id != cid:
            continue
        if user is not None and c.user != user:
            continue
        if c is s and skipme:
            continue
        killed += 1
        c.killed = True  # the caller is closed after this reply, the others now
        if c is not s:
            c.close()
    if len(argv) == 3:
        if not killed:
            raise CommandError(NO_SUCH_CLIENT)
        return OK
    return killed


@command("client|no-evict", 3, ADMIN)
def cmd_client_no_evict(s: Session, argv: list[bytes]) -> Reply:
    s.extra["no-evict"] = _on_off(argv[2])
    return OK


@command("client|setinfo", 4, CONN | Flag.SENTINEL)
def cmd_client_setinfo(s: Session, argv: list[bytes]) -> Reply:
    """Sets information specific to the client or connection.

    (Redis 7.2; COMMAND DOCS shows the first line.)"""
    attr = argv[2].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        raise CommandError(UNRECOGNIZED_OPTION.format(argv[2].decode("utf-8", "replace")))
    if not valid_attr(argv[3]):
        raise CommandError(ATTR_SPACES.format(argv[2].decode("utf-8", "replace")))
    value = argv[3] or None
    if attr == b"lib-name":
        s.lib_name = value
    else:
        s.lib_ver = value
    return OK


@command("client|getredir", 2, CONN)
def cmd_client_getredir(s: Session, argv: list[bytes]) -> Reply:
    return redirect_of(s)


@command("client|trackinginfo", 2, CONN)
def cmd_client_trackinginfo(s: Session, argv: list[bytes]) -> Reply:
    """The client's tracking mode (`commands.tracking` keeps it in `s.tracking`)."""
    t = s.tracking
    if t is None:
        flags = [b"off"]
    else:
        flags = [b"on"]
        if t.bcast:
            flags.append(b"bcast")
        if t.optin:
            flags += [b"optin", b"caching-yes"] if t.caching else [b"optin"]
        if t.optout:
            flags += [b"optout", b"caching-no"] if t.caching else [b"optout"]
        if t.noloop:
            flags.append(b"noloop")
        if t.broken:
            flags.append(b"broken_redirect")
    # A set in Redis' order (RESP3 `~`): encoded here, as Python sets have no order.
    head = (b"*%d\r\n" if s.resp == 2 else b"~%d\r\n") % len(flags)
    return {
        b"flags": Encoded(head + b"".join(b"$%d\r\n%b\r\n" % (len(f), f) for f in flags)),
        b"redirect": redirect_of(s),
        b"prefixes": [] if t is None else sorted(t.prefixes),
    }


@command("client|help", 2, Flag.LOADING | Flag.STALE)
def cmd_client_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], CLIENT_HELP)
