"""The RESP codec, sans I/O: the bottom layer both `commands` and `proxy` use.

Requests: `RequestParser` is the exact parser (multibulk and inline, with Redis'
limits and the protocol error texts of `commands.errors`); `split_inline` splits an
inline request (ACL rules use it too). `proxy.reader.RequestReader` puts hiredis' C
reader in front of this parser as its fast path.
Replies: `encode` turns handler results (`commands.replies`) into RESP2 or RESP3 bytes.
"""

from __future__ import annotations

from typing import Any

from commands.errors import (
    PROTOCOL_BIG_BULK_COUNT,
    PROTOCOL_BIG_INLINE,
    PROTOCOL_BIG_MBULK_COUNT,
    PROTOCOL_EXPECTED_DOLLAR,
    PROTOCOL_INVALID_BULK,
    PROTOCOL_INVALID_MULTIBULK,
    PROTOCOL_UNAUTH_BULK,
    PROTOCOL_UNAUTH_MBULK,
    PROTOCOL_UNBALANCED_QUOTES,
)
from commands.limits import PROTO_MAX_BULK_DEFAULT
from commands.parsing import format_double, string2ll
from commands.replies import (
    NULL_ARRAY,
    BigNumber,
    Encoded,
    ErrorReply,
    Frames,
    Push,
    Simple,
    Verbatim,
)

INLINE_MAX = 64 * 1024
PROTO_MAX_BULK_LEN = PROTO_MAX_BULK_DEFAULT  # until CONFIG SET proto-max-bulk-len
INT_MAX = 2**31 - 1
# What a client that must still authenticate may declare (Redis' processMultibulkBuffer):
# arguments per request, and bytes per argument.
UNAUTH_MAX_ARGS = 10
UNAUTH_MAX_BULK = 16384


class ProtocolError(Exception):
    """Malformed input: reply with `text`, then close (as Redis does)."""

    def __init__(self, text: str) -> None:
        # One byte per character: a byte quoted from the input goes back as it came.
        self.text = text.encode("latin-1")
        super().__init__(text)


_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = b"0123456789abcdefABCDEF"


def split_inline(line: bytes) -> list[bytes]:
    """Redis' sdssplitargs: words, "double quoted" with escapes, 'single quoted'."""
    args: list[bytes] = []
    i = 0
    n = len(line)
    while True:
        while i < n and line[i] in b" \n\r\t\x0b\x0c\x00":
            i += 1
        if i >= n:
            return args
        cur = bytearray()
        inq = insq = False
        while True:
            if inq:
                if i >= n:
                    raise ProtocolError(PROTOCOL_UNBALANCED_QUOTES)
                c = line[i]
                if (
                    c == 92
                    and i + 3 < n
                    and line[i + 1] == ord("x")
                    and line[i + 2] in _HEX
                    and line[i + 3] in _HEX
                ):
                    cur.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 92 and i + 1 < n:
                    i += 1
                    cur.append(_ESCAPES.get(line[i], line[i]))
                elif c == 34:
                    if i + 1 < n and line[i + 1] not in b" \n\r\t\x0b\x0c\x00":
                        raise ProtocolError(PROTOCOL_UNBALANCED_QUOTES)
                    inq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    raise ProtocolError(PROTOCOL_UNBALANCED_QUOTES)
                c = line[i]
                if c == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    cur.append(39)
                elif c == 39:
                    if i + 1 < n and line[i + 1] not in b" \n\r\t\x0b\x0c\x00":
                        raise ProtocolError(PROTOCOL_UNBALANCED_QUOTES)
                    insq = False
                    i += 1
                    break
                else:
                    cur.append(c)
            else:
                if i >= n:
                    break
                c = line[i]
                if c in b" \n\r\t\x0b\x0c\x00":
                    break
                if c == 34:
                    inq = True
                elif c == 39:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        args.append(bytes(cur))


