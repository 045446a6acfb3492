"""CONFIG's parameters: every parameter of Redis 7.0 with its default, type, bounds and
flags (from `redis_commands.json`), where each value lives (`Config` fields for the
ones the server starts with, `Config.params` for the rest), and how a new value is
checked and normalized as Redis' CONFIG SET does (also for start-up flags)."""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from commands.access import policy_changed
from commands.evict import maxmemory_changed
from commands.limits import memtoull, merge_output_limits
from commands.notify import set_flags
from commands.ops_state import normalize_percentiles, parse_percentiles
from commands.parsing import string2ll
from commands.redis_table import command_data
from commands.session import Config, ServerCore
from store.values import LIMITS

log = logging.getLogger("temporalstore")

_UNSIGNED = frozenset({"ulonglong", "uint", "size_t"})
_NOTIFY_CLASSES = "g$lshzxetdn"  # in keyspaceEventsFlagsToString order; A = g$lshzxetd
_NOTIFY_ALL = set("g$lshzxetd")


@dataclass(frozen=True)
class ConfigParam:
    name: str  # as the table spells it (an alias entry carries the alias)
    canonical: str  # where the value is kept
    spec: dict[str, Any]

    @property
    def flags(self) -> list[str]:
        return self.spec.get("flags", [])  # type: ignore[no-any-return]


# TemporalStore's own parameters beside Redis' (CONFIG GET/SET, and start-up flags of
# the same name): name -> (spec, default).
TS_CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    # TS.SEAL is refused while pinned history (store.accounting) is at or past it; 0: no cap.
    "max-pinned-history": (
        {"type": "ulonglong", "flags": [], "min": 0, "max": 2**64 - 1, "memory": True},
        "0",
    ),
    # History in memory past it moves to the spill file (store.coldhistory); 0: never.
    "history-memory": (
        {"type": "ulonglong", "flags": [], "min": 0, "max": 2**64 - 1, "memory": True},
        "0",
    ),
    # With history-memory 0: plain version entries in memory past it are frozen into
    # compressed runs kept in memory (store.coldhistory MemorySpill); 0: never.
    "history-hot-memory": (
        {"type": "ulonglong", "flags": [], "min": 0, "max": 2**64 - 1, "memory": True},
        str(64 << 20),
    ),
}


@cache
def config_table() -> dict[str, ConfigParam]:
    """Every name CONFIG knows (lower case; aliases included) -> its parameter."""
    data = command_data()
    specs: dict[str, dict[str, Any]] = data.get("configs") or {
        name: {"type": "string", "flags": []} for name in data["config_defaults"]
    }
    specs = {**specs, **{name: spec for name, (spec, _default) in TS_CONFIGS.items()}}
    table: dict[str, ConfigParam] = {}
    for name, spec in specs.items():
        table[name] = ConfigParam(name, name, spec)
        if spec.get("alias"):
            table[spec["alias"]] = ConfigParam(spec["alias"], name, spec)
    return dict(sorted(table.items()))


def config_values(server: ServerCore) -> dict[str, str]:
    """The live values: `Config.params`, filled once with Redis' defaults."""
    params = server.config.params
    if not server.config_defaults_loaded:
        for name, value in command_data()["config_defaults"].items():
            params.setdefault(name, value)
        for name, (_spec, value) in TS_CONFIGS.items():
            params.setdefault(name, value)
        server.config_defaults_loaded = True
    return params


def config_get_value(server: ServerCore, name: str) -> str:
    """The current value of a parameter by its canonical name."""
    cfg = server.config
    if name == "port":
        return str(cfg.port)
    if name == "bind":
        return cfg.host
    if name == "databases":
        return str(cfg.databases)
    if name == "requirepass":
        return cfg.requirepass or ""
    if name == "aclfile":
        return cfg.aclfile or ""
    if name == "dir":
        return os.getcwd()
    return config_values(server).get(name, "")


# A deliberate difference from Redis 7.0, which answers CONFIG GET requirepass with the
# password itself: secrets are never shown (a set one reads as REDACTED, an unset one "").
REDACTED = "<redacted>"
SECRET_PARAMS = frozenset(
    {"requirepass", "masterauth", "tls-key-file-pass", "tls-client-key-file-pass"}
)
# TLS is set up when the server starts: CONFIG SET may not change these (Redis' texts for
# a TLS setting or port it cannot apply).
PORT_UNAVAILABLE = "Unable to listen on this port. Check server logs."
_SET_AT_START = {
    "tls-port": PORT_UNAVAILABLE,
    "tls-cert-file": "Unable to update TLS configuration. Check server logs.",
    "tls-key-file": "Unable to update TLS configuration. Check server logs.",
    "tls-ca-cert-file": "Unable to update TLS configuration. Check server logs.",
    "tls-auth-clients": "Unable to update TLS configuration. Check server logs.",
}


