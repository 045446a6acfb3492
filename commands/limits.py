"""Client and memory limits, configured and reported as Redis 7.0 does.

- `client-output-buffer-limit`: per client class (normal, slave, pubsub) a hard limit, a
  soft limit and the seconds a client may stay past the soft one; CONFIG SET's parsing
  (`merge_output_limits`) and CONFIG GET's text (`format_output_limits`). The connections
  check `output_limit_reached` against the bytes they have queued.
- `client-query-buffer-limit` and `proto-max-bulk-len`: numbers the request reader uses.
- `maxmemory`: the number; what the dispatcher refuses while the used memory is past
  it with nothing left to evict, and the used memory, are commands.maxmemory's (they
  read the server state, which holds these limits); eviction is commands.evict's.
"""

from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass, field
from typing import Final

OOM = "OOM command not allowed when used memory > 'maxmemory'."
OUTPUT_LIMITS_DEFAULT = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
QUERY_BUFFER_DEFAULT = 1024 * 1024 * 1024
PROTO_MAX_BULK_DEFAULT = 512 * 1024 * 1024
# Class names CONFIG SET accepts -> where the limit is kept (None: refused, as "master").
_CLASSES = {"normal": "normal", "slave": "slave", "replica": "slave", "pubsub": "pubsub"}
_ORDER = ("normal", "slave", "pubsub")  # CONFIG GET's order
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size, from /proc (or the peak from getrusage where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# The resident set as the server starts (INFO's used_memory_startup): this module is
# imported before any data is loaded.
STARTUP_RSS: Final = rss_bytes()
CLIENT_MEMORY: Final = 22298  # what Redis reports as an idle client's tot-mem


def memtoull(text: str) -> int | None:
    """Redis' memtoull: digits with an optional unit (b, k, kb, m, mb, g, gb; any case),
    wrapping at 2**64 as the C code does; None where Redis reports an error."""
    m = re.fullmatch(r"([0-9]*)([a-zA-Z]*)", text)
    if m is None:
        return None
    mul = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 10**6, "mb": 1 << 20, "g": 10**9}.get(
        m.group(2).lower(), 1 << 30 if m.group(2).lower() == "gb" else None
    )
    if mul is None:
        return None
    digits = m.group(1)
    val = min(int(digits), 2**64 - 1) if digits else 0
    return (val * mul) % 2**64


def _strtoll_int(text: str) -> int | None:
    """strtoll(text, &end, 10) that must consume everything, then truncated to a C int
    (Redis keeps soft seconds in an int). Leading whitespace and a sign are allowed and
    an empty string is 0, as strtoll gives."""
    m = re.fullmatch(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", text)
    if m is None:
        return 0 if text == "" else None
    n = int(m.group(1))
    n = max(min(n, 2**63 - 1), -(2**63))
    n &= 0xFFFFFFFF
    return n - 2**32 if n >= 2**31 else n


@dataclass(frozen=True, slots=True)
class OutputLimit:
    hard: int = 0
    soft: int = 0
    soft_seconds: int = 0

    @property
    def active(self) -> bool:
        return bool(self.hard or self.soft)


def parse_output_limits(text: str) -> dict[str, OutputLimit]:
    """A canonical `client-output-buffer-limit` value (as `format_output_limits` wrote it)."""
    words = text.split()
    return {
        words[i]: OutputLimit(int(words[i + 1]), int(words[i + 2]), int(words[i + 3]))
        for i in range(0, len(words) - 3, 4)
    }


def format_output_limits(limits: dict[str, OutputLimit]) -> str:
    return " ".join(
        f"{c} {limits[c].hard} {limits[c].soft} {limits[c].soft_seconds}" for c in _ORDER
    )


def merge_output_limits(current: str, args: list[str]) -> str:
    """Redis' updateClientOutputBufferLimit: `args` are groups of <class> <hard> <soft>
    <soft seconds>; the classes named change, the others keep `current`. The new
    canonical value, or ValueError with Redis' reason (nothing changes then)."""
    if len(args) % 4:
        raise ValueError("Wrong number of arguments in buffer limit configuration.")
    limits = parse_output_limits(current)
    new: dict[str, OutputLimit] = {}
    for j in range(0, len(args), 4):
        cls = _CLASSES.get(args[j].lower())
        if cls is None:
            raise ValueError("Invalid client class specified in buffer limit configuration.")
        hard, soft = memtoull(args[j + 1]), memtoull(args[j + 2])
        seconds = _strtoll_int(args[j + 3])
        if hard is None or soft is None or seconds is None or seconds < 0:
            raise ValueError(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
            )
        new[cls] = OutputLimit(hard, soft, seconds)
    limits.update(new)
    return format_output_limits(limits)


def output_limit_reached(limit: OutputLimit, used: int, soft_since: float, now: float) -> float:
    """Redis' checkClientOutputBufferLimits for a client with `used` bytes queued:
    -1.0 if it must be closed, else the new time it first went past the soft limit
    (0.0: it is under it)."""
    if limit.hard and used >= limit.hard:
        return -1.0
    if not (limit.soft and used >= limit.soft):
        return 0.0
    if not soft_since:
        return now
    return -1.0 if int(now) - int(soft_since) > limit.soft_seconds else soft_since


@dataclass
class Limits:
    """The limits in force, kept as numbers for the connections' fast paths."""

    maxmemory: int = 0
    query_buffer: int = QUERY_BUFFER_DEFAULT
    proto_max_bulk: int = PROTO_MAX_BULK_DEFAULT
    output: dict[str, OutputLimit] = field(
        default_factory=lambda: parse_output_limits(OUTPUT_LIMITS_DEFAULT)
    )

    @classmethod
    def from_params(cls, params: dict[str, str]) -> Limits:
        limits = cls()
        for name, value in params.items():
            limits.apply(name, value)
        return limits

    def apply(self, name: str, value: str) -> bool:
        """Take a parameter's new (valid, canonical) value; False if it is not a limit."""
        if name == "maxmemory":
            self.maxmemory = int(value)
        elif name == "client-query-buffer-limit":
            self.query_buffer = int(value)
        elif name == "proto-max-bulk-len":
            self.proto_max_bulk = int(value)
        elif name == "client-output-buffer-limit":
            self.output = parse_output_limits(value)
        else:
            return False
        return True
