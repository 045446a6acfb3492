"""How the benchmark report writes numbers, tables and code: the helpers `bench.report`
(docs/benchmarks.md) and `bench.report_long` (its `make bench-long` sections) share.
It imports neither."""

from __future__ import annotations

import math
from typing import Any

# The Targets rows of `make bench-long` (bench/report_long.py), by their `item` column.
LONG_VERSIONS_ITEM = "4 (long)"


LONG_CHECKPOINT_ITEM = "5 (long)"


def _ok(r: dict[str, Any] | None) -> bool:
    return isinstance(r, dict) and "error" not in r


def _x(v: float) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{v:.2f}x"


def _n(v: float | None, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:,.{digits}f}"


def _mib(b: float) -> str:
    return f"{b / 2**20:,.1f} MiB"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _code(*cmds: str) -> list[str]:
    return ["```sh", *cmds, "```"]


def _failed(name: str, r: Any) -> list[str]:
    if r is None:
        return [f"_Not run in this invocation ({name})._", ""]
    return [f"**Failed:** `{r.get('error')}`", ""]


def _code_measured(code: dict[str, Any], subject: bool = True) -> str:
    dirty = code["uncommitted_server_files"]
    return (
        f"commit `{code['commit']}`"
        + (f" ({code['subject']})" if subject else "")
        + (
            "; with uncommitted changes to " + ", ".join(f"`{x[3:]}`" for x in dirty)
            if dirty
            else ""
        )
        + f"; server sources sha256 `{code['sources_sha256']}`"
    )


def med_of(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if not n:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
