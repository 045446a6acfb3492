"""What a session leaves behind when its connection ends (or on RESET)."""

from __future__ import annotations

from commands.session import Session

# s.extra key: the session's patterns in subscription order (PUNSUBSCRIBE replies in it).
PATTERN_ORDER = "pubsub.pattern_order"


def unwatch_all(s: Session) -> None:
    for (dbi, key), cb in s.watched.items():
        s.store.unobserve(dbi, key, cb)
    s.watched.clear()
    s.watch_dirty = False


def leave(registry: dict[bytes, dict[int, Session]], name: bytes, s: Session) -> None:
    """Take `s` off one channel's or pattern's subscribers (dropping an empty entry)."""
    subs = registry.get(name)
    if subs is not None:
        subs.pop(s.id, None)
        if not subs:
            del registry[name]


def unsubscribe_all(s: Session) -> None:
    server = s.server
    for ch in s.channels:
        leave(server.channels, ch, s)
    for pat in s.patterns:
        leave(server.patterns, pat, s)
    s.channels.clear()
    s.patterns.clear()
    s.extra.pop(PATTERN_ORDER, None)


def tracking_off(s: Session) -> None:
    """CLIENT TRACKING OFF's effect (RESET, the connection's end)."""
    if s.tracking is not None and s.server.tracking is not None:
        s.server.tracking.disable(s)


def session_closed(s: Session) -> None:
    s.server.replication.links.pop(s.id, None)  # a replica's link
    tracking_off(s)
    s.server.monitors.pop(s.id, None)  # MONITOR (the dispatcher's gate notices)
    unwatch_all(s)
    unsubscribe_all(s)
    s.multi = None
