"""Random sampling with replacement for huge counts (SRANDMEMBER, ZRANDMEMBER and
HRANDFIELD with a negative count): each distinct element is encoded once for the
connection's protocol, then picks are joined in C (`random.randbytes` for the
indices, `map` over the pre-encoded fragments), in slices of `SLICE` picks with the
event loop let in between, so a 20-million-element reply neither costs a Python
encode per element nor holds other clients for its whole length.
"""

from __future__ import annotations

import asyncio
import operator
import random
from array import array
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any

from commands.errors import CommandError
from commands.replies import Encoded, Frames, Reply, deferred
from commands.resp import encode_reply
from commands.session import Session

SLICE = 1 << 15  # picks per slice (about 10 ms of work at most)
# A reply of more than this many bytes is refused rather than built (Redis would try,
# and run out of memory first).
MAX_REPLY_BYTES = 1 << 34
TOO_LARGE = "ERR reply of {} elements would be larger than {} bytes"


def fragments(s: Session, items: Sequence[Any]) -> list[bytes]:
    """Each item encoded once for this connection's protocol."""
    resp = s.resp
    return [encode_reply(x, resp) for x in items]


def _picks(frags: list[bytes], k: int) -> bytes:
    """k fragments picked uniformly with replacement, joined."""
    n = len(frags)
    width = "I" if n < 1 << 16 else "Q"  # modulo bias at most n / 2**32 (or 2**64)
    idx = array(width, random.randbytes(k * (4 if width == "I" else 8)))
    return b"".join(map(frags.__getitem__, map(operator.mod, idx, repeat(n))))


def _slices(frags: list[bytes], k: int) -> Iterator[bytes]:
    while k > 0:
        c = min(k, SLICE)
        yield _picks(frags, c)
        k -= c


def sample_reply(s: Session, frags: list[bytes], k: int, per_pick: int = 1) -> Reply:
    """An array of `k` picks with replacement from pre-encoded `frags`, each pick
    counting `per_pick` elements of the array (2 for RESP2's flat pairs)."""
    biggest = max(map(len, frags))
    if k * biggest > MAX_REPLY_BYTES:
        raise CommandError(TOO_LARGE.format(k * per_pick, MAX_REPLY_BYTES))
    header = b"*%d\r\n" % (k * per_pick)
    if k <= SLICE or s.in_exec:
        return Encoded(header + b"".join(_slices(frags, k)))

    async def build() -> Reply:
        parts = Frames([Encoded(header)])
        for part in _slices(frags, k):
            parts.append(Encoded(part))
            await asyncio.sleep(0)  # let other clients in between slices
        return parts

    return deferred(build)
