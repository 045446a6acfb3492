"""The C libraries Redis gives scripts, in Python for lupa's Lua: `bit` (LuaBitOp),
`cjson`, `cmsgpack` and `struct`, with the behaviour scripts rely on (cjson's number
format and escapes, cmsgpack's smallest encodings, bit's int32 arithmetic).

Each function returns (True, values...) or (False, message); `wrap` (Lua) raises the
message as a Lua error, so errors read as the C libraries' do."""

from __future__ import annotations

import json
import math
import struct as pystruct
from collections.abc import Callable, Iterator
from typing import Any

import lupa.lua51 as lupa
import msgpack

Result = tuple[Any, ...]


def _ok(*values: Any) -> Result:
    return (True, *values)


def _fail(msg: str) -> Result:
    return (False, msg.encode())


# -- bit ----------------------------------------------------------------------------


def _tobit(x: Any) -> int:
    n = round(float(x)) & 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def _bit_table() -> dict[bytes, Callable[..., Result]]:
    def fold(op: Callable[[int, int], int]) -> Callable[..., Result]:
        def f(*xs: Any) -> Result:
            acc = _tobit(xs[0])
            for x in xs[1:]:
                acc = op(acc, _tobit(x))
            return _ok(_tobit(acc))

        return f

    def tohex(x: Any, n: Any = 8) -> Result:
        n = int(n)
        upper = n < 0
        n = min(abs(n), 8)
        v = _tobit(x) & ((1 << (4 * n)) - 1)
        s = f"{v:0{n}x}"
        return _ok((s.upper() if upper else s).encode())

    def rol(x: Any, n: Any) -> Result:
        v, k = _tobit(x) & 0xFFFFFFFF, int(n) & 31
        return _ok(_tobit((v << k) | (v >> (32 - k))))

    def ror(x: Any, n: Any) -> Result:
        v, k = _tobit(x) & 0xFFFFFFFF, int(n) & 31
        return _ok(_tobit((v >> k) | (v << (32 - k))))

    return {
        b"tobit": lambda x: _ok(_tobit(x)),
        b"bnot": lambda x: _ok(_tobit(~_tobit(x))),
        b"band": fold(lambda a, b: a & b),
        b"bor": fold(lambda a, b: a | b),
        b"bxor": fold(lambda a, b: a ^ b),
        b"lshift": lambda x, n: _ok(_tobit(_tobit(x) << (int(n) & 31))),
        b"rshift": lambda x, n: _ok(_tobit((_tobit(x) & 0xFFFFFFFF) >> (int(n) & 31))),
        b"arshift": lambda x, n: _ok(_tobit(_tobit(x) >> (int(n) & 31))),
        b"rol": rol,
        b"ror": ror,
        b"bswap": lambda x: _ok(
            _tobit(int.from_bytes((_tobit(x) & 0xFFFFFFFF).to_bytes(4, "big"), "little"))
        ),
        b"tohex": tohex,
    }


# -- cjson --------------------------------------------------------------------------

_ESC = {0x22: b'\\"', 0x5C: b"\\\\", 0x2F: b"\\/", 8: b"\\b", 12: b"\\f", 10: b"\\n"}
_ESC.update({13: b"\\r", 9: b"\\t"})


def _json_str(s: bytes) -> bytes:
    out = bytearray(b'"')
    for c in s:
        e = _ESC.get(c)
        if e is not None:
            out += e
        elif c < 0x20 or c == 0x7F:
            out += b"\\u%04x" % c
        else:
            out.append(c)
    out += b'"'
    return bytes(out)


def _json_num(x: Any) -> bytes:
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        raise ValueError("Cannot serialise number: must not be NaN or Inf")
    return b"%.14g" % x


