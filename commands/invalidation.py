"""Client-side caching's server side (Redis 7.0's tracking.c): the tracking table and
its invalidation messages, the core's hook that the dispatcher, eviction, cleanup and
notifications call (`ServerState.tracking`, a `Tracking` once a client turns tracking
on; the core names it by what it calls of it, `session_state.TrackingTable`), and
each client's mode (`Session.tracking`, a `server_parts.ClientTracking`). The commands
that turn it on and off (CLIENT TRACKING, CLIENT CACHING) are the `commands.tracking`
family's; see its doc for how messages are delivered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from commands.errors import CommandError
from commands.getkeys import get_keys, keys_at_positions
from commands.notify import set_expiry_hook
from commands.registry import Command, Flag
from commands.replies import (
    Blocked,
    CloseAfterReply,
    Deferred,
    Encoded,
    Frames,
    Push,
    Reply,
)
from commands.server_parts import ClientTracking

if TYPE_CHECKING:
    from commands.session import ServerCore, Session


INVALIDATE = b"invalidate"


CHANNEL = b"__redis__:invalidate"


REDIR_BROKEN = b"tracking-redir-broken"


DEFAULT_MAX_KEYS = 1_000_000


# Read-only commands whose keys are not remembered themselves: the script's commands are.
SCRIPTS_RO = frozenset(("eval_ro", "evalsha_ro", "fcall_ro"))


FLUSHES = frozenset(("flushdb", "flushall"))


# Command name -> whether its keys are remembered (read-only, not pub/sub, not a script).
READS: dict[str, bool] = {}


class Prefix:
    """A BCAST prefix: its clients, and the keys modified under it since the last
    broadcast, each with the client that modified it last (None: expiry)."""

    __slots__ = ("clients", "keys")

    def __init__(self) -> None:
        self.clients: dict[int, Session] = {}
        self.keys: dict[bytes, Session | None] = {}


def _c_string(b: bytes) -> bytes:
    """What Redis' %s shows of a prefix: up to its first NUL."""
    return b.split(b"\0", 1)[0]