def shown_config_value(server: ServerCore, name: str) -> str:
    """What CONFIG GET shows: the value, unless it is a secret."""
    value = config_get_value(server, name)
    if name == "notify-keyspace-events" and value.startswith("An"):
        value = "A" + value[2:]
    return REDACTED if value and name in SECRET_PARAMS else value


def _numeric(p: ConfigParam, value: str) -> str:
    """Parse and check a numeric parameter as numericConfigSet does; the value CONFIG GET
    will show, or raise ValueError with Redis' message."""
    spec = p.spec
    ll: int | None = None
    if spec.get("memory"):
        u = memtoull(value)
        if u is not None:
            ll = u - 2**64 if u >= 2**63 else u
    if ll is None and spec.get("percent") and len(value) > 1 and value.endswith("%"):
        n = string2ll(value[:-1].encode())
        if n is not None and n >= 0:
            ll = -n
    if ll is None and spec.get("octal"):
        if re.fullmatch(r"\s*[+-]?[0-7]+", value):
            ll = int(value, 8)
    if ll is None and not (spec.get("memory") or spec.get("percent") or spec.get("octal")):
        ll = string2ll(value.encode())
    if ll is None:
        if spec.get("memory") and spec.get("percent"):
            raise ValueError("argument must be a memory or percent value")
        if spec.get("memory"):
            raise ValueError("argument must be a memory value")
        if spec.get("octal"):
            raise ValueError("argument couldn't be parsed as an octal number")
        raise ValueError("argument couldn't be parsed into an integer")
    lo, hi = spec["min"], spec["max"]
    if spec["type"] in _UNSIGNED:
        u = ll % 2**64
        if u > hi % 2**64 or u < lo % 2**64:
            if spec.get("octal"):
                raise ValueError(f"argument must be between {lo:o} and {hi:o} inclusive")
            raise ValueError(f"argument must be between {lo % 2**64} and {hi % 2**64} inclusive")
    elif spec.get("percent") and ll < 0:
        if ll < lo:
            raise ValueError(f"percentage argument must be less or equal to {-lo}")
    elif ll > hi or ll < lo:
        raise ValueError(f"argument must be between {lo} and {hi} inclusive")
    if spec.get("percent") and ll < 0:
        return f"{-ll}%"
    if spec.get("memory"):
        return str(ll % 2**64)
    if spec.get("octal"):
        return f"{ll % 2**64:o}"
    return str(ll)


def _enum(p: ConfigParam, value: str) -> str:
    names: list[str] = p.spec["values"]
    multi = "multi_arg" in p.flags
    words = value.split(" ") if multi else [value]
    chosen = []
    for w in words:
        match = [n for n in names if n.lower() == w.lower()]
        if not match:
            raise ValueError("argument(s) must be one of the following: " + ", ".join(names))
        chosen.append(match[0])
    if not multi:
        return chosen[0]
    picked = {c for c in chosen if c != names[0]}  # the first name is the empty set
    if "save" in picked and "nosave" in picked:
        raise ValueError("shutdown options SAVE and NOSAVE can't be used simultaneously")
    return " ".join(n for n in names if n in picked) or names[0]


def _special(p: ConfigParam, value: str, server: ServerCore) -> str:
    name = p.canonical
    if name == "save":
        args = [] if value == "" else value.split(" ")
        if len(args) % 2:
            raise ValueError("Invalid save parameters")
        nums = []
        for j, a in enumerate(args):
            m = re.fullmatch(r"\s*([+-]?\d*)", a)
            n = int(m.group(1)) if m and m.group(1) not in ("", "+", "-") else 0
            if m is None or (j % 2 == 0 and n < 1) or (j % 2 == 1 and n < 0):
                raise ValueError("Invalid save parameters")
            nums.append(str(n))
        return " ".join(nums)
    if name == "notify-keyspace-events":
        classes = set()
        for ch in value:
            if ch == "A":
                classes |= _NOTIFY_ALL
            elif ch in _NOTIFY_CLASSES or ch in "KEm":
                classes.add(ch)
            else:
                raise ValueError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        text = (
            "A" if classes >= _NOTIFY_ALL else "".join(c for c in _NOTIFY_CLASSES if c in classes)
        )
        # Redis prints A without n, but n stays in force: kept here, hidden by
        # shown_config_value.
        hidden = "n" if text == "A" and "n" in classes else ""
        return text + hidden + "".join(c for c in "KEm" if c in classes)
    if name == "client-output-buffer-limit":
        return merge_output_limits(
            config_get_value(server, name), value.split(" ") if value else []
        )
    if name == "latency-tracking-info-percentiles":
        return normalize_percentiles(value)
    if name == "dir":  # protected: reached only with enable-protected-configs
        try:
            os.chdir(value)
        except OSError as e:
            raise ValueError(e.strerror or str(e)) from None
        return value
    if name == "bind" and value != config_get_value(server, name):
        raise ValueError("Failed to bind to specified addresses.")
    return value


