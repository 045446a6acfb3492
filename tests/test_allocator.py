"""The C allocator's tuning (commands/allocator.py): with glibc's mmap threshold fixed,
large buffers freed between long-lived small objects go back to the system; with
glibc's default (a threshold raised by every large free) they stay resident.

Each case runs in a fresh interpreter, so that the allocator's state is its own, and
loads commands/allocator.py alone: importing the package would map the compiled build's
shared library, and where the interpreter's heap then lies decides whether glibc can
give freed heap memory back anyway (it did in some layouts, so the untuned case proved
nothing about the tuning)."""

from __future__ import annotations

import subprocess
import sys

from commands import allocator

PROGRAM = """
import importlib.util
import sys
spec = importlib.util.spec_from_file_location("allocator", sys.argv[2])
allocator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(allocator)
if sys.argv[1] == "tune":
    assert allocator.tune()

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024

first = bytes(6_000_000)
del first  # untuned, glibc now serves blocks of this size from its heap
keep, large = [], []
for i in range(25):  # 150 MB of large buffers, each followed by a small keeper
    large.append(bytearray(6_000_000))
    keep.append(bytearray(2000))
loaded = rss_mib()
del large
print(loaded, rss_mib())
"""


def _rss_before_after(mode: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode, allocator.__file__],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]), int(out[1])


def test_freed_large_buffers_leave_the_process_once_tuned() -> None:
    assert allocator.tune()  # Debian's glibc: the platform the server is built for
    loaded, freed = _rss_before_after("tune")
    assert loaded - freed >= 120  # the 150 MB went back
    loaded, freed = _rss_before_after("plain")
    assert loaded - freed < 20  # glibc's default keeps them in its heap
