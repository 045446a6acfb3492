"""Client-side caching (Redis 7.0's tracking.c): CLIENT TRACKING, CLIENT CACHING,
CLIENT GETREDIR, CLIENT TRACKINGINFO, and the invalidation messages.

    CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p [PREFIX p ...]] [BCAST] [OPTIN]
                           [OPTOUT] [NOLOOP]
    CLIENT CACHING YES|NO
    CLIENT GETREDIR
    CLIENT TRACKINGINFO

State: `ServerState.tracking` is None until a client turns tracking on, so the
dispatcher's one test per command (`server.tracking is not None`) is all a server
without tracking pays. Once on, it is a `Tracking` (in the core: `commands.invalidation`,
which the dispatcher calls): the tracking table (key -> ids of the clients that read
it: one table for every database, as Redis), the BCAST prefixes (prefix -> the clients
and the keys modified since the last broadcast), and the messages waiting to go out.
A client's own mode is `Session.tracking` (a `ClientTracking`, None while off).

Where keys are seen modified: the dispatcher calls `after_call` after every command
(nested ones too: EXEC's and a script's), which takes the store's ops the command
applied (its pending entries past its savepoint, the same entries keyspace
notifications read) and invalidates each key; FLUSHDB and FLUSHALL send the null
invalidation to every tracking client instead and empty the table. Keys removed by
active expiry come through the store's `on_expired` (commands.notify composes it).
The keys a read-only command reads (by its key specs; a script's declared keys once
it runs a read-only command) are remembered for its caller.

Delivery, as Redis 7.0: a message for the client that is running the command goes
after that command's reply (after EXEC's reply for a transaction, after EVAL's for a
script); messages for other clients are pushed when the top-level command ends;
BCAST messages, one per prefix with every key modified under it, go out once the
loop is done with the requests at hand (Redis' beforeSleep).
"""

from __future__ import annotations

import commands.client  # noqa: F401  (declares the CLIENT container these subcommands join)
from commands.errors import (
    BCAST_OPTS,
    BCAST_SWITCH,
    CACHING_NO_OPTOUT,
    CACHING_NOT_TRACKING,
    CACHING_YES_OPTIN,
    NO_REDIRECT_CLIENT,
    NOT_INTEGER,
    ONE_REDIRECT,
    OPT_SWITCH,
    OPTIN_OPTOUT,
    OVERLAP_EXISTING,
    OVERLAP_OTHER,
    PREFIX_NEEDS_BCAST,
    SYNTAX,
    CommandError,
)
from commands.invalidation import _c_string, tracking_of
from commands.parsing import string2ll
from commands.registry import CONN, command
from commands.replies import (
    OK,
    ErrorReply,
    Frames,
    Reply,
)
from commands.server_parts import ClientTracking
from commands.session import Session

MODE_WORDS = (b"bcast", b"optin", b"optout", b"noloop")  # CLIENT TRACKING's flag options


# -- commands --------------------------------------------------------------------------


def _prefix_conflict(t: ClientTracking | None, prefixes: list[bytes]) -> tuple[bytes, int]:
    """checkPrefixCollisionsOrReply: (error text or b"", index it was found at). Redis
    returns the index of a clash among the new prefixes as its verdict, so one found
    past the first is both reported and ignored; a clash with an existing prefix stops."""
    for i, p in enumerate(prefixes):
        if t is not None and t.prefixes:
            for old in sorted(t.prefixes):
                n = min(len(old), len(p))
                if old[:n] == p[:n]:
                    return OVERLAP_EXISTING % (_c_string(p), _c_string(old)), 0
        for q in prefixes[i + 1 :]:
            n = min(len(p), len(q))
            if p[:n] == q[:n]:
                return OVERLAP_OTHER % (_c_string(p), _c_string(q)), i
    return b"", 1


@command("client|tracking", -3, CONN)
def cmd_client_tracking(s: Session, argv: list[bytes]) -> Reply:
    redirect = 0
    words: set[bytes] = set()
    prefixes: list[bytes] = []
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        more = n - 1 - j
        if opt == b"redirect" and more:
            j += 1
            if redirect:
                raise CommandError(ONE_REDIRECT)
            rid = string2ll(argv[j])
            if rid is None:
                raise CommandError(NOT_INTEGER)
            if rid not in s.server.clients:
                raise CommandError(NO_REDIRECT_CLIENT)
            redirect = rid
        elif opt in MODE_WORDS:
            words.add(opt)
        elif opt == b"prefix" and more:
            j += 1
            prefixes.append(argv[j])
        else:
            raise CommandError(SYNTAX)
        j += 1
    bcast, optin, optout, noloop = (w in words for w in MODE_WORDS)
    mode = argv[2].lower()
    if mode == b"off":
        if s.tracking is not None:
            tracking_of(s.server).disable(s)
        return OK
    if mode != b"on":
        raise CommandError(SYNTAX)
    t = s.tracking
    if not bcast and prefixes:
        raise CommandError(PREFIX_NEEDS_BCAST)
    if t is not None and t.bcast != bcast:
        raise CommandError(BCAST_SWITCH)
    if bcast and (optin or optout):
        raise CommandError(BCAST_OPTS)
    if optin and optout:
        raise CommandError(OPTIN_OPTOUT)
    if t is not None and ((optin and t.optout) or (optout and t.optin)):
        raise CommandError(OPT_SWITCH)
    clash = b""
    if bcast:
        clash, verdict = _prefix_conflict(t, prefixes)
        if clash and not verdict:
            raise CommandError(clash)
    tracking_of(s.server).enable(s, redirect, bcast, (optin, optout, noloop), prefixes)
    if clash:
        # Redis reports this clash and goes on (its check returns the clash's index,
        # read as "no clash" past the first prefix): the error, then OK.
        s.server.stats.error_replies += 1
        s.server.error_stats["ERR"] = s.server.error_stats.get("ERR", 0) + 1
        return Frames([ErrorReply(clash), OK])
    return OK


@command("client|caching", 3, CONN)
def cmd_client_caching(s: Session, argv: list[bytes]) -> Reply:
    t = s.tracking
    if t is None:
        raise CommandError(CACHING_NOT_TRACKING)
    opt = argv[2].lower()
    if opt == b"yes":
        if not t.optin:
            raise CommandError(CACHING_YES_OPTIN)
    elif opt == b"no":
        if not t.optout:
            raise CommandError(CACHING_NO_OPTOUT)
    else:
        raise CommandError(SYNTAX)
    t.caching = True
    return OK