class _Codec:
    def __init__(self, lua: Any, null: Any) -> None:
        self.lua = lua
        self.null = null
        # cjson's settings (per interpreter, as the C library's are)
        self.encode_max_depth = 1000
        self.decode_max_depth = 1000
        self.encode_invalid_numbers = False

    def number(self, v: Any) -> bytes:
        x = float(v)
        if self.encode_invalid_numbers and not math.isfinite(x):
            return b"nan" if math.isnan(x) else (b"inf" if x > 0 else b"-inf")
        return _json_num(x)

    def encode(self, v: Any, depth: int = 0) -> bytes:
        if v is None or v is self.null:
            return b"null"
        t = type(v)
        if t is bool:
            return b"true" if v else b"false"
        if t is int or t is float:
            return self.number(v)
        if t is bytes:
            return _json_str(v)
        if lupa.lua_type(v) != "table":
            raise ValueError(f"Cannot serialise {lupa.lua_type(v)}: type not supported")
        if depth + 1 > self.encode_max_depth:
            raise ValueError(f"Cannot serialise, excessive nesting ({depth + 1})")
        items = list(v.items())
        keys = [k for k, _ in items]
        if items and all(type(k) in (int, float) and k >= 1 and k == int(k) for k in keys):
            top = int(max(keys))
            if top > len(items) * 2 and top > 10:
                raise ValueError("Cannot serialise table: excessively sparse array")
            return b"[" + b",".join(self.encode(v[i], depth + 1) for i in range(1, top + 1)) + b"]"
        parts = []
        for k, x in items:
            if type(k) is bytes:
                key = k
            elif type(k) in (int, float):
                key = self.number(k)
            else:
                raise ValueError("Cannot serialise table: table key must be a number or string")
            parts.append(_json_str(key) + b":" + self.encode(x, depth + 1))
        return b"{" + b",".join(parts) + b"}"

    def decode(self, s: bytes) -> Any:
        # Raw bytes go through as they are (surrogate escapes); \u escapes as UTF-8.
        value = json.loads(s.decode("utf-8", "surrogateescape"), parse_int=float)
        if _depth(value) > self.decode_max_depth:
            raise ValueError(f"Found too many nested data structures ({self.decode_max_depth + 1})")
        return self.to_lua(value)

    def to_lua(self, x: Any) -> Any:
        if x is None:
            return self.null
        if isinstance(x, str):
            try:
                return x.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return x.encode("utf-8", "surrogatepass")
        if isinstance(x, list):
            return self.lua.table_from([self.to_lua(e) for e in x])
        if isinstance(x, dict):
            t = self.lua.table_from({})
            for k, e in x.items():
                t[self.to_lua(k)] = self.to_lua(e)
            return t
        return x


def _depth(x: Any) -> int:
    if isinstance(x, list):
        return 1 + max(map(_depth, x), default=0)
    if isinstance(x, dict):
        return 1 + max(map(_depth, x.values()), default=0)
    return 0


def _cjson_table(codec: _Codec) -> dict[bytes, Any]:
    def setting(name: str, lo: int, hi: int) -> Callable[..., Result]:
        def f(*args: Any) -> Result:
            if args and args[0] is not None:
                v = args[0]
                if type(v) is bool:
                    v = int(v)
                if not lo <= int(v) <= hi:
                    return _fail(
                        f"bad argument #1 to '{name}' (expected integer between {lo} and {hi})"
                    )
                setattr(codec, name, type(getattr(codec, name))(int(v)))
            return _ok(getattr(codec, name))

        return f

    def accept(*_args: Any) -> Result:
        return _ok(True)

    def encode(*args: Any) -> Result:
        if len(args) != 1:
            return _fail("bad argument #1 to 'encode' (expected 1 argument)")
        try:
            return _ok(codec.encode(args[0]))
        except ValueError as e:
            return _fail(str(e))

    def decode(*args: Any) -> Result:
        if len(args) != 1 or type(args[0]) is not bytes:
            return _fail("bad argument #1 to 'decode' (string expected)")
        try:
            return _ok(codec.decode(args[0]))
        except ValueError as e:
            return _fail(f"Expected value but found invalid token: {e}")

    return {
        b"encode": encode,
        b"decode": decode,
        b"null": codec.null,
        b"encode_max_depth": setting("encode_max_depth", 1, 2**31 - 1),
        b"decode_max_depth": setting("decode_max_depth", 1, 2**31 - 1),
        b"encode_invalid_numbers": setting("encode_invalid_numbers", 0, 1),
        b"encode_keep_buffer": accept,
        b"encode_sparse_array": accept,
        b"encode_number_precision": accept,
        b"decode_invalid_numbers": accept,
    }


# -- cmsgpack -----------------------------------------------------------------------


