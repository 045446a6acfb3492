"""The keys of a full command line, as COMMAND GETKEYS and ACL key checks find them:
Redis' key specs first (`redis_commands.json`, or our declared positions for commands
Redis lacks), then the command's own key finder (Redis' getkeys_proc) where a spec
cannot say."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from commands.errors import CommandError
from commands.parsing import string2ll
from commands.redis_table import plain, redis_entry, typed_names
from commands.registry import Command, Flag, lookup_for_call

INVALID_COMMAND = "ERR Invalid command specified"
NO_KEY_ARGS = "ERR The command has no key arguments"
INVALID_NARGS = "ERR Invalid number of arguments specified for command"
INVALID_ARGS = "ERR Invalid arguments specified for command"

KeyRef = tuple[int, tuple[str, ...]]  # (argument index, key flags)
_RO_ACCESS = ("RO", "access")
NO_FLAGS: tuple[str, ...] = ()


def _atoi(b: bytes) -> int:
    m = re.match(rb"\s*([+-]?\d+)", b)
    if m is None:
        return 0
    return max(-(2**31), min(int(m.group(1)), 2**31 - 1))


def _generic_keys(store: int, count: int, first: int) -> Callable[[list[bytes]], list[KeyRef]]:
    def keys(argv: list[bytes]) -> list[KeyRef]:
        num = _atoi(argv[count]) if count < len(argv) else 0
        if num < 1 or num > len(argv) - first:
            return []
        out: list[KeyRef] = [(first + i, NO_FLAGS) for i in range(num)]
        if store:
            out.append((store, NO_FLAGS))
        return out

    return keys


def _sort_keys(argv: list[bytes]) -> list[KeyRef]:
    out: list[KeyRef] = [(1, _RO_ACCESS)]
    store = None
    skips = {b"limit": 2, b"get": 1, b"by": 1}
    i = 2
    while i < len(argv):
        arg = argv[i].lower()
        if arg in skips:
            i += skips[arg]
        elif arg == b"store" and i + 1 < len(argv):
            store = i + 1
        i += 1
    if store is not None:
        out.append((store, ("OW", "update")))
    return out


def _migrate_keys(argv: list[bytes]) -> list[KeyRef]:
    first, num = 3, 1
    if len(argv) > 6:
        skips = {b"copy": 0, b"replace": 0, b"auth": 1, b"auth2": 2}
        i = 6
        while i < len(argv):
            arg = argv[i].lower()
            if arg == b"keys":
                if argv[3]:
                    num = 0
                else:
                    first, num = i + 1, len(argv) - i - 1
                break
            i += skips.get(arg, 0) + 1
    return [(first + i, ("RW", "access", "delete")) for i in range(num)]


def _set_keys(argv: list[bytes]) -> list[KeyRef]:
    if any(a.lower() == b"get" for a in argv[3:]):
        return [(1, ("RW", "access", "update"))]
    return [(1, ("OW", "update"))]


def _bitfield_keys(argv: list[bytes]) -> list[KeyRef]:
    readonly = True
    i = 2
    while i < len(argv):
        rem = len(argv) - i - 1
        arg = argv[i].lower()
        if arg == b"get" and rem >= 2:
            i += 3
        elif arg in (b"set", b"incrby") and rem >= 3:
            readonly = False
            break
        elif arg == b"overflow" and rem >= 1:
            i += 2
        else:
            readonly = False
            break
    return [(1, _RO_ACCESS if readonly else ("RW", "access", "update"))]


def _georadius_keys(argv: list[bytes]) -> list[KeyRef]:
    stored = None
    i = 5
    while i < len(argv):
        if argv[i].lower() in (b"store", b"storedist") and i + 1 < len(argv):
            stored = i + 1
            i += 1
        i += 1
    return [(1, NO_FLAGS)] + ([(stored, NO_FLAGS)] if stored is not None else [])


def _xread_keys(argv: list[bytes]) -> list[KeyRef]:
    pos = -1
    i = 1
    while i < len(argv):
        arg = argv[i].lower()
        if arg in (b"block", b"count"):
            i += 1
        elif arg == b"group":
            i += 2
        elif arg == b"streams":
            pos = i
            break
        elif arg != b"noack":
            break
        i += 1
    num = len(argv) - pos - 1 if pos != -1 else 0
    if pos == -1 or num == 0 or num % 2:
        return []
    return [(j, NO_FLAGS) for j in range(pos + 1, len(argv) - num // 2)]


GETKEYS_PROCS: dict[str, Callable[[list[bytes]], list[KeyRef]]] = {
    "sort": _sort_keys,
    "sort_ro": lambda argv: [(1, _RO_ACCESS)],
    "migrate": _migrate_keys,
    "set": _set_keys,
    "bitfield": _bitfield_keys,
    "georadius": _georadius_keys,
    "georadiusbymember": _georadius_keys,
    "xread": _xread_keys,
    "xreadgroup": _xread_keys,
    "sintercard": _generic_keys(0, 1, 2),
    "zunion": _generic_keys(0, 1, 2),
    "zinter": _generic_keys(0, 1, 2),
    "zdiff": _generic_keys(0, 1, 2),
    "zintercard": _generic_keys(0, 1, 2),
    "zunionstore": _generic_keys(1, 2, 3),
    "zinterstore": _generic_keys(1, 2, 3),
    "zdiffstore": _generic_keys(1, 2, 3),
    "eval": _generic_keys(0, 2, 3),
    "eval_ro": _generic_keys(0, 2, 3),
    "evalsha": _generic_keys(0, 2, 3),
    "evalsha_ro": _generic_keys(0, 2, 3),
    "fcall": _generic_keys(0, 2, 3),
    "fcall_ro": _generic_keys(0, 2, 3),
    "lmpop": _generic_keys(0, 1, 2),
    "zmpop": _generic_keys(0, 1, 2),
    "blmpop": _generic_keys(0, 2, 3),
    "bzmpop": _generic_keys(0, 2, 3),
}


def _spec_keys(specs: list[dict[str, Any]], argv: list[bytes]) -> list[KeyRef] | None:
    """Redis' getKeysUsingKeySpecs; None where a spec cannot say (fall back to the proc)."""
    argc = len(argv)
    out: list[KeyRef] = []
    for spec in specs:
        flags = tuple(spec["flags"])
        if "not_key" in flags:
            continue
        bs, fk = spec["begin_search"], spec["find_keys"]
        first = 0
        if bs["type"] == "index":
            first = bs["spec"]["index"]
        elif bs["type"] == "keyword":
            word, start = bs["spec"]["keyword"].lower().encode(), bs["spec"]["startfrom"]
            i = start if start > 0 else argc + start
            end = argc - 1 if start > 0 else 1
            step = 1 if i <= end else -1
            while i != end and 1 <= i < argc:
                if argv[i].lower() == word:
                    first = i + 1
                    break
                i += step
            if not first:
                continue
        else:
            return None
        if fk["type"] == "range":
            step = fk["spec"]["keystep"]
            lastkey, limit = fk["spec"]["lastkey"], fk["spec"]["limit"]
            if lastkey >= 0:
                last = first + lastkey
            elif not limit:
                last = argc + lastkey
            else:
                last = first + ((argc - first) // limit + lastkey)
        elif fk["type"] == "keynum":
            step = fk["spec"]["keystep"]
            idx = fk["spec"]["keynumidx"]
            if idx >= argc or first + idx >= argc:
                return None
            numkeys = string2ll(argv[first + idx])
            if numkeys is None or numkeys < 0:
                return None
            first += fk["spec"]["firstkey"]
            last = first + numkeys - 1
        else:
            return None
        if last >= argc or last < first or first >= argc:
            return None
        out.extend((i, flags) for i in range(first, last + 1, step))
        if "incomplete" in flags:
            return None
    return out


def range_spec(first: int, last: int, step: int) -> dict[str, Any]:
    """A key spec for a command Redis lacks, from our first/last/step (plain form)."""
    lastkey = last - first if last >= 0 else last
    return {
        "flags": [],
        "begin_search": {"type": "index", "spec": {"index": first}},
        "find_keys": {"type": "range", "spec": {"lastkey": lastkey, "keystep": step, "limit": 0}},
    }


@cache
def _key_specs(name: str, arity: int, first: int, last: int, step: int) -> list[dict[str, Any]]:
    found = redis_entry(name)
    if found is not None:
        return plain(found[0][8])  # type: ignore[no-any-return]
    return [range_spec(first, last, step)] if first else []


def keys_at_positions(cmd: Command) -> bool:
    """Whether `get_keys` always finds exactly `cmd.keys(argv)` for a call of the right
    arity: one plain key spec (an index, then a range without a limit) that says what
    the command's first/last/step say, and no key finder. Per command, once."""
    found = _AT_POSITIONS.get(cmd.name)
    if found is None:
        specs = _key_specs(cmd.name, cmd.arity, cmd.first_key, cmd.last_key, cmd.step)
        found = False
        if len(specs) == 1 and cmd.name not in GETKEYS_PROCS and cmd.first_key:
            sp = specs[0]
            bs, fk = sp["begin_search"], sp["find_keys"]
            if (
                not set(sp["flags"]) & {"not_key", "incomplete", "variable_flags"}
                and bs["type"] == "index"
                and bs["spec"]["index"] == cmd.first_key
                and fk["type"] == "range"
                and not fk["spec"]["limit"]
                and fk["spec"]["keystep"] == (cmd.step or 1)
            ):
                lastkey = fk["spec"]["lastkey"]
                last = cmd.first_key + lastkey if lastkey >= 0 else lastkey
                found = last == cmd.last_key
        _AT_POSITIONS[cmd.name] = found
    return found


_AT_POSITIONS: dict[str, bool] = {}


def get_keys(argv: list[bytes]) -> list[KeyRef]:
    """The keys of a full command line, with their flags, or CommandError as Redis words it."""
    cmd = lookup_for_call(argv)
    if cmd is None:
        raise CommandError(INVALID_COMMAND)
    specs = _key_specs(cmd.name, cmd.arity, cmd.first_key, cmd.last_key, cmd.step)
    proc = GETKEYS_PROCS.get(cmd.name)
    has_keyspec = any("not_key" not in sp["flags"] for sp in specs)
    if proc is None and not has_keyspec:
        raise CommandError(NO_KEY_ARGS)
    n = len(argv)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        raise CommandError(INVALID_NARGS)
    keys: list[KeyRef] | None = None
    if has_keyspec and not any("variable_flags" in sp["flags"] for sp in specs):
        keys = _spec_keys(specs, argv)
    if keys is None:
        keys = proc(argv) if proc is not None else []
    if not keys:
        found = redis_entry(cmd.name)
        flags = typed_names(found[0][2]) if found else []
        if "no_mandatory_keys" in flags or cmd.flags & Flag.NO_MANDATORY_KEYS:
            return []
        raise CommandError(INVALID_ARGS)
    return keys


KEY_FLAG_ORDER = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
                   "incomplete", "variable_flags"]  # fmt: skip
