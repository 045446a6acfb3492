"""The dispatch path's instructions per command, for callgrind (no sockets, no threads,
no timers: the counts repeat run to run).

N `SET key:<i % 1000> xxx` run through `DISPATCHER.execute` on a fresh in-process
server (its store's records go to a counting sink), in batches of 16 as a connection
runs a pipelined batch (one clock read per batch start, as `Connection._run` does).
Run it twice under callgrind and divide the difference of the totals by the
difference of N, so start-up (imports, the first compilations) drops out:

    valgrind --tool=callgrind --callgrind-out-file=cg.small python -m bench.dispatch_count 2000
    valgrind --tool=callgrind --callgrind-out-file=cg.big python -m bench.dispatch_count 22000
    grep ^totals: cg.small cg.big        # (big - small) / 20000 = instructions per SET

Run it once without callgrind first, so the modules' bytecode caches exist.
docs/design-notes.md (Command timing) has the figures.
"""

from __future__ import annotations

import sys
import time

import commands.families  # noqa: F401  (registers every command)
from commands.dispatch import DISPATCHER
from commands.session import ServerState, Session
from store import Store

BATCH = 16


def main(n: int) -> None:
    server = ServerState(Store(16))
    s = Session(server)
    server.clients[s.id] = s
    execute = DISPATCHER.execute
    argvs = [[b"SET", b"key:%d" % (i % 1000), b"xxx"] for i in range(n)]
    for i in range(0, n, BATCH):
        server.clock_mark = time.perf_counter_ns()
        for argv in argvs[i : i + BATCH]:
            execute(s, argv)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