def _mp_pack(v: Any, out: bytearray, depth: int = 0) -> None:
    t = type(v)
    if v is None:
        out.append(0xC0)
    elif t is bool:
        out.append(0xC3 if v else 0xC2)
    elif t is int or t is float:
        x = float(v)
        if x == int(x) if math.isfinite(x) else False:
            out += msgpack.packb(int(x))
        elif pystruct.unpack(">f", pystruct.pack(">f", x))[0] == x or not math.isfinite(x):
            out += b"\xca" + pystruct.pack(">f", x)
        else:
            out += b"\xcb" + pystruct.pack(">d", x)
    elif t is bytes:
        n = len(v)
        if n < 32:
            out.append(0xA0 | n)
        elif n <= 0xFF:
            out += b"\xd9" + bytes([n])
        elif n <= 0xFFFF:
            out += b"\xda" + n.to_bytes(2, "big")
        else:
            out += b"\xdb" + n.to_bytes(4, "big")
        out += v
    elif lupa.lua_type(v) == "table" and depth < 16:
        items = list(v.items())
        keys = [k for k, _ in items]
        n = len(items)
        if all(type(k) in (int, float) and k >= 1 and k == int(k) for k in keys) and (
            not keys or max(keys) == n
        ):
            out += _mp_len(n, 0x90, b"\xdc", b"\xdd")
            for i in range(1, n + 1):
                _mp_pack(v[i], out, depth + 1)
        else:
            out += _mp_len(n, 0x80, b"\xde", b"\xdf")
            for k, x in items:
                _mp_pack(k, out, depth + 1)
                _mp_pack(x, out, depth + 1)
    else:
        out.append(0xC0)


def _mp_len(n: int, fix: int, b16: bytes, b32: bytes) -> bytes:
    if n < 16:
        return bytes([fix | n])
    if n <= 0xFFFF:
        return b16 + n.to_bytes(2, "big")
    return b32 + n.to_bytes(4, "big")


def _cmsgpack_table(lua: Any) -> dict[bytes, Any]:
    def to_lua(x: Any) -> Any:
        if isinstance(x, list | tuple):
            return lua.table_from([to_lua(e) for e in x])
        if isinstance(x, dict):
            t = lua.table_from({})
            for k, e in x.items():
                t[to_lua(k)] = to_lua(e)
            return t
        return x

    def pack(*args: Any) -> Result:
        if not args:
            return _fail("MessagePack pack needs input.")
        out = bytearray()
        for a in args:
            _mp_pack(a, out)
        return _ok(bytes(out))

    def unpack_full(data: Any, limit: int, offset: int, with_offset: bool) -> Result:
        if type(data) is not bytes:
            return _fail("bad argument #1 to 'unpack' (string expected)")
        if offset < 0 or limit < 0 or offset > len(data):
            return _fail(f"Invalid request to unpack with offset of {offset} and limit of {limit}.")
        u = msgpack.Unpacker(raw=True, strict_map_key=False, use_list=True)
        u.feed(data[offset:])
        out: list[Any] = []
        try:
            while not limit or len(out) < limit:
                try:
                    out.append(to_lua(u.unpack()))
                except msgpack.OutOfData:
                    if u.tell() < len(data) - offset:
                        return _fail("Missing bytes in input.")
                    break
        except Exception:
            return _fail("Bad data format in input.")
        if with_offset:
            end = offset + u.tell()
            return _ok(-1 if end >= len(data) else end, *out)
        return _ok(*out)

    def unpack(data: Any = None) -> Result:
        return unpack_full(data, 0, 0, False)

    def unpack_one(data: Any = None, offset: Any = 0) -> Result:
        return unpack_full(data, 1, int(offset or 0), True)

    def unpack_limit(data: Any = None, limit: Any = 0, offset: Any = 0) -> Result:
        return unpack_full(data, int(limit or 0), int(offset or 0), True)

    return {
        b"pack": pack,
        b"unpack": unpack,
        b"unpack_one": unpack_one,
        b"unpack_limit": unpack_limit,
    }


# -- struct -------------------------------------------------------------------------

_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8}


def _struct_items(fmt: bytes) -> list[tuple[str, int]]:
    """The format as (code, size) items; '<', '>', '=' and '!n' as codes too."""
    items: list[tuple[str, int]] = []
    s = fmt.decode("latin-1")
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        num = int(s[i:j]) if j > i else None
        if c in "iIc!":
            i = j
        if c in "<>=":
            items.append((c, 0))
        elif c == "!":
            items.append((c, num or 8))
        elif c in "iI":
            items.append((c, num or 4))
        elif c == "c":
            items.append((c, 1 if num is None else num))
        elif c in _SIZES:
            items.append((c, _SIZES[c]))
        elif c in "xs ":
            items.append((c, 1 if c == "x" else 0))
        else:
            raise ValueError(f"invalid format option '{c}'")
    return items


