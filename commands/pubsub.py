"""Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB.

    SUBSCRIBE channel [channel ...]
    UNSUBSCRIBE [channel [channel ...]]
    PSUBSCRIBE pattern [pattern ...]
    PUNSUBSCRIBE [pattern [pattern ...]]
    PUBLISH channel message
    PUBSUB CHANNELS [pattern]
    PUBSUB NUMSUB [channel [channel ...]]
    PUBSUB NUMPAT
    PUBSUB SHARDCHANNELS [pattern]
    PUBSUB SHARDNUMSUB [shardchannel [shardchannel ...]]
    PUBSUB HELP

Registries: `server.channels` / `server.patterns` map a name to its subscribers
({client id: Session}, in subscription order, which is delivery order);
`s.channels` / `s.patterns` hold a session's own. Redis keeps a client's
patterns in subscription order (PUNSUBSCRIBE without arguments answers in that
order), so the order is also kept in `s.extra[PATTERN_ORDER]`.

(Un)subscribe confirmations are pushes (RESP3 `>`, RESP2 arrays), one per
name, returned together as `Frames`. Messages go to other connections through
`session.push`; a message to the publishing connection itself is returned
ahead of PUBLISH's count so it keeps its place among that connection's replies.
Shard channels are not supported: nothing subscribes to one, so SHARDCHANNELS
and SHARDNUMSUB answer as Redis does with none.
"""

from __future__ import annotations

from commands.channels import publish
from commands.cleanup import PATTERN_ORDER, leave
from commands.errors import SUBCOMMAND_SYNTAX, CommandError
from commands.glob import glob_match
from commands.registry import Flag, command, container
from commands.replies import Frames, Push, Reply, Simple
from commands.session import Session

PS = Flag.PUBSUB | Flag.NOSCRIPT | Flag.LOADING | Flag.STALE | Flag.SENTINEL | Flag.SUBSCRIBE_OK

SUBSCRIBE = b"subscribe"
UNSUBSCRIBE = b"unsubscribe"
PSUBSCRIBE = b"psubscribe"
PUNSUBSCRIBE = b"punsubscribe"

PUBSUB_HELP = [
    Simple(line.encode())
    for line in (
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    )
]


def _pattern_order(s: Session) -> dict[bytes, None]:
    order: dict[bytes, None] | None = s.extra.get(PATTERN_ORDER)
    if order is None:
        order = s.extra[PATTERN_ORDER] = {}
    return order


# -- subscribing ------------------------------------------------------------------


@command("subscribe", -2, PS)
def cmd_subscribe(s: Session, argv: list[bytes]) -> Reply:
    registry = s.server.channels
    mine = s.channels
    out = Frames()
    for ch in argv[1:]:
        if ch not in mine:
            mine.add(ch)
            registry.setdefault(ch, {})[s.id] = s
        out.append(Push([SUBSCRIBE, ch, len(mine) + len(s.patterns)]))
    return out


@command("psubscribe", -2, PS)
def cmd_psubscribe(s: Session, argv: list[bytes]) -> Reply:
    registry = s.server.patterns
    mine = s.patterns
    order = _pattern_order(s)
    out = Frames()
    for pat in argv[1:]:
        if pat not in mine:
            mine.add(pat)
            order[pat] = None
            registry.setdefault(pat, {})[s.id] = s
        out.append(Push([PSUBSCRIBE, pat, len(s.channels) + len(mine)]))
    return out


@command("unsubscribe", -1, PS)
def cmd_unsubscribe(s: Session, argv: list[bytes]) -> Reply:
    registry = s.server.channels
    mine = s.channels
    names = argv[1:] if len(argv) > 1 else list(mine)
    if not names:
        return Push([UNSUBSCRIBE, None, len(s.patterns)])
    out = Frames()
    for ch in names:
        if ch in mine:
            mine.discard(ch)
            leave(registry, ch, s)
        out.append(Push([UNSUBSCRIBE, ch, len(mine) + len(s.patterns)]))
    return out


@command("punsubscribe", -1, PS)
def cmd_punsubscribe(s: Session, argv: list[bytes]) -> Reply:
    registry = s.server.patterns
    mine = s.patterns
    order = _pattern_order(s)
    names = argv[1:] if len(argv) > 1 else list(order)
    if not names:
        return Push([PUNSUBSCRIBE, None, len(s.channels)])
    out = Frames()
    for pat in names:
        if pat in mine:
            mine.discard(pat)
            order.pop(pat, None)
            leave(registry, pat, s)
        out.append(Push([PUNSUBSCRIBE, pat, len(s.channels) + len(mine)]))
    return out


# -- publishing -------------------------------------------------------------------


PUBLISH_FLAGS = (
    Flag.PUBSUB | Flag.LOADING | Flag.STALE | Flag.FAST | Flag.MAY_REPLICATE | Flag.SENTINEL
)


@command("publish", 3, PUBLISH_FLAGS)
def cmd_publish(s: Session, argv: list[bytes]) -> Reply:
    receivers, own = publish(s.server, argv[1], argv[2], s)
    if own is not None:
        own.append(receivers)
        return own
    return receivers


# -- introspection ----------------------------------------------------------------

container("pubsub", -2)

PUBSUB_FLAGS = Flag.PUBSUB | Flag.LOADING | Flag.STALE


@command("pubsub|channels", -2, PUBSUB_FLAGS)
def cmd_pubsub_channels(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    channels = s.server.channels
    if len(argv) == 2:
        return list(channels)
    pat = argv[2]
    return [ch for ch in channels if glob_match(pat, ch)]


@command("pubsub|numsub", -2, PUBSUB_FLAGS)
def cmd_pubsub_numsub(s: Session, argv: list[bytes]) -> Reply:
    channels = s.server.channels
    out: list[Reply] = []
    for ch in argv[2:]:
        subs = channels.get(ch)
        out.append(ch)
        out.append(len(subs) if subs else 0)
    return out


@command("pubsub|numpat", 2, PUBSUB_FLAGS)
def cmd_pubsub_numpat(s: Session, argv: list[bytes]) -> Reply:
    return len(s.server.patterns)


@command("pubsub|shardchannels", -2, PUBSUB_FLAGS)
def cmd_pubsub_shardchannels(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    return []


@command("pubsub|shardnumsub", -2, PUBSUB_FLAGS)
def cmd_pubsub_shardnumsub(s: Session, argv: list[bytes]) -> Reply:
    out: list[Reply] = []
    for ch in argv[2:]:
        out.append(ch)
        out.append(0)
    return out


@command("pubsub|help", 2, Flag.LOADING | Flag.STALE)
def cmd_pubsub_help(s: Session, argv: list[bytes]) -> Reply:
    return PUBSUB_HELP


def _subcommand_syntax(argv: list[bytes]) -> CommandError:
    text = SUBCOMMAND_SYNTAX % (argv[1][:128], argv[0].upper())
    return CommandError(text.replace(b"\r", b" ").replace(b"\n", b" "))
