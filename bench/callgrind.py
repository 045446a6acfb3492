"""Instructions per command, counted by callgrind: stable on a loaded machine where
timings are not, so it compares builds (compiled vs TEMPORALSTORE_PURE=1) fairly.

The whole server process runs under `valgrind --tool=callgrind` (every thread, the
flusher and the collector included; the kernel's side of system calls is not counted).
After a warm-up of a tenth of the load the counters are zeroed (`callgrind_control -z`),
`redis-benchmark -c 50 -n <requests> -P <p> -t <cmd>` runs, the counters are dumped
(`callgrind_control -d`) and their total is divided by the requests.

    python -m bench.callgrind [--pure] [--requests N] [--keep DIR] [--setup CMD] set:16 ...
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import rb
from bench.proc import OURS, _spawn, free_port, ours_argv, tmpdir, wait_pong


def _newest_dump(outfile: Path) -> Path:
    """The newest dump callgrind wrote for `outfile` (`outfile`, `outfile.1`, ...)."""
    dumps = sorted(
        outfile.parent.glob(outfile.name + "*"), key=lambda p: (p.stat().st_mtime, p.name)
    )
    return dumps[-1]


def _total(dump: Path) -> int:
    """The instruction total of a callgrind dump."""
    text = dump.read_text(errors="replace")
    m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if m is None:
        raise RuntimeError(f"no totals in {dump}")
    return int(m.group(1))


def _ctl(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=600)


def per_command(
    cmd: str,
    pipeline: int,
    requests: int,
    pure: bool,
    keep: Path | None = None,
    setup: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
    clients: int = 50,
) -> dict[str, object]:
    work = tmpdir("callgrind")
    out = work / "callgrind.out"
    port = free_port()
    base = ours_argv(port, f"file://{work}/data", *flags)
    at = base.index(OURS)  # after the CPU pinning: valgrind runs the server's Python
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    argv = [*base[:at], *valgrind, sys.executable, *base[at:]]
    env = {"TEMPORALSTORE_PURE": "1" if pure else "0"}
    srv = _spawn("temporalstore-callgrind", argv, port, env)
    try:
        wait_pong(srv, timeout=600)
        warm = rb.argv(
            port, clients=clients, requests=max(requests // 10, 1), pipeline=pipeline, tests=cmd
        )
        subprocess.run(warm, check=True, capture_output=True, timeout=1800)
        for line in setup:  # e.g. "TS.SEAL s1": the state the load then runs in
            cli = ["redis-cli", "-p", str(port), *line.split()]
            subprocess.run(cli, check=True, capture_output=True, timeout=600)
        info = subprocess.run(
            ["redis-cli", "-p", str(port), "INFO", "temporalstore"],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
        found = re.search(r"^compiled_build:(\S+)", info, re.M)
        build = found.group(1) if found else "?"
        time.sleep(1.0)
        _ctl("-z", str(srv.pid))
        load = rb.argv(port, clients=clients, requests=requests, pipeline=pipeline, tests=cmd)
        subprocess.run(load, check=True, capture_output=True, timeout=3600)
        _ctl("-d", str(srv.pid))
        time.sleep(1.0)
        dump = _newest_dump(out)
        total = _total(dump)
        if keep is not None:  # the dump, for callgrind_annotate
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(dump, keep / f"callgrind.{cmd}.{pipeline}")
    finally:
        srv.stop(timeout=120)
    return {
        "load": rb.show(load),
        "build": build,  # as the server reports it (INFO temporalstore)
        "instructions": total,
        "per_command": round(total / requests),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pure", action="store_true", help="TEMPORALSTORE_PURE=1")
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--keep", type=Path, help="copy each dump here (callgrind.CMD.P)")
    ap.add_argument("--setup", action="append", default=[], help="a command run after the warm-up")
    ap.add_argument("--flag", action="append", default=[], help="a server flag, e.g. --flag=-x")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("loads", nargs="+", help="command:pipeline, e.g. set:16")
    args = ap.parse_args(argv)
    for spec in args.loads:
        cmd, _, p = spec.partition(":")
        res = per_command(
            cmd,
            int(p or 1),
            args.requests,
            args.pure,
            args.keep,
            tuple(args.setup),
            tuple(x for f in args.flag for x in f.split()),
            args.clients,
        )
        print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
