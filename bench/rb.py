"""Running redis-benchmark (pinned to the load generator's CPU) and parsing --csv."""

from __future__ import annotations

import csv
import io
import shlex
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from bench.proc import LOAD_CPU, pin


@dataclass
class Row:
    test: str
    rps: float
    avg_ms: float
    min_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def argv(
    port: int,
    *,
    clients: int = 50,
    requests: int = 100_000,
    pipeline: int = 1,
    tests: str | None = None,
    command: list[str] | None = None,
    extra: tuple[str, ...] = (),
) -> list[str]:
    a = ["redis-benchmark", "-p", str(port), "-c", str(clients), "-n", str(requests)]
    a += ["-P", str(pipeline), *extra, "--csv"]
    if tests:
        a += ["-t", tests]
    if command:
        a += command
    return pin(LOAD_CPU, a)


def show(a: list[str]) -> str:
    """The command as printed in docs/benchmarks.md (the port varies per run)."""
    out = list(a)
    i = out.index("-p")
    out[i + 1] = "$PORT"
    return shlex.join(out)


def run(a: list[str], timeout: float = 300.0) -> list[Row]:
    proc = subprocess.run(a, capture_output=True, timeout=timeout, check=False)
    text = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(a)} failed ({proc.returncode}): {text[-2000:]}")
    rows: list[Row] = []
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    for rec in csv.DictReader(io.StringIO("\n".join(lines))):
        rows.append(
            Row(
                test=rec["test"],
                rps=float(rec["rps"]),
                avg_ms=float(rec["avg_latency_ms"]),
                min_ms=float(rec["min_latency_ms"]),
                p50_ms=float(rec["p50_latency_ms"]),
                p95_ms=float(rec["p95_latency_ms"]),
                p99_ms=float(rec["p99_latency_ms"]),
                max_ms=float(rec["max_latency_ms"]),
            )
        )
    # --cluster first names the masters it found: "Cluster has N master nodes:", one
    # "Master i: <id> <host:port>" line each.
    other = [
        ln for ln in text.splitlines() if ln and not ln.startswith(('"', "Cluster has ", "Master "))
    ]
    if other or not rows:
        raise RuntimeError(f"{shlex.join(a)}: unexpected output: {text[-2000:]}")
    return rows
