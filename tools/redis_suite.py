"""Run the Redis 7.0 project's own test suite (tests/ of redis 7.0.15, the version of
Debian bookworm's redis-server) in external mode against TemporalStore and against
redis-server, unit by unit, and compare.

    .venv/bin/python tools/redis_suite.py fetch           # download + verify, print the path
    .venv/bin/python tools/redis_suite.py run             # every unit of UNITS, both servers
    .venv/bin/python tools/redis_suite.py run --unit type/hash --server ours
    .venv/bin/python tools/redis_suite.py report          # rewrite the table of the docs page

`make redis-suite` runs `run` then `report`.

The suite is never part of this repository: `fetch` downloads Redis' release tarball as
Debian ships it (redis_7.0.15.orig.tar.gz from Debian's pool, the same bytes as the
upstream release), checks its SHA-256 and unpacks tests/ under .cache/redis-suite/
(git-ignored). How each unit is run (tclsh tests/test_helper.tcl --host --port --single
unit/NAME --durable ...) and why is in docs/compatibility.md. Results go to
.cache/redis-suite/results.json (one record per unit and server, every test's verdict)
and the raw output of each run to .cache/redis-suite/logs/.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.proc import OURS, Proc, start_ours, start_redis, tmpdir  # noqa: E402

VERSION = "7.0.15"
TARBALL = f"redis_{VERSION}.orig.tar.gz"
SHA256 = "4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982"
# Debian's pool (the tarball of bookworm's 5:7.0.15-1~deb12u* source packages); the
# mirror of this machine's apt sources is tried first.
POOL = "pool/main/r/redis/" + TARBALL
MIRRORS = (
    "http://deb.debian.org/debian/",
    "https://deb.debian.org/debian/",
    "https://snapshot.debian.org/archive/debian/20240110T000000Z/",
)
CACHE = REPO / ".cache" / "redis-suite"
SUITE = CACHE / f"redis-{VERSION}"
RESULTS = CACHE / "results.json"
DOC = REPO / "docs" / "compatibility.md"
BEGIN = "<!-- redis-suite:begin (tools/redis_suite.py report writes this part) -->"
END = "<!-- redis-suite:end -->"


# The units issue 14 asks for: every family plus the server-wide ones.
UNITS = (
    "keyspace",
    "expire",
    "multi",
    "pubsub",
    "pubsubshard",
    "info-command",
    "introspection",
    "introspection-2",
    "protocol",
    "auth",
    "acl",
    "querybuf",
    "tracking",
    "dump",
    "scripting",
    "functions",
    "bitops",
    "bitfield",
    "hyperloglog",
    "geo",
    "sort",
    "slowlog",
    "latency-monitor",
    "pause",
    "type/string",
    "type/incr",
    "type/list",
    "type/list-2",
    "type/list-3",
    "type/set",
    "type/zset",
    "type/hash",
    "type/stream",
    "type/stream-cgroups",
)
SERVERS = ("ours", "redis")
# Tests that read Redis' replication stream (SYNC, then the RDB payload and the
# propagated commands) are left out: that stream is Redis' replica protocol.
DEFAULT_TAGS = ("-needs:repl",)
# redis-server runs with what the suite's tests/assets/default.conf enables.
REDIS_FLAGS = (
    "--enable-debug-command",
    "yes",
    "--enable-protected-configs",
    "yes",
    "--enable-module-command",
    "yes",
)
STALL = 300  # seconds
OUTSIDE = "(between tests: the rest of the block did not run)"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATUS = re.compile(r"^\[(ok|err|skip|ignore|exception|TIMEOUT)\]: (.*)$")
DONE = re.compile(r"^\[\d+/\d+ done\]: unit/(\S+)")


# -- fetching ----------------------------------------------------------------------------


def apt_mirrors() -> list[str]:
    """Debian mirrors named by this machine's apt sources (deb822 or one-line)."""
    found: list[str] = []
    for f in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]:
        try:
            text = f.read_text()
        except OSError:
            continue
        for m in re.finditer(r"(?:URIs:\s*|^deb(?:-src)?\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M):
            url = m.group(1).rstrip("/") + "/"
            if url.endswith("/debian/") and url not in found:
                found.append(url)
    return found


def fetch() -> Path:
    """The unpacked tests/ of redis 7.0.15, downloaded and verified once."""
    if (SUITE / "tests" / "test_helper.tcl").is_file():
        return SUITE
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / TARBALL
    if not archive.is_file() or sha256(archive) != SHA256:
        errors = []
        for mirror in [*apt_mirrors(), *MIRRORS]:
            url = mirror + POOL
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    data = r.read()
            except OSError as e:
                errors.append(f"{url}: {e}")
                continue
            if hashlib.sha256(data).hexdigest() != SHA256:
                errors.append(f"{url}: checksum mismatch")
                continue
            archive.write_bytes(data)
            break
        else:
            raise SystemExit("could not fetch the Redis test suite:\n" + "\n".join(errors))
    prefix = f"redis-{VERSION}/tests/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(CACHE, members=members, filter="data")
    return SUITE


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- running -----------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    verdict: str  # ok | err | exception | skip | ignore
    detail: str = ""


@dataclass
class UnitRun:
    unit: str
    server: str
    completed: bool = False
    timed_out: bool = False
    aborted: str = ""  # what stopped the unit early
    seconds: float = 0.0
    results: list[Result] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.results if r.verdict == verdict)


