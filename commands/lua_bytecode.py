"""Lua 5.1 bytecode (`string.dump`'s format): turn a script's `return redis.call(...)`
tail calls into ordinary calls.

Why: `redis.call` and `redis.pcall` are Lua functions here (`wide` in lua_sandbox.lua
hands a call with more arguments than lupa passes to a Python function as a table).
A tail call to a Lua function replaces the caller's frame, so an error raised by the
call could no longer name the script's line, as Redis (whose `redis.call` is a C
function, which a tail call never replaces) does. `OP_TAILCALL A B 0` is always
followed by `OP_RETURN A 0`, and `OP_CALL A B 0` before that same return is what Lua
compiles for a call whose results are all returned: the same results, with the
caller's frame kept. Only tail calls of a `x.call(...)` or `x.pcall(...)` (a field read
with a constant key) are changed; every other tail call stays one (deep tail recursion
works as in Redis).

Layout (ldump.c of Lua 5.1, as lupa's Lua 5.1 writes it on x86-64): a 12-byte header,
then the main function: source, line numbers, counts, code, constants, nested
functions, debug information."""

from __future__ import annotations

import struct

HEADER = b"\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00"  # 5.1, little endian, int 4, size_t 8
OP_MOVE = 0
OP_LOADK = 1
OP_GETTABLE = 6
OP_CALL = 28
OP_TAILCALL = 29
# Opcodes that write register A (the last such write before a call loads its function).
WRITES_A = frozenset({0, 1, 2, 3, 4, 5, 6, 10, 11, *range(12, 22), 27, 28, 31, 32, 36, 37})
CALL_NAMES = (b"call", b"pcall")
_INT = struct.Struct("<i")
_SIZE = struct.Struct("<Q")


class _Reader:
    def __init__(self, data: bytearray) -> None:
        self.data = data
        self.pos = len(HEADER)

    def int(self) -> int:
        v: int = _INT.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return v

    def string(self) -> bytes | None:
        n: int = _SIZE.unpack_from(self.data, self.pos)[0]
        self.pos += 8
        if n == 0:
            return None
        s = bytes(self.data[self.pos : self.pos + n - 1])  # without its NUL
        self.pos += n
        return s


def _function(r: _Reader) -> int:
    """Patch one function (and those it holds) in place; the tail calls changed."""
    r.string()  # source
    r.pos += 4 + 4 + 4  # linedefined, lastlinedefined; nups, numparams, is_vararg, maxstack
    ncode = r.int()
    code_at = r.pos
    r.pos += 4 * ncode
    constants: list[bytes | None] = []
    for _ in range(r.int()):
        kind = r.data[r.pos]
        r.pos += 1
        if kind == 1:  # boolean
            r.pos += 1
        elif kind == 3:  # number
            r.pos += 8
        elif kind == 4:
            constants.append(r.string())
            continue
        constants.append(None)
    changed = sum(_function(r) for _ in range(r.int()))
    nlines = r.int()
    r.pos += 4 * nlines  # line info
    for _ in range(r.int()):  # local variables: name, start pc, end pc
        r.string()
        r.pos += 8
    for _ in range(r.int()):  # upvalue names
        r.string()
    code = [_INT.unpack_from(r.data, code_at + 4 * i)[0] & 0xFFFFFFFF for i in range(ncode)]
    for pc, ins in enumerate(code):
        if ins & 0x3F == OP_TAILCALL and _calls_redis(code, pc, constants):
            _INT.pack_into(r.data, code_at + 4 * pc, _signed((ins & ~0x3F) | OP_CALL))
            changed += 1
    return changed


def _writer(code: list[int], pc: int, reg: int) -> int:
    """The pc of the last instruction before `pc` that writes register `reg`, or -1."""
    while pc > 0:
        pc -= 1
        ins = code[pc]
        if ins & 0x3F in WRITES_A and (ins >> 6) & 0xFF == reg:
            return pc
    return -1


def _calls_redis(code: list[int], pc: int, constants: list[bytes | None]) -> bool:
    """Whether the call at `pc` calls a function read as `x.call` or `x.pcall`, or a
    local copied from one (`local call = redis.call`; followed a few moves back)."""
    reg = (code[pc] >> 6) & 0xFF
    for _ in range(4):
        pc = _writer(code, pc, reg)
        if pc < 0:
            return False
        ins = code[pc]
        op = ins & 0x3F
        if op == OP_GETTABLE:
            c = (ins >> 14) & 0x1FF
            if c & 0x100:
                k = c & 0xFF
            else:  # a key beyond the first 256 constants is loaded into a register
                at = _writer(code, pc, c)
                if at < 0 or code[at] & 0x3F != OP_LOADK:
                    return False
                k = code[at] >> 14
            return k < len(constants) and constants[k] in CALL_NAMES
        if op != OP_MOVE:
            return False
        reg = ins >> 23  # B: the register copied
    return False


def _signed(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def untail(dumped: bytes) -> bytes | None:
    """`dumped` (a `string.dump`) with its tail calls of `redis.call`/`redis.pcall`
    made ordinary calls, or None when there is none (or the format is not one we read)."""
    if not dumped.startswith(HEADER) or b"call" not in dumped:
        return None
    data = bytearray(dumped)
    try:
        changed = _function(_Reader(data))
    except (struct.error, IndexError):
        return None
    return bytes(data) if changed else None
