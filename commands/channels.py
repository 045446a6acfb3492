"""Pub/Sub delivery, the core's: `publish` hands a message to a channel's and the
matching patterns' subscribers (`ServerState.channels`, `ServerState.patterns`).
PUBLISH and the SUBSCRIBE family (`commands.pubsub`), keyspace notifications
(`commands.notify`) and Sentinel's hello messages (`commands.sentinel`) all publish
through it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.glob import glob_match
from commands.replies import Frames, Push

if TYPE_CHECKING:
    from commands.session import ServerCore, Session


MESSAGE = b"message"


PMESSAGE = b"pmessage"


def publish(
    server: ServerCore, ch: bytes, msg: bytes, sender: Session | None = None
) -> tuple[int, Frames | None]:
    """Deliver a message to the channel's and matching patterns' subscribers: (how
    many got it, the messages for `sender` itself, which go before its reply)."""
    receivers = 0
    own: Frames | None = None
    subs = server.channels.get(ch)
    if subs:
        receivers += len(subs)  # counted first: a push may close its client
        own = _deliver(subs, Push([MESSAGE, ch, msg]), sender, own)
    if server.patterns:
        for pat, psubs in tuple(server.patterns.items()):
            if glob_match(pat, ch):
                receivers += len(psubs)
                own = _deliver(psubs, Push([PMESSAGE, pat, ch, msg]), sender, own)
    server.stats.pubsub_messages += receivers
    return receivers, own


def _deliver(
    subs: dict[int, Session], m: Push, sender: Session | None, own: Frames | None
) -> Frames | None:
    """Push `m` to each of `subs`, but add it to `own` (made when needed) for `sender`,
    whose messages go before its reply; returns `own`."""
    for sub in tuple(subs.values()):
        if sub is sender:
            if own is None:
                own = Frames()
            own.append(m)
        else:
            sub.push(m)
    return own
