"""Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.

    MULTI
    EXEC
    DISCARD
    WATCH key [key ...]
    UNWATCH

The dispatcher queues every command while `s.multi` is a list and marks
`s.multi_error` when one is rejected at queue time. MULTI, EXEC, DISCARD and
WATCH run even inside MULTI (TX_CONTROL); UNWATCH is queued like any command, as
in Redis. EXEC runs the queue with `s.in_exec` set, so nothing commits until the
dispatcher commits EXEC itself: the whole block becomes one version (one LSN, one
update record). A queued command that fails rolls back only its own ops (the
dispatcher's savepoint).

WATCH observes each key in the store; a commit that touches it marks the session
dirty and drops all its watches (as Redis does), so EXEC replies a null array.
A watched key that expires before EXEC fails it too, as in Redis 7.0, unless it
was already expired when watched.
"""

from __future__ import annotations

from commands.cleanup import unwatch_all
from commands.dispatch import DISPATCHER
from commands.errors import (
    DISCARD_WITHOUT_MULTI,
    EXEC_WITHOUT_MULTI,
    EXECABORT,
    MULTI_NESTED,
    WATCH_IN_MULTI,
    CommandError,
)
from commands.permissions import exec_denied
from commands.registry import Flag, command
from commands.replies import NULL_ARRAY, OK, Blocked, Reply
from commands.session import Session
from store.database import fix_time
from store.keyspace import now_ms

TX = Flag.NOSCRIPT | Flag.LOADING | Flag.STALE


class _Watch:
    """One watched key of one session: the store calls it when a commit touches
    the key. `at` is the key's expiry time when watched (None: no expiry);
    `expired` is true when the key was already expired then (Redis ignores such
    a key's deletion); `existed`: the key was there when watched."""

    __slots__ = ("at", "existed", "expired", "session")

    def __init__(self, session: Session, at: int | None, expired: bool, existed: bool) -> None:
        self.session = session
        self.at = at
        self.expired = expired
        self.existed = existed

    def on_swap(self, dbi: int, key: bytes) -> None:
        """SWAPDB put the other database's content under the key: a missing key
        replaced with an expired one is no change, and counts as expired from now
        on (Redis' touchAllWatchedKeysInDb)."""
        if not self.expired and not self.existed:
            at = self.session.store.dbs[dbi].expires.get(key)
            if at is not None and at <= now_ms():
                self.expired = True
                return
        self(dbi, key)

    def __call__(self, dbi: int, key: bytes) -> None:
        s = self.session
        if self.expired:
            db = s.store.dbs[dbi]
            if key not in db.data:
                # The expired value went away: logically nothing changed.
                self.expired = False
                return
            at = db.expires.get(key)
            if at is not None and at <= now_ms():
                return  # still the value that was expired when watched
        unwatch_all(s)  # no need to hear about the other keys now
        s.watch_dirty = True


def _watched_key_expired(s: Session) -> bool:
    """A key with an expiry when watched whose time has come since (any other
    change to it would already have made the session dirty)."""
    t = now_ms()
    for cb in s.watched.values():
        if isinstance(cb, _Watch) and not cb.expired and cb.at is not None and cb.at <= t:
            return True
    return False


def _discard(s: Session) -> None:
    s.multi = None
    s.multi_error = False
    unwatch_all(s)


@command("multi", 1, TX | Flag.FAST | Flag.ALLOW_BUSY | Flag.TX_CONTROL)
def cmd_multi(s: Session, argv: list[bytes]) -> Reply:
    if s.multi is not None:
        raise CommandError(MULTI_NESTED)
    s.multi = []
    s.multi_error = False
    return OK


@command("discard", 1, TX | Flag.FAST | Flag.ALLOW_BUSY | Flag.TX_CONTROL)
def cmd_discard(s: Session, argv: list[bytes]) -> Reply:
    if s.multi is None:
        raise CommandError(DISCARD_WITHOUT_MULTI)
    _discard(s)
    return OK


@command("exec", 1, TX | Flag.SKIP_SLOWLOG | Flag.TX_CONTROL)
def cmd_exec(s: Session, argv: list[bytes]) -> Reply:
    queued = s.multi
    if queued is None:
        raise CommandError(EXEC_WITHOUT_MULTI)
    if s.watched and _watched_key_expired(s):
        s.watch_dirty = True
    if s.multi_error:
        _discard(s)
        raise CommandError(EXECABORT)
    if s.watch_dirty:
        _discard(s)
        return NULL_ARRAY
    _discard(s)  # unwatch before running: our own writes must not dirty us
    replies: list[Reply] = []
    call = DISPATCHER.call
    s.in_exec = True
    # Keys expire as of EXEC's start for all its commands (Redis 7.0 fixes the time
    # for a command and those it calls: call()'s fixed_time_expire).
    fixed_before = fix_time(now_ms())
    try:
        for cmd, cargv in queued:
            denied = None if s.acl_all else exec_denied(s, cmd, cargv)  # rules may have changed
            reply = call(s, cmd, cargv) if denied is None else DISPATCHER.reject(s, denied)
            if type(reply) is Blocked:
                # Handlers do not block inside EXEC; should one, it timed out at once.
                assert isinstance(reply, Blocked)
                reply = reply.on_timeout
            replies.append(reply)
    finally:
        s.in_exec = False
        fix_time(fixed_before)
    return replies


@command("watch", -2, TX | Flag.FAST | Flag.ALLOW_BUSY | Flag.TX_CONTROL, 1, -1, 1)
def cmd_watch(s: Session, argv: list[bytes]) -> Reply:
    if s.multi is not None:
        raise CommandError(WATCH_IN_MULTI)
    if s.watch_dirty:
        return OK  # EXEC fails anyway: no point in watching more
    dbi = s.dbi
    db = s.db
    watched = s.watched
    t = now_ms()
    for key in argv[1:]:
        wkey = (dbi, key)
        if wkey in watched:
            continue
        at = db.expires.get(key) if key in db.data else None
        expired = at is not None and at <= t
        cb = _Watch(s, None if expired else at, expired, key in db.data)
        watched[wkey] = cb
        s.store.observe(dbi, key, cb)
    return OK


@command("unwatch", 1, TX | Flag.FAST | Flag.ALLOW_BUSY)
def cmd_unwatch(s: Session, argv: list[bytes]) -> Reply:
    unwatch_all(s)
    return OK
