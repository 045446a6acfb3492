"""The command table and the decorator that fills it.

Each handler is declared with Redis' arity convention (n: exactly n arguments
including the name; -n: at least n), flags, and key positions (first, last, step;
last -1 means the last argument). Container commands (CLIENT, CONFIG, ...) hold
their subcommands, named `container|sub` as Redis does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from commands.replies import Reply

# A handler takes the client's `Session` and the arguments. The table names no Session:
# it is below the session's state (`Session.server` holds the ACL users, whose command
# catalog is built from this table), so `command` keeps each handler's own type (H),
# which names it.
Handler = Callable[[Any, list[bytes]], "Reply"]
H = TypeVar("H", bound=Handler)


class Flag(enum.Flag):
    WRITE = enum.auto()
    READONLY = enum.auto()
    DENYOOM = enum.auto()
    ADMIN = enum.auto()
    PUBSUB = enum.auto()
    NOSCRIPT = enum.auto()
    BLOCKING = enum.auto()
    LOADING = enum.auto()  # allowed while loading
    STALE = enum.auto()
    SKIP_MONITOR = enum.auto()
    SKIP_SLOWLOG = enum.auto()
    FAST = enum.auto()
    NO_AUTH = enum.auto()  # allowed before authentication
    NO_MULTI = enum.auto()  # refused inside MULTI
    ALLOW_BUSY = enum.auto()
    MAY_REPLICATE = enum.auto()
    SENTINEL = enum.auto()
    ONLY_SENTINEL = enum.auto()
    NO_MANDATORY_KEYS = enum.auto()
    NO_ASYNC_LOADING = enum.auto()
    MODULE = enum.auto()
    # Our own: runs even inside MULTI instead of being queued.
    TX_CONTROL = enum.auto()
    # Our own: allowed in RESP2 subscribe context.
    SUBSCRIBE_OK = enum.auto()


NO_FLAGS = Flag(0)
# Flag sets many server commands share (Redis' "admin" commands, and those answered
# while loading or stale, and the connection commands of CLIENT and CLIENT TRACKING).
CONN = Flag.NOSCRIPT | Flag.LOADING | Flag.STALE
ADMIN = Flag.ADMIN | CONN
LOADING_STALE = Flag.LOADING | Flag.STALE


@dataclass(slots=True)
class Command:
    name: str  # full name as Redis spells it in errors: "get", "client|kill"
    handler: Handler | None
    arity: int
    flags: Flag
    first_key: int = 0
    last_key: int = 0
    step: int = 0
    subcommands: dict[bytes, Command] | None = None
    is_write: bool = False
    is_tx_control: bool = False
    # The immutable config (no|yes|local) that allows it, for Redis' protected
    # commands (DEBUG, MODULE); "" for every other command.
    protected: str = ""
    # One of the DIRECT_* numbers: the compiled dispatcher runs this command's common
    # form by a direct call (0: through `handler`).
    direct: int = 0

    def keys(self, argv: list[bytes]) -> list[bytes]:
        """The key arguments of a call, by the declared positions."""
        if not self.first_key:
            return []
        last = self.last_key if self.last_key >= 0 else len(argv) + self.last_key
        return argv[self.first_key : last + 1 : self.step or 1]


COMMANDS: dict[bytes, Command] = {}

# The commands `Dispatcher.call` runs without calling their handler: a handler is
# called as a Python object (in the compiled build through its wrapper, which parses
# the arguments), the functions these name are C calls there (commands.dispatch).
# Final: compiled, constants (not read from the module's dict per command).
DIRECT_GET: Final = 1  # GET key: commands.common.get_string
DIRECT_SET: Final = 2  # SET key value (no options): store.commitpath.set_string, then OK
# The commonest writes (commands.hotwrites): INCR and DECR key; LPUSH and RPUSH key of
# one element; HSET key of one field and value.
DIRECT_INCR: Final = 3
DIRECT_DECR: Final = 4
DIRECT_LPUSH: Final = 5
DIRECT_RPUSH: Final = 6
DIRECT_HSET: Final = 7

# Redis' protected commands and the config that allows each (processCommand refuses
# them, with PROTECTED_REFUSAL, unless it is "yes", or "local" for a local client).
# Redis 7.0 flags DEBUG and MODULE's LOAD, LOADEX and UNLOAD (not LIST or HELP).
PROTECTED_BY = {
    "debug": "enable-debug-command",
    "module|load": "enable-module-command",
    "module|loadex": "enable-module-command",
    "module|unload": "enable-module-command",
}
PROTECTED_REFUSAL = (
    "ERR {} command not allowed. If the {} option is set to "
    '"local", you can run it from a local connection, otherwise you need to set this '
    "option in the configuration file, and then restart the server."
)


def _lookup_table(name: str) -> tuple[dict[bytes, Command], bytes]:
    container, _, sub = name.partition("|")
    if not sub:
        return COMMANDS, container.encode()
    parent = COMMANDS.get(container.encode())
    if parent is None:
        raise KeyError(f"container {container!r} must be declared before {name!r}")
    assert parent.subcommands is not None
    return parent.subcommands, sub.encode()


def command(
    name: str,
    arity: int,
    flags: Flag = NO_FLAGS,
    first_key: int = 0,
    last_key: int = 0,
    step: int = 0,
    direct: int = 0,
) -> Callable[[H], H]:
    """Declare a command (or `container|sub` subcommand) and its handler."""

    def deco(fn: H) -> H:
        table, short = _lookup_table(name)
        cmd = Command(
            name=name,
            handler=fn,
            arity=arity,
            flags=flags,
            first_key=first_key,
            last_key=last_key,
            step=step,
            is_write=bool(flags & Flag.WRITE),
            is_tx_control=bool(flags & Flag.TX_CONTROL),
            protected=PROTECTED_BY.get(name, ""),
            direct=direct,
        )
        table[short] = cmd
        if table is COMMANDS:
            table[short.upper()] = cmd
        return fn

    return deco


def container(name: str, arity: int = -2, flags: Flag = NO_FLAGS) -> None:
    """Declare a command that only dispatches to subcommands (CLIENT, CONFIG, ...)."""
    cmd = Command(
        name=name,
        handler=None,
        arity=arity,
        flags=flags,
        subcommands={},
        protected=PROTECTED_BY.get(name, ""),
    )
    COMMANDS[name.encode()] = cmd
    COMMANDS[name.upper().encode()] = cmd


def lookup_by_name(name: bytes) -> Command | None:
    """Redis' lookupCommandBySds: `name` or `container|sub`, any case."""
    parts = name.lower().split(b"|")
    if len(parts) > 2:
        return None
    base = COMMANDS.get(parts[0])
    if base is None or len(parts) == 1:
        return base
    if base.subcommands is None:
        return None
    return base.subcommands.get(parts[1])