class RequestParser:
    """Incremental exact parser. `feed` bytes, then `parse` returns the complete
    requests; a malformed request raises ProtocolError after the good ones are
    taken (call `parse` again to get them first: see `pending_error`)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pos = 0
        self.authed = True
        self.max_bulk = PROTO_MAX_BULK_LEN  # proto-max-bulk-len
        self.pending_error: ProtocolError | None = None
        # An incomplete multibulk request: (its start, count, arguments read, where the
        # next argument starts), so a request of millions of arguments is read once,
        # not again from its start on every chunk.
        self._mb: tuple[int, int, list[bytes], int] | None = None

    def feed(self, data: bytes) -> None:
        if self.pos and self.pos == len(self.buf):
            self.buf.clear()
            self.pos = 0
        self.buf += data

    def __len__(self) -> int:
        return len(self.buf) - self.pos

    def parse(self) -> list[list[bytes]]:
        """Every complete request buffered. If bad input follows them, the error
        is left in `pending_error` (raise it after replying to these)."""
        out: list[list[bytes]] = []
        buf = self.buf
        n = len(buf)
        pos = self.pos
        try:
            while pos < n:
                if buf[pos] == 42:
                    req, pos = self._multibulk(buf, pos, n)
                else:
                    req, pos = self._inline(buf, pos, n)
                if req is None:
                    break
                if req:
                    out.append(req)
        except ProtocolError as e:
            # Without its traceback: the frames it holds refer back to this parser and
            # its buffer, a cycle only the (rarely run) cyclic GC would free.
            self.pending_error = e.with_traceback(None)
        self.pos = pos
        if pos > 65536 and pos * 2 > n:
            del self.buf[:pos]
            self.pos = 0
            if self._mb is not None:
                start, count, args, p = self._mb
                self._mb = (start - pos, count, args, p - pos)
        return out

    def _multibulk(self, buf: bytearray, pos: int, n: int) -> tuple[list[bytes] | None, int]:
        if self._mb is not None and self._mb[0] == pos:
            _start, count, args, p = self._mb
        else:
            nl = buf.find(b"\r", pos, pos + INLINE_MAX + 2)
            if nl < 0:
                if n - pos > INLINE_MAX:
                    raise ProtocolError(PROTOCOL_BIG_MBULK_COUNT)
                return None, pos
            if nl + 1 >= n:
                return None, pos
            declared = string2ll(bytes(buf[pos + 1 : nl]))
            if declared is None or declared > INT_MAX:
                raise ProtocolError(PROTOCOL_INVALID_MULTIBULK)
            count = declared
            if count > UNAUTH_MAX_ARGS and not self.authed:
                raise ProtocolError(PROTOCOL_UNAUTH_MBULK)
            p = nl + 2
            if count <= 0:
                return [], p
            args = []
        self._mb = (pos, count, args, p)
        while len(args) < count:
            if p >= n:
                self._mb = (pos, count, args, p)
                return None, pos
            nl = buf.find(b"\r", p, p + INLINE_MAX + 2)
            if nl < 0:
                if n - p > INLINE_MAX:
                    raise ProtocolError(PROTOCOL_BIG_BULK_COUNT)
                self._mb = (pos, count, args, p)
                return None, pos
            if nl + 1 >= n:
                self._mb = (pos, count, args, p)
                return None, pos
            if buf[p] != 36:
                # As Redis, CR and LF become spaces: an error line must stay one line.
                got = " " if buf[p] in (10, 13) else chr(buf[p])
                raise ProtocolError(PROTOCOL_EXPECTED_DOLLAR.format(got))
            ln = string2ll(bytes(buf[p + 1 : nl]))
            if ln is None or ln < 0 or ln > self.max_bulk:
                raise ProtocolError(PROTOCOL_INVALID_BULK)
            if ln > UNAUTH_MAX_BULK and not self.authed:
                raise ProtocolError(PROTOCOL_UNAUTH_BULK)
            start = nl + 2
            if start + ln + 2 > n:
                self._mb = (pos, count, args, p)
                return None, pos
            args.append(bytes(buf[start : start + ln]))
            p = start + ln + 2
        self._mb = None
        return args, p

    def _inline(self, buf: bytearray, pos: int, n: int) -> tuple[list[bytes] | None, int]:
        nl = buf.find(b"\n", pos)
        if nl < 0:
            if n - pos > INLINE_MAX:
                raise ProtocolError(PROTOCOL_BIG_INLINE)
            return None, pos
        end = nl - 1 if nl > pos and buf[nl - 1] == 13 else nl
        return split_inline(bytes(buf[pos:end])), nl + 1


# -- replies ----------------------------------------------------------------------


def encode(r: Any, resp: int, out: list[bytes]) -> None:
    """Append the RESP encoding of `r` to `out`."""
    t = type(r)
    if t is bytes:
        out.append(b"$%d\r\n%b\r\n" % (len(r), r))
    elif t is int:
        out.append(b":%d\r\n" % r)
    elif r is None:
        out.append(b"$-1\r\n" if resp == 2 else b"_\r\n")
    elif t is Simple:
        out.append(b"+%b\r\n" % r)
    elif t is list or t is tuple:
        out.append(b"*%d\r\n" % len(r))
        for x in r:
            encode(x, resp, out)
    elif t is ErrorReply:
        if b"\r" in r or b"\n" in r:
            # As Redis: an error quoting input stays one line, or it would end early
            # and the rest would read as further replies.
            r = r.replace(b"\r", b" ").replace(b"\n", b" ")
        out.append(b"-%b\r\n" % r)
    elif t is float:
        d = format_double(r)
        if resp == 2:
            out.append(b"$%d\r\n%b\r\n" % (len(d), d))
        else:
            out.append(b",%b\r\n" % d)
    elif isinstance(r, dict):
        # A map that repeats a key (XREAD STREAMS k k, COMMAND DOCS get get) is a dict
        # subclass with its own `__len__` and `items`: asked of the object itself (the
        # compiled build would read a plain dict's size).
        m: Any = r
        if resp == 2:
            out.append(b"*%d\r\n" % (2 * len(m)))
        else:
            out.append(b"%%%d\r\n" % len(m))
        for k, v in m.items():
            encode(k, resp, out)
            encode(v, resp, out)
    elif isinstance(r, set | frozenset):
        out.append((b"*%d\r\n" if resp == 2 else b"~%d\r\n") % len(r))
        for x in r:
            encode(x, resp, out)
    elif t is bool:
        if resp == 2:
            out.append(b":1\r\n" if r else b":0\r\n")
        else:
            out.append(b"#t\r\n" if r else b"#f\r\n")
    elif r is NULL_ARRAY:
        out.append(b"*-1\r\n" if resp == 2 else b"_\r\n")
    elif t is Verbatim:
        if resp == 2:
            out.append(b"$%d\r\n%b\r\n" % (len(r), r))
        else:
            out.append(b"=%d\r\ntxt:%b\r\n" % (len(r) + 4, r))
    elif t is Push:
        out.append((b"*%d\r\n" if resp == 2 else b">%d\r\n") % len(r))
        for x in r:
            encode(x, resp, out)
    elif t is Encoded:
        out.append(r)
    elif t is Frames:
        for x in r:
            encode(x, resp, out)
    elif t is bytearray or t is memoryview:
        out.append(b"$%d\r\n%b\r\n" % (len(r), r))
    elif t is BigNumber:
        out.append(b"$%d\r\n%b\r\n" % (len(r), r) if resp == 2 else b"(%b\r\n" % r)
    elif isinstance(r, int):
        out.append(b":%d\r\n" % r)
    elif isinstance(r, bytes):
        out.append(b"$%d\r\n%b\r\n" % (len(r), r))
    elif isinstance(r, list | tuple):
        out.append(b"*%d\r\n" % len(r))
        for x in r:
            encode(x, resp, out)
    else:
        raise TypeError(f"cannot encode reply of type {t.__name__}")


def encode_reply(r: Any, resp: int) -> bytes:
    out: list[bytes] = []
    encode(r, resp, out)
    return b"".join(out)


__all__ = [
    "INLINE_MAX",
    "ProtocolError",
    "RequestParser",
    "encode",
    "encode_reply",
    "split_inline",
]