class Tracking:
    """The server's tracking state (Redis' TrackingTable, PrefixTable and friends)."""

    def __init__(self, server: ServerCore) -> None:
        self.server = server
        self.table: dict[bytes, dict[int, None]] = {}
        self.items = 0  # tracking_total_items: (key, client) pairs in the table
        self.prefixes: dict[bytes, Prefix] = {}
        self.clients = 0  # tracking_clients
        # (destination, frame, after the reply): waiting for the top-level command's end.
        self.outbox: list[tuple[Session, Reply, bool]] = []
        self.broadcast_due = False
        self._max_raw: str | None = None  # tracking-table-max-keys as last parsed
        self._max = DEFAULT_MAX_KEYS
        # The store's pending list, and how much of it a call has invalidated: EXEC's
        # and a script's commands invalidate their own writes as they run (a key one of
        # them reads afterwards is tracked from then on), so the enclosing call skips
        # those entries.
        self._done_of: list[Any] | None = None
        self._done = 0

    # -- turning tracking on and off ---------------------------------------------------

    def enable(
        self,
        s: Session,
        redirect: int,
        bcast: bool,
        opts: tuple[bool, bool, bool],
        prefixes: list[bytes],
    ) -> None:
        """enableTracking: a client already on keeps its CACHING flag and prefixes."""
        t = s.tracking
        if t is None:
            t = s.tracking = ClientTracking()
            self.clients += 1
        t.redirect = redirect
        t.broken = False
        t.bcast = bcast
        t.optin, t.optout, t.noloop = opts
        if bcast:
            for p in prefixes or [b""]:
                entry = self.prefixes.get(p)
                if entry is None:
                    entry = self.prefixes[p] = Prefix()
                entry.clients[s.id] = s
                t.prefixes.add(p)

    def disable(self, s: Session) -> None:
        """disableTracking (CLIENT TRACKING OFF, RESET, the connection's end). The
        table keeps the client's keys: they go when invalidated, as in Redis."""
        t = s.tracking
        if t is None:
            return
        for p in t.prefixes:
            entry = self.prefixes.get(p)
            if entry is not None:
                entry.clients.pop(s.id, None)
                if not entry.clients:
                    del self.prefixes[p]
        s.tracking = None
        self.clients -= 1
        self.maybe_idle()

    def maybe_idle(self) -> None:
        """Nothing tracked and nothing pending: back to the dispatcher's fast path."""
        if not (self.clients or self.table or self.prefixes or self.outbox or self.broadcast_due):
            self.server.tracking = None

    # -- remembering reads --------------------------------------------------------------

    def remember(self, c: Session, keys: Iterable[bytes]) -> None:
        """trackingRememberKeys: `c` read `keys` (default mode, respecting OPTIN/OPTOUT)."""
        t = c.tracking
        if t is None or t.bcast or (t.optin and not t.caching) or (t.optout and t.caching):
            return
        table = self.table
        cid = c.id
        for key in keys:
            ids = table.get(key)
            if ids is None:
                ids = table[key] = {}
            if cid not in ids:
                ids[cid] = None
                self.items += 1

    # -- invalidating -------------------------------------------------------------------

    def invalidate(
        self, key: bytes, modifier: Session | None, current: Session | None, bcast: bool = True
    ) -> None:
        """trackingInvalidateKey: `modifier` changed `key` (None: expiry or eviction)
        while `current` was running a command (None: none was)."""
        if bcast and self.prefixes:
            self._remember_broadcast(key, modifier)
        ids = self.table.pop(key, None)
        if ids is None:
            return
        self.items -= len(ids)
        clients = self.server.clients
        for cid in ids:
            target = clients.get(cid)
            if target is None:
                continue
            t = target.tracking
            if t is None or t.bcast:
                continue
            if t.noloop and target is current:
                continue
            self.message(target, [key], after=target is current)

    def _remember_broadcast(self, key: bytes, modifier: Session | None) -> None:
        for prefix, entry in self.prefixes.items():
            if key.startswith(prefix):
                entry.keys[key] = modifier
                if not self.broadcast_due:
                    self.broadcast_due = True
                    self._schedule()

    def flushed(self, current: Session | None) -> None:
        """trackingInvalidateKeysOnFlush: the null invalidation to every tracking
        client (in its own protocol's null), and an empty table."""
        for c in list(self.server.clients.values()):
            if c.tracking is not None:
                null = Encoded(b"$-1\r\n" if c.resp == 2 else b"_\r\n")
                self.message(c, null, after=c is current)
        self.table = {}
        self.items = 0

    def message(self, c: Session, keys: Reply, after: bool) -> None:
        """sendTrackingMessage: to `c`, or to its redirect client (in RESP2 only when
        that one is subscribed: a message on __redis__:invalidate)."""
        t = c.tracking
        assert t is not None
        dest = c
        redirected = False
        if t.redirect:
            found = self.server.clients.get(t.redirect)
            if found is None:
                t.broken = True
                if c.resp > 2:
                    self.outbox.append((c, Push([REDIR_BROKEN, t.redirect]), after))
                return
            dest = found
            redirected = True
        if dest.resp > 2:
            frame = Push([INVALIDATE, keys])
        elif redirected and (dest.channels or dest.patterns):
            frame = Push([b"message", CHANNEL, keys])
        else:
            return  # RESP2 without a redirect: nowhere to say it
        self.outbox.append((dest, frame, after))

    # -- the dispatcher's hook ------------------------------------------------------------

    def after_call(
        self, s: Session, cmd: Command, argv: list[bytes], savepoint: int, reply: Reply
    ) -> Reply:
        """What command `cmd` (run by `s`) modified and read; at the top level, the
        messages due, around its reply."""
        # A script's session carries (the caller, its declared keys); EXEC's commands
        # and a script's are nested calls (`in_exec`): the top level delivers.
        nested = s.in_exec
        caller = s.extra.get("caller") if nested else None
        current: Session = s if caller is None else caller[0]
        name = cmd.name
        if name in FLUSHES:
            self.flushed(current)
        else:
            pending = s.store.pending
            start = savepoint
            if self._done_of is pending and start < self._done <= len(pending):
                start = self._done  # invalidated by the nested calls already
            if len(pending) > start:
                table = self.table
                watching = table or self.prefixes
                for _dbi, key, _op, _undo, by in pending[start:]:
                    if watching and key is not None and (key in table or self.prefixes):
                        self.invalidate(key, None if by == "expired" else current, current)
            self._done_of = pending
            self._done = len(pending)
        if current.tracking is not None:
            reads = READS.get(name)
            if reads is None:
                flags = cmd.flags
                reads = READS[name] = bool(
                    flags & Flag.READONLY and not flags & Flag.PUBSUB and name not in SCRIPTS_RO
                )
            if reads:
                if caller is not None:
                    self.remember(current, caller[1])
                elif keys_at_positions(cmd):
                    self.remember(current, cmd.keys(argv))  # most commands: no spec walk
                else:
                    try:
                        refs = get_keys(argv)
                    except CommandError:
                        refs = []
                    self.remember(current, [argv[i] for i, _flags in refs])
        if nested:
            return reply
        t = s.tracking
        if t is not None and t.caching and s.multi is None and not name.startswith("client|"):
            t.caching = False  # CACHING holds for the next command (or transaction) only
        if self.table and len(self.table) > self.max_keys():
            self.limit()
        if self.outbox:
            return self.deliver(s, reply)
        if not self.clients:
            self.maybe_idle()
        return reply

    def sliced_writes(self, s: Session, applied: list[Any]) -> None:
        """A slice of a sliced verb's writes (TS.MERGE, TS.RESTORE), committed apart from
        any command's call: its keys' messages go now, to every connection."""
        for _dbi, key, _op, _undo, by in applied:
            if key is not None:
                self.invalidate(key, None if by == "expired" else s, s)
        self._flush_outbox()

    def replayed(self, entries: list[Any]) -> None:
        """A replica applied its primary's records: the keys they wrote (version index
        entries: a key of database 0, or (database, key) pairs, key None for a
        database-level op), invalidated as the primary's client's writes are."""
        for e in entries:
            for _dbi, key in ((0, e),) if type(e) is bytes else e:
                if key is not None:
                    self.invalidate(key, None, None)
        self._flush_outbox()

    def deliver(self, s: Session, reply: Reply) -> Reply:
        """Push what is due to other connections; return `s`'s reply with its own
        messages around it."""
        out = self.outbox
        if not out:
            self.maybe_idle()
            return reply
        self.outbox = []
        before: list[Reply] = []
        after: list[Reply] = []
        for dest, frame, late in out:
            if dest is s:
                (after if late else before).append(frame)
            else:
                dest.push(frame)
        self.maybe_idle()
        if not before and not after:
            return reply
        t = type(reply)
        if t is Blocked or t is Deferred or t is CloseAfterReply:
            # The reply comes later: the messages go once the replies ahead are written.
            frames = [*before, *after]
            self._later(lambda: [s.push(f) for f in frames])
            return reply
        return Frames([*before, reply, *after])

    # -- the table's limit, broadcasts -------------------------------------------------

    def max_keys(self) -> int:
        """tracking-table-max-keys (0: no limit), parsed again only when it changed."""
        raw = self.server.config.params.get("tracking-table-max-keys", "")
        if raw is not self._max_raw:
            self._max_raw = raw
            self._max = int(raw) if raw.isdigit() else DEFAULT_MAX_KEYS
        return self._max or len(self.table)

    def limit(self) -> None:
        """trackingLimitUsedSlots: past tracking-table-max-keys, invalidate keys (the
        oldest first; Redis picks them at random) until back at the limit. As from
        Redis' cron: NOLOOP does not hold these back."""
        table = self.table
        max_keys = self.max_keys()
        while len(table) > max_keys:
            self.invalidate(next(iter(table)), None, None, bcast=False)

    def expired(self, key: bytes) -> None:
        """A key active expiry removed (the store's on_expired outside a command; a
        command's own expiries come with its ops)."""
        if self.server.store.writer is None:
            self.removed(key)

    def removed(self, key: bytes) -> None:
        """A key removed by no command (active expiry, or eviction before a command or
        from the eviction loop): the messages go before the reply of a command under
        way (`deliver`), else from the event loop, once for a whole round."""
        waiting = bool(self.outbox)
        self.invalidate(key, None, None)
        if self.outbox and not waiting:
            self._later(self._flush_outbox)

    def _flush_outbox(self) -> None:
        out = self.outbox
        self.outbox = []
        for dest, frame, _late in out:
            dest.push(frame)
        self.maybe_idle()

    def broadcast(self) -> None:
        """trackingBroadcastInvalidationMessages: per prefix, one message with the keys
        modified under it (a NOLOOP client's without those it modified itself)."""
        self.broadcast_due = False
        for entry in list(self.prefixes.values()):
            keys = entry.keys
            if not keys:
                continue
            entry.keys = {}
            ordered = sorted(keys)  # Redis' radix tree: byte order
            for c in list(entry.clients.values()):
                t = c.tracking
                if t is None:
                    continue
                mine = [k for k in ordered if keys[k] is not c] if t.noloop else ordered
                if mine:
                    self.message(c, mine, after=False)
        self._flush_outbox()

    def _schedule(self) -> None:
        self._later(self.broadcast)

    def _later(self, fn: Any) -> None:
        try:
            asyncio.get_running_loop().call_soon(fn)
        except RuntimeError:
            fn()  # no loop (a test driving the dispatcher directly): now


def tracking_of(server: ServerCore) -> Tracking:
    tr = server.tracking
    if tr is None:
        tr = server.tracking = Tracking(server)
        set_expiry_hook(server)
    assert isinstance(tr, Tracking)
    return tr