def lookup_for_call(argv: list[bytes]) -> Command | None:
    """Redis' lookupCommand: the command a request would run (subcommand included)."""
    base = COMMANDS.get(argv[0].lower())
    if base is None or len(argv) == 1 or base.subcommands is None:
        return base
    return base.subcommands.get(argv[1].lower())


def unique_commands() -> list[Command]:
    seen: dict[str, Command] = {}
    for c in COMMANDS.values():
        seen[c.name] = c
    return sorted(seen.values(), key=lambda c: c.name)


# Latency histograms (LATENCY HISTOGRAM, INFO latencystats): calls by the bit length
# of their duration in ns, i.e. by power of two (bucket b holds 2**(b-1) .. 2**b - 1).
HIST_BUCKETS = 65


def bucket_high(b: int) -> int:
    """The longest duration (ns) bucket `b` holds."""
    return (1 << b) - 1


@dataclass
class CommandStats:
    calls: int = 0
    rejected: int = 0
    failed: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    ns: int = 0  # time spent in all calls (each is timed: commands.ops_state)
    # The latency histogram (calls recorded while latency-tracking is on), read as
    # `hist`: its counts, but for the latest calls when they fell in one bucket, which
    # the dispatcher counts in `run_calls` (a native int when compiled: no int object
    # made and stored in the list per call) until a call falls in another (`new_run`).
    counts: list[int] = field(default_factory=lambda: [0] * HIST_BUCKETS)
    run_bucket: int = 0
    run_calls: int = 0

    @property
    def hist(self) -> list[int]:
        """The latency histogram's counts, by bucket (`bucket_high`)."""
        if self.run_calls:
            counts = self.counts
            b = self.run_bucket
            counts[b] = counts[b] + self.run_calls  # an int add compiled (`+=`: generic)
            self.run_calls = 0
        return self.counts

    def new_run(self, bucket: int) -> None:
        """A call in `bucket`, not the one of the calls before it."""
        if self.run_calls:
            counts = self.counts
            b = self.run_bucket
            counts[b] = counts[b] + self.run_calls
        self.run_bucket = bucket
        self.run_calls = 1

    @property
    def usec(self) -> int:
        """Time spent in all calls (INFO commandstats' usec)."""
        return self.ns // 1000

    def reset(self) -> None:
        """CONFIG RESETSTAT."""
        self.calls = self.rejected = self.failed = self.ns = 0
        self.extra.clear()
        self.counts = [0] * HIST_BUCKETS
        self.run_calls = 0


# Our flags as COMMAND INFO names them, in Redis' order (for commands Redis lacks).
FLAG_NAMES = [
    (Flag.WRITE, "write"),
    (Flag.READONLY, "readonly"),
    (Flag.DENYOOM, "denyoom"),
    (Flag.MODULE, "module"),
    (Flag.ADMIN, "admin"),
    (Flag.PUBSUB, "pubsub"),
    (Flag.NOSCRIPT, "noscript"),
    (Flag.BLOCKING, "blocking"),
    (Flag.LOADING, "loading"),
    (Flag.STALE, "stale"),
    (Flag.SKIP_MONITOR, "skip_monitor"),
    (Flag.SKIP_SLOWLOG, "skip_slowlog"),
    (Flag.FAST, "fast"),
    (Flag.NO_AUTH, "no_auth"),
    (Flag.NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (Flag.NO_ASYNC_LOADING, "no_async_loading"),
    (Flag.NO_MULTI, "no_multi"),
    (Flag.ALLOW_BUSY, "allow_busy"),
]
