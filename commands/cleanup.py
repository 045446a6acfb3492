"""What a session leaves behind when its connection ends."""

from __future__ import annotations

from commands.session import Session


def unwatch_all(s: Session) -> None:
    for (dbi, key), cb in s.watched.items():
        s.store.unobserve(dbi, key, cb)
    s.watched.clear()
    s.watch_dirty = False


def unsubscribe_all(s: Session) -> None:
    server = s.server
    for ch in s.channels:
        subs = server.channels.get(ch)
        if subs is not None:
            subs.pop(s.id, None)
            if not subs:
                del server.channels[ch]
    for pat in s.patterns:
        subs = server.patterns.get(pat)
        if subs is not None:
            subs.pop(s.id, None)
            if not subs:
                del server.patterns[pat]
    s.channels.clear()
    s.patterns.clear()


def session_closed(s: Session) -> None:
    unwatch_all(s)
    unsubscribe_all(s)
    s.multi = None
