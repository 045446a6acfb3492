"""The C allocator under the interpreter (glibc's malloc): its tuning once the server
has loaded, and MEMORY PURGE's trim.

glibc serves a request of at least `M_MMAP_THRESHOLD` bytes with its own `mmap`,
returned to the system when freed, and smaller ones from its heap, which keeps freed
memory for reuse. The threshold starts at 128 KiB, but glibc raises it (up to 32 MiB)
each time such a block is freed, so after the first large buffers are freed (a
segment's body: a few MiB per flush under a bulk load) the next ones land in the heap
and stay there as holes between long-lived keys: 1M keys loaded 1,000 commands per
request left 400 MiB resident. Setting the threshold turns the raising off
(mallopt(3)). At 4 MiB the same load leaves 375 MiB (at 128 KiB 366 MiB, but a reply
of millions of elements, built and freed in chunks of a few hundred KiB to a few MiB,
then maps and faults in every chunk: SRANDMEMBER key -5000000 took 0.77 s against
0.48 s; at 4 MiB 0.48 s).

The server sets it once it has loaded (`proxy.cli.serve`): a replay, which frees and
allocates segment-sized buffers one after the other, runs faster reusing its heap.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from functools import cache
from typing import Any

M_MMAP_THRESHOLD = -3  # malloc.h
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024


@cache
def _libc() -> Any:
    """The C library, if it is glibc (has mallopt and malloc_trim), else None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 - glibc only
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def tune() -> bool:
    """Fix the mmap threshold (no dynamic raising); False where the C library is
    not glibc."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trim() -> None:
    """Give free heap memory back to the system (malloc_trim(0))."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(OSError):
            libc.malloc_trim(0)
