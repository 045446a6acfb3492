"""`RequestReader`: a connection's input as requests, sans I/O.

`feed(data)` returns the requests complete so far and the protocol error that ends
the connection, if any; the connection never knows which parser answered. Two
parsers behind it: hiredis' C reader reads every buffered multibulk request at once
(the fast path; a read of nothing but whole canonical requests, as one array, in one
call: `_whole_requests`); the exact `commands.resp.RequestParser` reads inline requests,
counts of a million or more, and finds Redis' words for what is wrong with input
hiredis refuses (or accepts but Redis would not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import hiredis
from mypy_extensions import i64

from commands.errors import PROTOCOL_INVALID_BULK, PROTOCOL_UNAUTH_BULK, PROTOCOL_UNAUTH_MBULK
from commands.resp import UNAUTH_MAX_ARGS, UNAUTH_MAX_BULK, ProtocolError, RequestParser

if TYPE_CHECKING:
    from commands.session import Session

CHECK_SMALL = 65536
# A multibulk header with a count of a million or more: read by the exact parser,
# never by hiredis (see `feed`). Found as a "*" and seven digits anywhere in the input:
# with every digit read as "0" (`bytes.translate`), as b"*0000000" (`in`: both loops in
# C; measured about as costly as the regex `\*[0-9]{7}`, ~50 instructions a GET fewer
# at -P 16). A match inside a payload only sends that input to the exact parser.
_DIGITS_AS_ZERO: Final = bytes(48 if 48 <= b <= 57 else b for b in range(256))
_BIG_HEADER: Final = b"*0000000"
# `since` keeps the input of the request in progress (up to the query buffer limit,
# as hiredis does), so the exact parser can always take over from its start; past
# this size the check for non-canonical encodings no longer re-reads it per chunk.
DIAGNOSE_LIMIT = 1024 * 1024
# Past client-query-buffer-limit Redis closes the connection without a reply.
QUERY_BUFFER_OVERFLOW = ProtocolError("query buffer limit")


# The headers of small counts and lengths, made once: formatting them per request
# cost more than the rest of reading it.
# Final: compiled, C statics (no module dict lookup per header).
_COUNT_HEADERS: Final = [b"*%d\r\n" % n for n in range(64)]
_LENGTH_HEADERS: Final = [b"$%d\r\n" % n for n in range(1024)]


def _encode_frame(frame: list[bytes]) -> bytes:
    n = len(frame)
    parts = [_COUNT_HEADERS[n] if n < 64 else b"*%d\r\n" % n]
    for a in frame:
        m = len(a)
        parts.append(_LENGTH_HEADERS[m] if m < 1024 else b"$%d\r\n" % m)
        parts.append(a)
        parts.append(b"\r\n")
    return b"".join(parts)


def _whole_requests(data: bytes) -> int:
    """How many requests `data` is, if it is nothing but complete requests in Redis'
    canonical encoding (each an array of 1 to 999,999 bulk strings, no leading zeros),
    else -1. hiredis reads such input as Redis does, so `feed` can have it read all of
    it as one array (one `gets` call for a pipeline, not one per request), and no count
    of a million or more is in a header hiredis reads (payloads are skipped, not
    searched). Anything else returns -1 and takes the general path. Native integers
    (i64) throughout: compiled, a byte read is an inline range check and a load."""
    n: i64 = len(data)
    i: i64 = 0
    k: i64 = 0
    c: i64 = 0
    while i < n:
        if data[i] != 42:  # "*"
            return -1
        i += 1
        if i >= n or data[i] == 48:  # no digit, or a leading zero (or a count of 0)
            return -1
        count: i64 = 0
        j: i64 = i
        while j < n and j - i < 7:  # at most 7 digits read: no overflow
            c = data[j]
            if c < 48 or c > 57:
                break
            count = count * 10 + c - 48
            j += 1
        if j == i or j - i > 6 or j + 1 >= n or data[j] != 13 or data[j + 1] != 10:
            return -1
        i = j + 2
        while count > 0:
            count -= 1
            if i >= n or data[i] != 36:  # "$"
                return -1
            i += 1
            size: i64 = 0
            j = i
            while j < n and j - i < 11:
                c = data[j]
                if c < 48 or c > 57:
                    break
                size = size * 10 + c - 48
                j += 1
            if j == i or j - i > 10 or (data[i] == 48 and j - i > 1):
                return -1
            if j + 1 >= n or data[j] != 13 or data[j + 1] != 10:
                return -1
            i = j + 2 + size
            if i + 1 >= n or data[i] != 13 or data[i + 1] != 10:
                return -1
            i += 2
        k += 1
    return k


def _big_count(data: bytes) -> bool:
    if len(data) >= 8 and data[0] == 42:  # "*" and seven digits
        i = 1
        while i < 8 and 48 <= data[i] <= 57:
            i += 1
        if i == 8:
            return True
    # The search only where a "*" follows the first byte (one request without one, the
    # common read at pipeline 1, skips it). Both tests of one byte are a memchr; for a
    # short read `in` on a copy costs less than `find`'s method call (~1,000
    # instructions per read), for a long one the copy would not.
    star = 42 in data[1:] if len(data) <= 4096 else data.find(42, 1) >= 0
    return star and _BIG_HEADER in data.translate(_DIGITS_AS_ZERO)


def _unauthenticated_limits(
    out: list[list[bytes]], err: ProtocolError | None, max_bulk: int
) -> tuple[list[list[bytes]], ProtocolError | None]:
    """The limits `RequestParser` applies to a client that must authenticate
    (`UNAUTH_MAX_ARGS`, `UNAUTH_MAX_BULK`, and proto-max-bulk-len before them) applied
    to the complete requests hiredis read, as Redis applies them while parsing each: up
    to the first AUTH or HELLO, after which Redis parses with whatever that command made
    of the client (the exact parser checks the start of an incomplete request)."""
    for j, req in enumerate(out):
        if len(req) > UNAUTH_MAX_ARGS:
            return out[:j], ProtocolError(PROTOCOL_UNAUTH_MBULK)
        for arg in req:
            if len(arg) > max_bulk:
                return out[:j], ProtocolError(PROTOCOL_INVALID_BULK)
            if len(arg) > UNAUTH_MAX_BULK:
                return out[:j], ProtocolError(PROTOCOL_UNAUTH_BULK)
        if req[0].lower() in (b"auth", b"hello"):
            break
    return out, err


class RequestReader:
    """One client's request stream. The session gives the limits in force when each
    chunk is read: whether it is authenticated (Redis caps what an unauthenticated
    client may declare), proto-max-bulk-len and client-query-buffer-limit."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.hiredis = hiredis.Reader()
        self.exact: RequestParser | None = None  # in use while not on the fast path
        self.partial = False  # hiredis holds part of a request
        self.since: list[bytes] = []  # input since the last request boundary
        self.since_len = 0
        self.frames_since = 0
        self.partial_head: bytes | None = None  # start of the incomplete request

    def clear(self) -> None:
        """Drop every buffered byte (the connection is closed)."""
        self.hiredis = hiredis.Reader()
        self.exact = None
        self.since = []
        self.partial_head = None

    def _exact_parser(self) -> RequestParser:
        s = self.session
        p = RequestParser()
        p.authed = s.authenticated
        p.max_bulk = s.server.limits.proto_max_bulk
        return p

    def feed(self, data: bytes) -> tuple[list[list[bytes]], ProtocolError | None]:
        """The requests `data` completes, in order, and the error that ends the
        connection (`QUERY_BUFFER_OVERFLOW`: close without a reply; any other: reply
        with its text, then close) or None. Empty requests (*0, *-1, blank lines)
        are skipped, as Redis does."""
        out, err = self._feed(data)
        s = self.session
        if s.authenticated or not out:
            return out, err
        return _unauthenticated_limits(out, err, s.server.limits.proto_max_bulk)

    def _feed(self, data: bytes) -> tuple[list[list[bytes]], ProtocolError | None]:
        s = self.session
        if self.exact is None and not self.partial and data[:1] != b"*":
            self.exact = RequestParser()
        if self.exact is not None:
            p = self.exact
            p.authed = s.authenticated
            p.max_bulk = s.server.limits.proto_max_bulk
            p.feed(data)
            taken = p.parse()
            if p.pending_error is None and len(p) == 0:
                self.exact = None  # back to the fast path on a clean boundary
            elif len(p) > s.server.limits.query_buffer:
                return taken, QUERY_BUFFER_OVERFLOW
            return taken, p.pending_error
        was_partial = self.partial
        if not was_partial:
            self.since = [data]
            self.since_len = len(data)
            self.frames_since = 0
        else:
            self.since.append(data)
            self.since_len += len(data)
        if not was_partial:
            k = _whole_requests(data)
            if k > 0:
                return self._read_whole(data, k)
        if _big_count(data):
            # hiredis allocates an array for its whole count as soon as it reads the
            # header (and freeing it walks every slot): a count of millions, at the
            # top or nested, would cost gigabytes and seconds. The exact parser reads
            # from the last request boundary instead, lazily, and stays in charge
            # until the next clean boundary (a match inside a payload only costs that).
            return self._diagnose(self.frames_since)
        reader = self.hiredis
        reader.feed(data)
        # Bound once: a call per request without looking the method up by name.
        gets = reader.gets
        out: list[list[bytes]] = []
        refused = False
        try:
            while True:
                req = gets()
                # A request (a list of bulk strings) first: a type test and a size read
                # where the truth test of an untyped object was a generic call.
                if type(req) is not list or not len(req):
                    if req is False:
                        break
                    if not req:  # *0 and *-1 are empty requests, skipped as Redis does
                        continue
                    raise hiredis.ProtocolError("not an array of bulk strings")
                for arg in req:  # a loop in C when compiled (a set of types is not)
                    if type(arg) is not bytes:
                        raise hiredis.ProtocolError("not an array of bulk strings")
                out.append(req)
        except hiredis.ProtocolError:
            refused = True
        if refused:
            # Outside the except block: an error raised while diagnosing must not carry
            # hiredis' exception (and the frame holding this input) as its context.
            extra, err = self._diagnose(self.frames_since + len(out))
            return out + extra, err
        before = self.frames_since
        self.frames_since += len(out)
        if reader.has_data():
            self.partial = True
        elif out and self._ends_with_frame(data, out[-1]):
            self.partial = False
        elif self.since_len < DIAGNOSE_LIMIT:
            # Either hiredis holds part of a request, or it accepted something Redis
            # would not (a non-canonical encoding): let the exact parser decide.
            p = self._exact_parser()
            p.feed(b"".join(self.since))
            valid = len(p.parse())
            if p.pending_error is not None:
                return out[: max(0, valid - before)], p.pending_error
            self.partial = len(p) > 0
        else:
            self.partial = True
        if self.partial:
            # Redis rejects a bad multibulk count or bulk length (or an endless header)
            # before the rest of the request arrives; hiredis would wait for it. Check
            # the start of the incomplete request while it is small.
            head = self.partial_head
            if out:
                enc = _encode_frame(out[-1])
                i = data.rfind(enc)
                head = data[i + len(enc) :] if i >= 0 else None
            elif not was_partial:
                head = data
            elif head is not None:
                head += data
            if head:
                # The start is enough: a bad count or length comes first.
                check = self._exact_parser()
                check.feed(head[: 2 * CHECK_SMALL + 2])
                check.parse()
                if check.pending_error is not None:
                    return out, check.pending_error
            if head is not None and len(head) > 2 * CHECK_SMALL + 2:
                head = None
            self.partial_head = head
            if reader.len() > s.server.limits.query_buffer:
                return out, QUERY_BUFFER_OVERFLOW
        return out, None

    def _read_whole(self, data: bytes, k: int) -> tuple[list[list[bytes]], ProtocolError | None]:
        """`data` is `k` whole requests (`_whole_requests`): hiredis reads them as the
        elements of one array, a header put in front of them."""
        reader = self.hiredis
        reader.feed((_COUNT_HEADERS[k] if k < 64 else b"*%d\r\n" % k) + data)
        try:
            out = reader.gets()
        except hiredis.ProtocolError:
            out = None
        if type(out) is not list or len(out) != k:  # never, for canonical requests
            return self._diagnose(self.frames_since)
        self.frames_since += k
        self.partial = False
        return out, None

    def held(self) -> int:
        """Bytes of an incomplete request held (CLIENT LIST's qbuf)."""
        if self.exact is not None:
            return len(self.exact)
        return self.hiredis.len() if self.partial else 0

    def _ends_with_frame(self, data: bytes, frame: list[bytes]) -> bool:
        """Does the input end with `frame`'s canonical encoding (so hiredis read nothing
        Redis would refuse)? A frame longer than this chunk began in earlier chunks:
        compare it with the input since the last boundary, not with this chunk alone."""
        enc = _encode_frame(frame)
        if len(enc) <= len(data):
            return data.endswith(enc)
        tail: list[bytes] = []
        size = 0
        for piece in reversed(self.since):
            tail.append(piece)
            size += len(piece)
            if size >= len(enc):
                break
        return b"".join(reversed(tail)).endswith(enc)

    def _diagnose(self, taken: int) -> tuple[list[list[bytes]], ProtocolError | None]:
        """hiredis refused the input (or must not read it). Re-read it from the last
        request boundary with the exact parser: it finds inline requests hiredis
        cannot read (and carries on with the rest), or Redis' exact words for what is
        wrong."""
        self.hiredis = hiredis.Reader()
        self.partial = False
        p = self._exact_parser()
        p.feed(b"".join(self.since))
        valid = p.parse()
        if p.pending_error is None and len(p):
            self.exact = p  # finish the incomplete request on the exact path
        return valid[taken:], p.pending_error
