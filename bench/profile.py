"""Where TemporalStore's time goes under SET load: py-spy samples the pinned server
while redis-benchmark drives SETs from the other CPU (the item 1 SET load).

Sampling is native (C frames too, so time in the cyclic garbage collector shows as
`gc_collect_main` instead of being charged to whatever Python line allocated) and
counts only samples holding the GIL: idle worker threads and the event loop's
wait for I/O drop out, so shares are of the interpreter's busy time. Native
sampling pauses the server for each sample, which costs it a little throughput.

py-spy is not a project dependency: `.venv/bin/pip install py-spy` enables this
step (without it the report says it was skipped).

    python -m bench.profile [SECONDS]    # prints the tables as JSON
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import rb
from bench.proc import BIN, LOAD_CPU, pin, pin_self, start_ours, tmpdir

GC = "cyclic garbage collector (gc_collect_main)"
AREAS = [
    ("proxy/", "proxy (connections, RESP parsing and replies)"),
    ("commands/", "commands (dispatch, argument parsing, command bodies)"),
    ("store/", "store (keyspace, commit point, version chains)"),
    ("flusher/", "flusher (record encoding, segments, PUTs)"),
    ("replay/", "replay/startup"),
    ("asyncio/", "asyncio/uvloop machinery"),
    ("uvloop/", "asyncio/uvloop machinery"),
    ("concurrent/", "worker threads (to_thread)"),
    ("threading.py", "worker threads (to_thread)"),
]
_FRAME = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _pyspy() -> str | None:
    cand = BIN / "py-spy"
    if cand.exists():
        return str(cand)
    return shutil.which("py-spy")


def _name(frame: str) -> str:
    m = _FRAME.match(frame)
    return f"{m['fn']} ({m['file']})" if m else frame


def _compiled_packages() -> dict[str, str]:
    """Short module name -> package of the compiled build (build/native/manifest.json):
    mypyc names a compiled function `CPyDef_<module>___<function>` (`CPyPy_` for its
    entry from Python), all in one C file, so its frame carries no package path."""
    try:
        manifest = json.loads((Path(__file__).resolve().parent.parent / _MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return {Path(rel).stem: rel.split("/")[0] for rel in manifest.get("modules", {})}


_MANIFEST = "build/native/manifest.json"
_COMPILED = _compiled_packages()
_MYPYC = re.compile(r"^CPy(?:Def|Py)_(?P<mod>[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*?)___")


def _area(frame: str) -> str:
    m = _MYPYC.match(frame)
    if m and m["mod"] in _COMPILED:
        frame = f"{_COMPILED[m['mod']]}/"
    for needle, area in AREAS:
        if needle in frame:
            return area
    return "other"


def summarize(raw: str, top: int = 15) -> dict[str, Any]:
    selfc: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_name(f) for f in stack.split(";")]
        total += n
        selfc[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
        # A sample belongs to the collector if it is collecting, else to the innermost
        # frame of our own code if there is one.
        area = "other"
        if any("gc_collect" in f for f in frames):
            area = GC
        else:
            for f in reversed(frames):
                a = _area(f)
                if a != "other":
                    area = a
                    break
        areas[area] += n

    def rows(c: Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": f, "samples": n, "share": n / total if total else 0.0}
            for f, n in c.most_common(top)
        ]

    skip = ("<module>", "main (proxy/cli.py)", "run (uvloop/", "Runner.run", "Thread._bootstrap")
    inclusive = Counter(
        {
            f: n
            for f, n in incl.items()
            if (f.endswith(".py)") or f.startswith("CPyDef_")) and not f.startswith(skip)
        }
    )
    return {
        "samples": total,
        "self": rows(selfc),
        "inclusive": rows(inclusive),
        "areas": rows(areas),
    }


def profile_one(seconds: int, pipeline: int) -> dict[str, Any]:
    spy = _pyspy()
    if spy is None:
        return {"skipped": "py-spy is not installed (.venv/bin/pip install py-spy)"}
    srv = start_ours(f"file://{tmpdir('prof')}")
    load = rb.argv(srv.port, requests=50_000_000, pipeline=pipeline, tests="set")
    gen = subprocess.Popen(load, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = tmpdir("prof") / "raw.txt"
    rate = 100
    cmd = pin(
        LOAD_CPU,
        [spy, "record", "--pid", str(srv.pid), "--duration", str(seconds), "--rate", str(rate)],
    )
    cmd += ["--native", "--gil", "--function", "--format", "raw", "--output", str(out)]
    try:
        time.sleep(1.0)  # past connection set-up
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
        if proc.returncode != 0 or not out.exists():
            return {"skipped": f"py-spy failed: {proc.stderr.strip()[-500:]}"}
    finally:
        gen.kill()
        gen.wait()
        srv.stop()
    res = summarize(out.read_text())
    res["busy_share"] = res["samples"] / (rate * seconds)
    res["load"] = rb.show(load).replace("-n 50000000", "-n <until stopped>")
    res["profiler"] = " ".join(cmd[3:] if cmd[0] == "taskset" else cmd).replace(
        str(srv.pid), "$PID"
    )
    res["profiler"] = re.sub(r"--output \S+", "--output raw.txt", res["profiler"])
    res["profiler"] = res["profiler"].replace(str(Path(spy).parent) + "/", "")
    return res


def profile_set_load(seconds: int) -> dict[str, Any]:
    return {f"P{p}": profile_one(seconds, p) for p in (1, 16)}


if __name__ == "__main__":
    pin_self()
    secs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(json.dumps(profile_set_load(secs), indent=2))
