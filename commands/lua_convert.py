"""Replies and Lua values, both ways, as Redis converts them: a command's reply as
Lua sees it (redisProtocolToLuaType, for the RESP the script chose with
redis.setresp) and a script's value as the caller's reply (luaReplyToRedisReply)."""

from __future__ import annotations

from typing import Any

import lupa.lua51 as lupa

from commands.parsing import format_double
from commands.replies import NULL_ARRAY, BigNumber, Encoded, ErrorReply, Push, Simple, Verbatim
from commands.resp import encode

MAX_REPLY_DEPTH = 256  # nesting of a script's reply (Python's stack bounds ours)


def error_text(reply: bytes) -> bytes:
    """Redis' luaPushErrorBuff: `-CODE msg` or `msg` as the `err` field ("CODE msg")."""
    if reply[:1] == b"-":
        code, sep, msg = reply[1:].partition(b" ")
        if not sep:
            code, msg = b"ERR", reply[1:]
    else:
        code, msg = b"ERR", reply
    return code + b" " + msg.strip(b"\r\n")


def to_lua(lua: Any, r: Any, resp: int) -> Any:
    """A command's reply as Lua sees it (Redis' redisProtocolToLuaType)."""
    t = type(r)
    if t is bytes or t is int:
        return r
    if r is None or r is NULL_ARRAY:
        return False if resp == 2 else None
    if t is Simple:
        return lua.table_from({b"ok": bytes(r)})
    if t is ErrorReply:
        return lua.table_from({b"err": error_text(b"-" + bytes(r))})
    if t is list or t is tuple or t is Push:
        return lua.table_from([to_lua(lua, x, resp) for x in r])
    if t is bool:
        if resp == 2:  # RESP2 has no booleans: Redis sends :1 and :0
            return 1 if r else 0
        return r
    if t is float:
        if resp == 2:
            return format_double(r)
        return lua.table_from({b"double": r})
    if t is Verbatim:
        if resp == 2:
            return bytes(r)
        return lua.table_from(
            {b"verbatim_string": lua.table_from({b"format": b"txt", b"string": bytes(r)})}
        )
    if isinstance(r, dict):
        if resp == 2:
            flat: list[Any] = []
            for k, v in r.items():
                flat.append(to_lua(lua, k, resp))
                flat.append(to_lua(lua, v, resp))
            return lua.table_from(flat)
        m = lua.table_from({})
        for k, v in r.items():
            m[to_lua(lua, k, resp)] = to_lua(lua, v, resp)
        return lua.table_from({b"map": m})
    if isinstance(r, set | frozenset):
        if resp == 2:
            return lua.table_from([to_lua(lua, x, resp) for x in r])
        st = lua.table_from({})
        for x in r:
            st[to_lua(lua, x, resp)] = True
        return lua.table_from({b"set": st})
    if t is Encoded:
        return to_lua(lua, parse_resp(bytes(r)), resp)
    if t is BigNumber:
        return bytes(r) if resp == 2 else lua.table_from({b"big_number": bytes(r)})
    if isinstance(r, bytes | bytearray | memoryview):
        return bytes(r)
    if isinstance(r, int):
        return int(r)
    if isinstance(r, list | tuple):
        return lua.table_from([to_lua(lua, x, resp) for x in r])
    return False if resp == 2 else None


def to_resp(
    rawget: Any,
    v: Any,
    caller_resp: int,
    script_resp: int,
    out: list[bytes],
    depth: int = 0,
    errors: list[bytes] | None = None,
) -> None:
    """A script's return value as the caller's reply (Redis' luaReplyToRedisReply)."""
    if v is None:
        out.append(b"$-1\r\n" if caller_resp == 2 else b"_\r\n")
        return
    t = type(v)
    if t is bytes:
        out.append(b"$%d\r\n%b\r\n" % (len(v), v))
    elif t is bool:
        if script_resp == 2:
            if v:
                out.append(b":1\r\n")
            else:
                out.append(b"$-1\r\n" if caller_resp == 2 else b"_\r\n")
        else:
            encode(v, caller_resp, out)
    elif t is int or t is float:
        out.append(b":%d\r\n" % _truncate(v))
    elif lupa.lua_type(v) == "table":
        _table_to_resp(rawget, v, caller_resp, script_resp, out, depth, errors)
    else:
        out.append(b"$-1\r\n" if caller_resp == 2 else b"_\r\n")