def config_normalize(server: ServerCore, p: ConfigParam, value: str) -> str:
    """The value as CONFIG GET will show it, or ValueError with Redis' reason."""
    shown = _normalize(server, p, value)
    if p.canonical in _SET_AT_START and shown != config_get_value(server, p.canonical):
        log.warning("CONFIG SET %s: TLS settings are fixed when the server starts", p.name)
        raise ValueError(_SET_AT_START[p.canonical])
    return shown


def _normalize(server: ServerCore, p: ConfigParam, value: str) -> str:
    kind = p.spec.get("type", "string")
    if kind == "bool":
        if value.lower() not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        return value.lower()
    if kind == "enum":
        return _enum(p, value)
    if kind == "string":
        return value
    if kind == "special":
        return _special(p, value, server)
    return _numeric(p, value)


def set_at_start(config: Config, name: str, value: str) -> None:
    """A parameter given as a start-up flag, checked and stored as CONFIG SET would
    (ValueError with Redis' reason). Multi-word values split on any whitespace."""
    p = config_table()[name]
    kind = p.spec.get("type")
    if kind == "special":
        current = config.params.get(name) or command_data()["config_defaults"][name]
        config.params[name] = merge_output_limits(current, value.split())
    elif kind == "enum":
        config.params[name] = _enum(p, value)
    elif kind == "string":
        config.params[name] = value
    else:
        config.params[name] = _numeric(p, value)
    if name in _ENCODING_LIMITS:
        setattr(LIMITS, _ENCODING_LIMITS[name], int(config.params[name]))


# Parameters that set the compact-encoding limits and stream node sizes
# (store.values.LIMITS), by canonical name.
_ENCODING_LIMITS = {
    "hash-max-listpack-entries": "hash_entries",
    "hash-max-listpack-value": "hash_value",
    "set-max-intset-entries": "set_entries",
    "zset-max-listpack-entries": "zset_entries",
    "zset-max-listpack-value": "zset_value",
    "stream-node-max-entries": "stream_node_entries",
    "stream-node-max-bytes": "stream_node_bytes",
}


def config_store(server: ServerCore, name: str, value: str) -> None:
    cfg = server.config
    if name == "requirepass":
        cfg.requirepass = value or None
        server.users.set_default_password(cfg.requirepass)  # as Redis: the default user's
    elif name not in ("port", "bind", "databases", "dir"):
        config_values(server)[name] = value
    if name == "notify-keyspace-events":
        set_flags(server, value)
    if name in _ENCODING_LIMITS:
        setattr(LIMITS, _ENCODING_LIMITS[name], int(value))
    if name in ("maxmemory-policy", "lfu-log-factor", "lfu-decay-time"):
        policy_changed(server.store.dbs, config_values(server))
    server.limits.apply(name, value)  # the limits in force (commands.limits)
    if name == "maxmemory":
        maxmemory_changed(server)  # evicts from the event loop (commands.evict)
    ops_config_changed(server, name, value)
    server.replication.configure(name, value)
    server.min_replicas = server.replication.min_replicas  # the dispatcher's copy


def refresh(server: ServerCore) -> None:
    """Bring the dispatcher's per-command fields up to date with `ServerState.ops`."""
    server.slow_ns = server.ops.slow_ns()
    server.clock_mark = time.perf_counter_ns()


def ops_config_changed(server: ServerCore, name: str, value: str) -> None:
    """CONFIG SET stored `value`: apply the settings of SLOWLOG, LATENCY and the latency
    histograms (`ServerState.ops`, commands.ops_state) and the dispatcher's copies."""
    ops = server.ops
    if name == "slowlog-log-slower-than":
        ops.slowlog_us = int(value)
    elif name == "slowlog-max-len":
        ops.slowlog_max = int(value)
        while len(ops.slowlog) > ops.slowlog_max:
            ops.slowlog.pop()
    elif name == "latency-monitor-threshold":
        ops.latency_ms = int(value)
    elif name == "latency-tracking":
        server.latency_tracking = value == "yes"
    elif name == "latency-tracking-info-percentiles":
        ops.percentiles = parse_percentiles(value)
    else:
        return
    refresh(server)