def parse(unit: str, server: str, output: str) -> UnitRun:
    run = UnitRun(unit, server)
    current: Result | None = None
    for raw in output.splitlines():
        line = ANSI.sub("", raw)
        m = STATUS.match(line)
        if DONE.match(line):
            run.completed = True
            current = None
            continue
        if not m:
            if current is not None and line.strip():
                current.detail += line + "\n"
            continue
        verdict, text = m.groups()
        current = None
        if verdict == "ok":
            run.results.append(Result(re.sub(r" \(\d+ ms\)$", "", text), "ok"))
        elif verdict in ("skip", "ignore"):
            run.results.append(Result(text, verdict))
        elif verdict == "err" and re.search(r" in tests/unit/\S+\.tcl$", text):
            current = Result(re.sub(r" in tests/unit/\S+\.tcl$", "", text), "err")
            run.results.append(current)
        elif verdict == "err":
            # With --durable, an error between tests ends the rest of its start_server
            # block (the unit goes on with the next block).
            current = Result(OUTSIDE, "exception", "-\n" + text + "\n")
            run.results.append(current)
        elif verdict == "exception":
            run.aborted = text
            current = Result(OUTSIDE, "exception", "-\n" + text + "\n")
            run.results.append(current)
        else:
            run.timed_out = True
            run.aborted = "no progress within the suite's --timeout"
    for r in run.results:
        # With --durable an error that is not an assertion (an error reply the test did
        # not expect, an unknown command, a broken connection) is reported as [err]
        # with a Tcl stack trace; without --durable it would have ended the unit here.
        if r.verdict == "err" and ("while executing" in r.detail or "invoked from" in r.detail):
            r.verdict = "exception"
    return run