def _struct_steps(fmt: bytes) -> Iterator[tuple[str, int, bool, int]]:
    """The format's items (code, size, little endian, padding before it when the
    format asks for alignment with '!'); '<', '>', '=' and '!' only set the state."""
    little, align = True, 1
    for c, n in _struct_items(fmt):
        if c in "<>=":
            little = c != ">"
        elif c == "!":
            align = n
        elif c != " ":
            yield c, n, little, min(n, align) if c in "bBhHlLTiI" and align > 1 else 1


def _struct_table() -> dict[bytes, Any]:
    def pack(fmt: Any = None, *args: Any) -> Result:
        try:
            out = bytearray()
            k = 0
            for c, n, little, a in _struct_steps(fmt):
                out += b"\0" * ((-len(out)) % a)
                if c == "x":
                    out.append(0)
                    continue
                v = args[k]
                k += 1
                if c == "s":
                    out += v + b"\0"
                elif c == "c":
                    out += v if n == 0 else v[:n].ljust(n, b"\0")
                elif c in "fd":
                    out += pystruct.pack(("<" if little else ">") + c, float(v))
                else:
                    v = int(float(v)) & ((1 << (8 * n)) - 1)
                    out += v.to_bytes(n, "little" if little else "big")
            return _ok(bytes(out))
        except (ValueError, IndexError, TypeError) as e:
            return _fail(str(e))

    def unpack(fmt: Any = None, data: Any = None, pos: Any = 1) -> Result:
        try:
            i = int(pos) - 1
            values: list[Any] = []
            last = 0
            for c, n, little, a in _struct_steps(fmt):
                i += (-i) % a
                if c == "x":
                    i += 1
                elif c == "s":
                    end = data.index(b"\0", i)
                    values.append(data[i:end])
                    i = end + 1
                elif c == "c":
                    n = n or last
                    if i + n > len(data):
                        raise ValueError("data string too short")
                    values.append(data[i : i + n])
                    i += n
                elif c in "fd":
                    (v,) = pystruct.unpack_from(("<" if little else ">") + c, data, i)
                    values.append(v)
                    i += n
                else:
                    if i + n > len(data):
                        raise ValueError("data string too short")
                    v = int.from_bytes(data[i : i + n], "little" if little else "big")
                    if c in "bhli" and v >= 1 << (8 * n - 1):
                        v -= 1 << (8 * n)
                    values.append(v)
                    last = v
                    i += n
            return _ok(*values, i + 1)
        except (ValueError, IndexError, TypeError) as e:
            return _fail(str(e))

    def size(fmt: Any = None) -> Result:
        try:
            total = 0
            for c, n, _little, a in _struct_steps(fmt):
                total += (-total) % a
                if c != "s":
                    total += n
            return _ok(total)
        except ValueError as e:
            return _fail(str(e))

    return {b"pack": pack, b"unpack": unpack, b"size": size}


class LuaRaise(Exception):
    """Raised by a Python function Lua called: Lua sees an error carrying `value`
    (an error table, or a message the error handler prefixes with ERR)."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def _wrap(f: Callable[..., Result], where: Callable[[], bytes]) -> Callable[..., Any]:
    def g(*args: Any) -> Any:
        r = f(*args)
        if not r[0]:
            raise LuaRaise(where() + r[1])  # as luaL_error: the caller's position
        return r[1] if len(r) == 2 else (r[1:] if len(r) > 2 else None)

    return g


def load(lua: Any, where: Callable[[], bytes]) -> dict[bytes, Any]:
    """The four libraries as Lua tables of functions, by global name."""
    null = lua.eval("newproxy()")
    tables = {
        b"bit": _bit_table(),
        b"cjson": _cjson_table(_Codec(lua, null)),
        b"cmsgpack": _cmsgpack_table(lua),
        b"struct": _struct_table(),
    }
    return {
        name: lua.table_from(
            {k: (_wrap(f, where) if lupa.lua_type(f) is None else f) for k, f in fns.items()}
        )
        for name, fns in tables.items()
    }
