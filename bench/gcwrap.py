"""`temporalstore serve` with the cyclic garbage collector configured from outside,
for experiments only (the server's code is unchanged):

    TSBENCH_GC=off     gc.disable() before the server starts (and gc.enable() made a
                       no-op, so the server cannot turn it back on)
    TSBENCH_GC=trace   time every collection (gc.callbacks) and write per-generation
                       counts, total and longest pause as JSON to $TSBENCH_GC_OUT at exit

    python -m bench.gcwrap serve --port 0 --storage file:///tmp/x
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import time
from typing import Any

_stats: dict[int, list[float]] = {0: [0, 0.0, 0.0], 1: [0, 0.0, 0.0], 2: [0, 0.0, 0.0]}
_t0 = [0.0]
_start = time.perf_counter()
_cpu0 = time.process_time()


def _callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _t0[0] = time.perf_counter()
        return
    d = time.perf_counter() - _t0[0]
    s = _stats[info["generation"]]
    s[0] += 1
    s[1] += d
    s[2] = max(s[2], d)


def _dump() -> None:
    out = os.environ.get("TSBENCH_GC_OUT")
    if not out:
        return
    data = {
        "wall_s": time.perf_counter() - _start,
        "cpu_s": time.process_time() - _cpu0,
        "generations": {
            str(g): {"collections": int(s[0]), "total_s": s[1], "max_ms": s[2] * 1000}
            for g, s in _stats.items()
        },
    }
    with open(out, "w") as f:
        json.dump(data, f)


def main() -> int:
    mode = os.environ.get("TSBENCH_GC", "on")
    if mode == "off":
        gc.disable()
        gc.enable = lambda: None  # the server re-enables it after replay: stay off
    elif mode == "trace":
        gc.callbacks.append(_callback)
        atexit.register(_dump)
    from proxy.cli import main as serve_main

    return serve_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