def ours_flags() -> list[str]:
    """The same switches for ours, once `serve` has them."""
    help_text = subprocess.run(
        [OURS, "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    names = REDIS_FLAGS[::2]
    return [
        arg
        for name, value in zip(names, REDIS_FLAGS[1::2], strict=True)
        if name in help_text
        for arg in (name, value)
    ]


def start(server: str) -> Proc:
    if server == "redis":
        return start_redis(*REDIS_FLAGS)
    return start_ours(f"file://{tmpdir('suite')}/data", *ours_flags())


def run_unit(
    unit: str, server: str, tags: list[str], timeout: float, strict: bool, suite: Path
) -> UnitRun:
    for _ in range(5):
        run = run_once(unit, server, tags, timeout, strict, suite)
        # The suite's test server picks its port among 32 and can still lose a race.
        if run.results or "couldn't open socket" not in run.aborted:
            return run
    return run


def run_once(
    unit: str, server: str, tags: list[str], timeout: float, strict: bool, suite: Path
) -> UnitRun:
    proc = start(server)
    argv = [
        "tclsh",
        "tests/test_helper.tcl",
        "--host",
        "127.0.0.1",
        "--port",
        str(proc.port),
        "--single",
        f"unit/{unit}",
        "--clients",
        "1",
        # The suite ends a unit that reports nothing for this long (a reply that never
        # comes: a notification, a push, an unblocked client).
        "--timeout",
        str(STALL),
        # The suite's own test server listens on one of the 32 ports below --baseport.
        "--baseport",
        str(random.randrange(20032, 50000)),
    ]
    if not strict:
        argv.append("--durable")
    for t in tags:
        argv += ["--tags", t]
    env = {k: v for k, v in os.environ.items() if k != "TERM"}  # no colours
    logs = CACHE / "logs" / server
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / (unit.replace("/", "_") + ".log")  # written as the unit runs
    began = time.monotonic()
    with log.open("wb") as out:
        child = subprocess.Popen(
            argv,
            cwd=suite,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        child.wait(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        # The test clients the suite started are in its session too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        alive = proc.alive()
        proc.stop()
    text = log.read_text(errors="replace")
    run = parse(unit, server, text)
    if not run.results and not run.completed and not run.aborted:
        after = text.split("Starting test server", 1)[-1].split("\n", 1)[-1]
        run.aborted = after.strip().split("\n", 1)[0][:160]
    run.seconds = round(time.monotonic() - began, 1)
    if hung:
        run.timed_out = True
        run.completed = False
        run.aborted = run.aborted or f"killed after {timeout:.0f} s"
    if not alive:
        run.aborted = (run.aborted + "; " if run.aborted else "") + "server exited"
    return run


def load(path: Path = RESULTS) -> dict[str, dict[str, Any]]:
    if path.is_file():
        data: dict[str, dict[str, Any]] = json.loads(path.read_text())
        return data
    return {}


def save(runs: list[UnitRun]) -> None:
    data = load()
    for r in runs:
        data.setdefault(r.unit, {})[r.server] = asdict(r)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


def from_dict(d: dict[str, Any]) -> UnitRun:
    results = [Result(**r) for r in d.pop("results")]
    return UnitRun(**d, results=results)


# -- reporting ---------------------------------------------------------------------------


def keyed(run: UnitRun, verdict: str) -> set[tuple[str, int]]:
    """(name, n-th occurrence) of the tests with this verdict: names repeat in loops."""
    seen: dict[str, int] = {}
    out = set()
    for r in run.results:
        n = seen.get(r.name, 0)
        seen[r.name] = n + 1
        if r.verdict == verdict:
            out.add((r.name, n))
    return out


def state(run: UnitRun) -> str:
    if run.completed:
        first = next((r for r in run.results if r.verdict == "exception"), None)
        if first is None:
            return "completed"
        block = next((r for r in run.results if r.name == OUTSIDE), None)
        if block is not None:
            return f"completed, but a block stopped early: {message(block)[:60]}"
        return f"completed; first exception: {first.name}: {message(first)[:60]}"
    why = run.aborted or "no end line"
    last = next(
        (r.name for r in reversed(run.results) if r.verdict not in ("skip", "ignore")), None
    )
    return f"stopped after `{last}` ({why})" if last else f"stopped before its first test ({why})"


def message(r: Result) -> str:
    """The error in one short printable line. The suite's --durable report of an error
    that is not an assertion cuts its first ten characters; the line after it (the
    start of the Tcl stack trace) has it whole."""
    lines = [line.strip() for line in r.detail.splitlines() if line.strip() not in ("", "-")]
    if not lines:
        return ""
    text = lines[0]
    if len(lines) > 1 and lines[1] != text and lines[1].endswith(text):
        text = lines[1]
    text = re.sub(r"\s*\((context|detail): .*$", "", text)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return (text[:107] + "...") if len(text) > 110 else text


def cause(r: Result) -> str:
    text = re.sub(r"(, with args beginning with:).*", r"\1 ...", message(r))
    text = text.replace("|", "\\|")
    return text + (" (exception)" if r.verdict == "exception" else "")


# An assertion on how redis-server lays a value out in memory (its encodings).
LAYOUT = re.compile(r"assert_encoding|object encoding|debug (listpack|ziplist|htstats)", re.I)


def is_layout(r: Result) -> bool:
    return r.verdict == "err" and LAYOUT.search(r.detail) is not None


def report(units: list[str], results: Path = RESULTS) -> str:
    data = load(results)
    rows = [
        "| unit | ours: passed | failed | of which exceptions | skipped | "
        "redis: passed | failed | passing on redis, not on ours | ours: how the unit ended |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    layout: list[str] = []
    total = {"ours": 0, "redis": 0, "missing": 0}
    absent = [u for u in units if u not in data or not all(s in data[u] for s in SERVERS)]
    for unit in units:
        if unit in absent:
            continue
        ours = from_dict(dict(data[unit]["ours"]))
        redis = from_dict(dict(data[unit]["redis"]))
        missing = keyed(redis, "ok") - keyed(ours, "ok")
        total["ours"] += ours.count("ok")
        total["redis"] += redis.count("ok")
        total["missing"] += len(missing)
        rows.append(
            f"| {unit} | {ours.count('ok')} | {ours.count('err') + ours.count('exception')} | "
            f"{ours.count('exception')} | {ours.count('skip') + ours.count('ignore')} | "
            f"{redis.count('ok')} | {redis.count('err') + redis.count('exception')} | "
            f"{len(missing)} | {state(ours)} |"
        )
        failing = [r for r in ours.results if r.verdict in ("err", "exception")]
        if failing:
            details.append(f"\n#### {unit}\n")
            # One line per cause: tests failing with the same error (up to its
            # arguments) are counted together.
            groups: dict[str, list[Result]] = {}
            for r in failing:
                groups.setdefault(cause(r), []).append(r)
                if is_layout(r):
                    layout.append(f"- {unit}: `{r.name}`: {message(r)}")
            for key, rs in groups.items():
                names = ", ".join(f"`{r.name}`" for r in rs[:3])
                more = f" and {len(rs) - 3} more" if len(rs) > 3 else ""
                count = f"{len(rs)} tests" if len(rs) > 1 else "1 test"
                details.append(f"- {count} ({names}{more}): {key}")
            ran = {r.name for r in ours.results}
            never = sum(1 for name, _ in missing if name not in ran)
            if never:
                details.append(f"- {never} tests that pass on redis never ran here")
    rows.append(
        f"| **total** | **{total['ours']}** | | | | **{total['redis']}** | | "
        f"**{total['missing']}** | |"
    )
    if absent:
        rows.append(f"\nNot in this run: {', '.join(absent)}.")
    return (
        "\n".join(rows)
        + "\n\n### Failing tests on ours, per unit\n"
        + "\n".join(details)
        + "\n\n### Failures that are assertions on the memory layout\n\n"
        + "Found by the report (an assertion on `OBJECT ENCODING` / `assert_encoding` or a "
        + "`DEBUG` view of the layout); see the section below.\n\n"
        + ("\n".join(layout) or "(none)")
    )


def write_doc(units: list[str], results: Path = RESULTS) -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + BEGIN + "\n" + report(units, results) + "\n" + END + tail)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch")
    r = sub.add_parser("run")
    r.add_argument("--unit", action="append", help="unit name (repeatable); default: all")
    r.add_argument("--server", action="append", choices=SERVERS, help="default: both")
    r.add_argument("--tags", action="append", help=f"suite --tags (default {DEFAULT_TAGS})")
    r.add_argument("--timeout", type=float, default=1200, help="seconds per unit and server")
    r.add_argument("--jobs", type=int, default=2, help="units run at the same time")
    r.add_argument("--strict", action="store_true", help="no --durable: an exception ends a unit")
    r.add_argument("--report", action="store_true", help="then rewrite docs/compatibility.md")
    r.add_argument("--suite", type=Path, help="another copy of redis' tree (default: fetched)")
    rep = sub.add_parser("report")
    rep.add_argument("--results", type=Path, default=RESULTS, help="another results.json")
    rep.add_argument("--stdout", action="store_true", help="print instead of writing the page")
    a = p.parse_args()
    if a.cmd == "fetch":
        print(fetch())
        return 0
    if a.cmd == "report":
        if a.stdout:
            print(report(list(UNITS), a.results))
        else:
            write_doc(list(UNITS), a.results)
        return 0
    suite = a.suite or fetch()
    if shutil.which("tclsh") is None:
        raise SystemExit("tclsh is needed (Debian: apt-get install tcl)")
    units = a.unit or list(UNITS)
    servers = a.server or list(SERVERS)
    tags = a.tags if a.tags is not None else list(DEFAULT_TAGS)
    jobs = [(u, s) for u in units for s in servers]
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(run_unit, u, s, tags, a.timeout, a.strict, suite) for u, s in jobs]
        for f in futures:
            run = f.result()
            save([run])
            print(
                f"{run.server:5} {run.unit:22} ok {run.count('ok'):4} err "
                f"{run.count('err'):3} exc {run.count('exception'):3} "
                f"skip {run.count('skip') + run.count('ignore'):3} {run.seconds:6.1f}s "
                f"{state(run)}",
                flush=True,
            )
    if a.report:
        write_doc(list(UNITS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
