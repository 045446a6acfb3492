"""Experiments behind the "where the time goes" section of docs/benchmarks.md. Not
part of `make bench` (they take a few minutes); the server's code is unchanged, the
collector is configured from outside by bench/gcwrap.py.

    python -m bench.experiments gc        # SET load, collector on vs off; its pauses
    python -m bench.experiments replay    # replay of 1M records, collector on vs off
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from typing import Any

from bench import rb
from bench.client import wait_flushed
from bench.proc import (
    REPO,
    SERVER_CPU,
    Proc,
    _spawn,
    free_port,
    pin,
    pin_self,
    start_ours,
    tmpdir,
    wait_pong,
)
from bench.shared import NO_CHECKPOINTS, load, set_commands


def start_wrapped(storage: str, gc_mode: str, *flags: str, out: str = "") -> Proc:
    port = free_port()
    argv = pin(
        SERVER_CPU,
        [
            *(sys.executable, "-m", "bench.gcwrap", "serve", "--port", str(port)),
            *("--storage", storage, "--log-level", "warning", *flags),
        ],
    )
    p = _spawn(f"gc-{gc_mode}", argv, port, {"TSBENCH_GC": gc_mode, "TSBENCH_GC_OUT": out})
    wait_pong(p)
    return p


def gc_experiment(runs: int = 3) -> dict[str, Any]:
    res: dict[str, list[dict[str, Any]]] = {}
    for rep in range(runs):
        for mode in ("on", "off") if rep % 2 == 0 else ("off", "on"):
            srv = start_wrapped(f"file://{tmpdir('gc')}", mode)
            for p in (1, 16):
                (row,) = rb.run(rb.argv(srv.port, requests=100_000, pipeline=p, tests="set"))
                res.setdefault(f"P{p} gc {mode}", []).append(row.as_dict())
            srv.stop()
    table = {
        k: {
            "rps": statistics.median(r["rps"] for r in v),
            "p99_ms": statistics.median(r["p99_ms"] for r in v),
            "max_ms": statistics.median(r["max_ms"] for r in v),
        }
        for k, v in res.items()
    }
    traces: dict[str, Any] = {}
    for name, extra in (
        ("item 1 SET -P 16 (one key)", []),
        ("-r 1000000 (growing)", ["-r", "1000000"]),
    ):
        out = str(tmpdir("gctrace") / "gc.json")
        srv = start_wrapped(f"file://{tmpdir('gc')}", "trace", out=out)
        a = rb.argv(srv.port, requests=300_000, pipeline=16, tests="set", extra=tuple(extra))
        (row,) = rb.run(a)
        srv.stop()
        with open(out) as f:
            t = json.load(f)
        gc_s = sum(g["total_s"] for g in t["generations"].values())
        traces[name] = {"set": row.as_dict(), "gc": t, "gc_share_of_cpu": gc_s / t["cpu_s"]}
    return {"runs": res, "median": table, "traces": traces}


def replay_experiment(records: int = 1_000_000, runs: int = 2) -> dict[str, Any]:
    d = tmpdir("gcreplay")
    srv = start_ours(f"file://{d}", *NO_CHECKPOINTS)
    load(srv.port, set_commands(records, 100))
    wait_flushed(srv.port)
    srv.kill9()
    from bench.client import Client

    res: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for rep in range(runs):
        for mode in ("on", "off") if rep % 2 == 0 else ("off", "on"):
            p = start_wrapped(f"file://{d}", mode, *NO_CHECKPOINTS)
            with Client(p.port) as c:
                info = c.info("persistence")
            res[mode].append({"serving_s": p.serving_s, "replay_s": float(info["replay_seconds"])})
            p.kill9()
    return {
        "records": records,
        "runs": res,
        "median_replay_s": {m: statistics.median(r["replay_s"] for r in v) for m, v in res.items()},
    }


def main(argv: list[str]) -> int:
    os.chdir(REPO)  # `python -m bench.gcwrap` runs from the repository root
    pin_self()
    which = argv[0] if argv else "gc"
    out = gc_experiment() if which == "gc" else replay_experiment()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
