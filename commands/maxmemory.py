"""What the dispatcher asks of `maxmemory` (the number is `commands.limits`'): the used
memory (INFO used_memory, what maxmemory is compared with; commands.evict says what
it counts), whether a command must go through eviction first, and what is refused
while the used memory is past it with nothing left to evict. Compiled: apart from
`commands.limits` because they read the server state, which holds the limits."""

from __future__ import annotations

from commands.limits import CLIENT_MEMORY, STARTUP_RSS
from commands.registry import Command, Flag
from commands.session_state import ServerCore, Session

# What may still run inside MULTI while out of memory (Redis: processCommand).
_MULTI_OOM_ALLOWED = frozenset({"exec", "discard", "quit", "reset"})


def used_memory(state: ServerCore) -> int:
    """INFO used_memory, what maxmemory is compared with (commands.evict says what it
    counts): compiled, as the dispatcher reads it before every command while maxmemory
    is set."""
    store = state.store
    used = STARTUP_RSS + len(state.clients) * CLIENT_MEMORY
    for db in store.dbs:
        used += db.used
    mem = store.mem
    used += mem.pinned_bytes
    if mem.branches:
        for counts in mem.branches.values():
            used += counts[0]
    return used


def memory_pressed(state: ServerCore) -> bool:
    """Whether the command about to run must go through commands.evict first: past
    maxmemory, or just back under it (its state and statistics to update)."""
    return (
        state.over_maxmemory
        or bool(state.stats.eviction_exceeded_since)
        or used_memory(state) > state.limits.maxmemory
    )


def oom_rejects(s: Session, cmd: Command) -> bool:
    """Out of memory, Redis refuses commands flagged denyoom, everything queued inside
    MULTI but EXEC, DISCARD, QUIT and RESET, and an EXEC whose queue holds a denyoom
    command. A blocked command being retried was admitted already."""
    if s.blocked:
        return False
    if s.multi is None:
        return bool(cmd.flags & Flag.DENYOOM)
    if cmd.flags & Flag.NO_MULTI:
        return False  # refused inside MULTI for that reason first
    if cmd.name == "exec":
        return any(c.flags & Flag.DENYOOM for c, _ in s.multi)
    return cmd.name not in _MULTI_OOM_ALLOWED
