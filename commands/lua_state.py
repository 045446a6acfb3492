"""The server's scripting state, the core's: its Lua engine (`engine_of`: one per
server, made on first use), what INFO memory reports of it (`memory`), and the flags a
script's shebang line declares (`shebang_flags`). EVAL, SCRIPT, FUNCTION and FCALL are
the `commands.scripting` family's; CLIENT KILL, INFO, MEMORY and the RDB loader reach
the engine through this module."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from commands.errors import CommandError
from commands.lua_engine import FLAG_EVAL_COMPAT, SCRIPT_FLAGS, ScriptEngine
from commands.lua_library import shebang_parts

if TYPE_CHECKING:
    from commands.session import ServerCore


_ENGINES: weakref.WeakKeyDictionary[ServerCore, ScriptEngine] = weakref.WeakKeyDictionary()


def engine_of(server: ServerCore) -> ScriptEngine:
    eng = _ENGINES.get(server)
    if eng is None:
        eng = _ENGINES[server] = ScriptEngine(server)
    return eng


@dataclass
class LuaMemory:
    """INFO memory's scripting fields (bytes, counts)."""

    vm_eval: int = 0
    vm_functions: int = 0
    scripts_eval: int = 0
    cached_scripts: int = 0
    functions: int = 0
    libraries: int = 0
    functions_mem: int = 0


SCRIPT_OVERHEAD = 96  # per cached script or function: its entry and name, roughly


def memory(server: ServerCore) -> LuaMemory:
    eng = _ENGINES.get(server)
    if eng is None:
        return LuaMemory()
    busy = eng.run is not None  # the interpreters belong to the script meanwhile
    return LuaMemory(
        vm_eval=0 if busy else eng.eval_state.memory(),
        vm_functions=0 if busy else eng.fn_state.memory(),
        scripts_eval=sum(len(body) + SCRIPT_OVERHEAD for body, _f, _fn in eng.scripts.values()),
        cached_scripts=len(eng.scripts),
        functions=len(eng.functions),
        libraries=len(eng.libraries),
        functions_mem=sum(
            len(code) + SCRIPT_OVERHEAD * (1 + len(fns)) for code, fns in eng.libraries.values()
        ),
    )


def shebang_flags(body: bytes) -> tuple[int, int]:
    """Redis' evalExtractShebangFlags: (flags, length of the shebang line)."""
    if not body.startswith(b"#!"):
        return FLAG_EVAL_COMPAT, 0
    parts, end = shebang_parts(
        body, "ERR Invalid script shebang", "ERR Invalid engine in script shebang"
    )
    if parts[0] != b"#!lua":
        raise CommandError(b"ERR Unexpected engine in script shebang: " + parts[0])
    flags = 0
    for p in parts[1:]:
        if not p.startswith(b"flags="):
            raise CommandError(b"ERR Unknown lua shebang option: " + p)
        for f in p[6:].split(b",") if p[6:] else ():
            bit = SCRIPT_FLAGS.get(f)
            if bit is None:
                raise CommandError(b"ERR Unexpected flag in script shebang: " + f)
            flags |= bit
    return flags, end
