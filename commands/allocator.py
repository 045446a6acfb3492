"""The C allocator under the interpreter (glibc's malloc): its tuning at start-up and
MEMORY PURGE's trim.

glibc serves a request of at least `M_MMAP_THRESHOLD` bytes with its own `mmap`,
returned to the system when freed, and smaller ones from its heap, which keeps freed
memory for reuse. The threshold starts at 128 KiB, but glibc raises it (up to 32 MiB)
each time such a block is freed, so after the first large buffers are freed (a
pipelined load's socket reads, a segment's body) the next ones land in the heap and
stay there as holes between long-lived objects: 1M keys loaded 1,000 commands per
request left 400 MiB resident where 366 MiB held the data. Setting the threshold
turns the raising off (mallopt(3)), as Redis' jemalloc returns large runs at once.
The server sets it once it has loaded (`proxy.cli.serve`): a replay, which frees and
allocates segment-sized buffers one after the other, runs 7-10 % faster reusing its
heap than mapping each buffer afresh.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from functools import cache
from typing import Any

M_MMAP_THRESHOLD = -3  # malloc.h
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept fixed


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