def _table_to_resp(
    rawget: Any,
    v: Any,
    caller_resp: int,
    script_resp: int,
    out: list[bytes],
    depth: int,
    errors: list[bytes] | None,
) -> None:
    if depth >= MAX_REPLY_DEPTH:
        # Redis runs out of Lua stack on a table nested this deep (or holding
        # itself): that element is this error.
        out.append(b"-ERR reached lua stack limit\r\n")
        return
    err = rawget(v, b"err")
    if type(err) is bytes:
        encode(ErrorReply(err), caller_resp, out)
        if errors is not None and rawget(v, b"ignore_error_stats_update") is not True:
            errors.append(err)  # counted in INFO errorstats (a command's was already)
        return
    ok = rawget(v, b"ok")
    if type(ok) is bytes:
        out.append(b"+%b\r\n" % ok.replace(b"\r", b" ").replace(b"\n", b" "))
        return
    d = rawget(v, b"double")
    if type(d) is int or type(d) is float:
        encode(float(d), caller_resp, out)
        return
    big = rawget(v, b"big_number")
    if type(big) is bytes:
        big = big.replace(b"\r", b" ").replace(b"\n", b" ")
        if caller_resp == 2:
            out.append(b"$%d\r\n%b\r\n" % (len(big), big))
        else:
            out.append(b"(%b\r\n" % big)
        return
    verb = rawget(v, b"verbatim_string")
    if lupa.lua_type(verb) == "table":
        fmt = rawget(verb, b"format")
        text = rawget(verb, b"string")
        if type(fmt) is bytes and type(text) is bytes:
            if caller_resp == 2:
                out.append(b"$%d\r\n%b\r\n" % (len(text), text))
            else:
                out.append(b"=%d\r\n%b:%b\r\n" % (len(text) + 4, fmt[:3], text))
            return
    m = rawget(v, b"map")
    if lupa.lua_type(m) == "table":
        items = list(m.items())
        if caller_resp == 2:
            out.append(b"*%d\r\n" % (2 * len(items)))
        else:
            out.append(b"%%%d\r\n" % len(items))
        for k, x in items:
            to_resp(rawget, k, caller_resp, script_resp, out, depth + 1, errors)
            to_resp(rawget, x, caller_resp, script_resp, out, depth + 1, errors)
        return
    s = rawget(v, b"set")
    if lupa.lua_type(s) == "table":
        keys = list(s.keys())
        out.append((b"*%d\r\n" if caller_resp == 2 else b"~%d\r\n") % len(keys))
        for k in keys:
            to_resp(rawget, k, caller_resp, script_resp, out, depth + 1, errors)
        return
    at = len(out)
    out.append(b"")
    n = 0
    while True:
        x = rawget(v, n + 1)
        if x is None:
            break
        to_resp(rawget, x, caller_resp, script_resp, out, depth + 1, errors)
        n += 1
    out[at] = b"*%d\r\n" % n


def _truncate(x: float) -> int:
    """C's (long long) cast of a Lua number."""
    if x != x or x in (float("inf"), float("-inf")) or not -(2**63) <= x < 2**63:
        return -(2**63)
    return int(x)


def parse_resp(data: bytes) -> Any:
    """Decode one encoded reply back into reply values (for `Encoded` replies)."""
    value, _ = _parse(data, 0)
    return value


def _parse(data: bytes, pos: int) -> tuple[Any, int]:
    end = data.index(b"\r\n", pos)
    kind = data[pos : pos + 1]
    line = data[pos + 1 : end]
    pos = end + 2
    if kind == b"$" or kind == b"=":
        n = int(line)
        if n < 0:
            return None, pos
        body = data[pos : pos + n]
        if kind == b"=":
            return Verbatim(body[4:]), pos + n + 2
        return body, pos + n + 2
    if kind == b":":
        return int(line), pos
    if kind == b"+":
        return Simple(line), pos
    if kind == b"-":
        return ErrorReply(line), pos
    if kind == b"_":
        return None, pos
    if kind == b",":
        return float(line), pos
    if kind == b"#":
        return line == b"t", pos
    if kind == b"(":
        return BigNumber(line), pos
    n = int(line)
    if kind == b"|":  # attributes: skipped, as Redis' Lua conversion does
        for _ in range(2 * n):
            _, pos = _parse(data, pos)
        return _parse(data, pos)
    if n < 0:
        return NULL_ARRAY, pos
    if kind == b"%":
        d: dict[Any, Any] = {}
        for _ in range(n):
            k, pos = _parse(data, pos)
            d[k], pos = _parse(data, pos)
        return d, pos
    items = []
    for _ in range(n):
        x, pos = _parse(data, pos)
        items.append(x)
    return items, pos
