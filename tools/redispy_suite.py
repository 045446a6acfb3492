"""Run redis-py's own command tests (tests/test_commands.py and
tests/test_asyncio/test_commands.py of the redis-py version installed in .venv) against
a fresh redis-server 7.0 and a fresh TemporalStore, and compare them test by test.

    .venv/bin/python tools/redispy_suite.py fetch      # sdist + test venv, print the path
    .venv/bin/python tools/redispy_suite.py run        # both files, RESP3 and RESP2, both servers
    .venv/bin/python tools/redispy_suite.py run --file tests/test_commands.py --protocol 2
    .venv/bin/python tools/redispy_suite.py report     # print the comparison (markdown)
    .venv/bin/python tools/redispy_suite.py report --write   # rewrite the docs section

`make redispy-suite` runs `run --report`.

redis-py's tests are never part of this repository: `fetch` downloads the sdist of the
installed redis-py version from PyPI (`pip download --no-binary :all:`), unpacks its tests/
(and pyproject.toml, which holds their pytest settings) under .cache/redispy/ (git-ignored)
and makes a separate venv there with what those tests import (the installed redis-py,
pytest, pytest-asyncio, pytest-timeout, packaging, redis-entraid). Each file runs against
a server of its own, started for it, with `--redis-url=redis://127.0.0.1:PORT/9`,
`--protocol=3` then `--protocol=2` (redis-py 8 speaks RESP3 unless told otherwise) and a
per-test timeout; the outcome of every test goes to .cache/redispy/results.json (one
record per file, protocol and server) and pytest's own output to .cache/redispy/logs/.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.proc import Proc, start_ours, start_redis, tmpdir  # noqa: E402
from tools.redis_suite import REDIS_FLAGS, ours_flags  # noqa: E402

VERSION = version("redis")
CACHE = REPO / ".cache" / "redispy"
SUITE = CACHE / f"redis-{VERSION}"
VENV = CACHE / "venv"
RESULTS = CACHE / "results.json"
LOGS = CACHE / "logs"
DOC = REPO / "docs" / "compatibility.md"
BEGIN = "<!-- redispy-suite:begin (tools/redispy_suite.py report --write writes this part) -->"
END = "<!-- redispy-suite:end -->"
FILES = ("tests/test_commands.py", "tests/test_asyncio/test_commands.py")
# redis-py 8 speaks RESP3 unless told otherwise; its tests run with either (--protocol).
PROTOCOLS = ("3", "2")
SERVERS = ("ours", "redis")
# What tests/conftest.py and the two files import (from the sdist's dev_requirements.txt,
# no more): the rest of that list is for other files (numpy, opentelemetry, uvloop, ...).
REQUIREMENTS = ("pytest", "pytest-asyncio", "pytest-timeout", "packaging", "redis-entraid==1.2.1")
TEST_TIMEOUT = 60  # seconds per test (pytest-timeout)


# -- fetching ----------------------------------------------------------------------------


def fetch() -> Path:
    """redis-py's tests/ for the installed version, and a venv that can run them."""
    CACHE.mkdir(parents=True, exist_ok=True)
    if not (SUITE / "tests" / "conftest.py").is_file():
        sdist = CACHE / f"redis-{VERSION}.tar.gz"
        if not sdist.is_file():
            subprocess.run(
                [
                    *(sys.executable, "-m", "pip", "download", "--no-deps"),
                    *("--no-binary", ":all:", f"redis=={VERSION}", "-d", str(CACHE)),
                ],
                check=True,
            )
        keep = (f"redis-{VERSION}/tests/", f"redis-{VERSION}/pyproject.toml")
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(keep)]
            tar.extractall(CACHE, members=members, filter="data")
    python = VENV / "bin" / "python"
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    done = VENV / f"installed-{VERSION}"
    if not done.is_file():
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"redis=={VERSION}", *REQUIREMENTS],
            check=True,
        )
        done.touch()
    return SUITE


# -- running -----------------------------------------------------------------------------


def start(server: str) -> Proc:
    if server == "redis":
        return start_redis(*REDIS_FLAGS)
    return start_ours(f"file://{tmpdir('redispy')}/data", *ours_flags())


def slug(server: str, file: str, protocol: str) -> str:
    name = file.removeprefix("tests/").removesuffix(".py").replace("/", "_")
    return f"{server}-{name}-resp{protocol}"


def run_name(file: str, protocol: str) -> str:
    return f"{file} --protocol={protocol}"


def run_file(server: str, file: str, protocol: str, timeout: float) -> dict[str, Any]:
    """One file of redis-py's tests against a fresh server: every test's outcome."""
    LOGS.mkdir(parents=True, exist_ok=True)
    junit = LOGS / (slug(server, file, protocol) + ".xml")
    log = LOGS / (slug(server, file, protocol) + ".log")
    junit.unlink(missing_ok=True)
    proc = start(server)
    argv = [
        str(VENV / "bin" / "pytest"),
        file,
        f"--redis-url=redis://127.0.0.1:{proc.port}/9",
        f"--protocol={protocol}",
        f"--timeout={TEST_TIMEOUT}",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--junitxml={junit}",
    ]
    try:
        with log.open("wb") as out:
            child = subprocess.run(
                argv,
                cwd=SUITE,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        code: int | None = child.returncode
    except subprocess.TimeoutExpired:
        code = None
    finally:
        alive = proc.alive()
        proc.stop()
    tests = parse_junit(junit) if junit.is_file() else {}
    return {
        "server": server,
        "file": file,
        "protocol": protocol,
        "exit": code,
        "server_alive_at_end": alive,
        "tests": tests,
    }


def parse_junit(path: Path) -> dict[str, dict[str, str]]:
    """test id -> {"outcome": passed|failed|error|skipped, "message": first line,
    "detail": pytest's explanation (its `E` lines, without line numbers)}."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1] + "::" + case.get("name", "")
        outcome, message, detail = "passed", "", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = "failed" if tag == "failure" else tag
                # An expected failure (xfail) is a "skipped" with no message, only a type.
                message = first_line(el.get("message") or el.text or el.get("type") or "")
                explained = [ln for ln in (el.text or "").splitlines() if ln.startswith("E ")]
                detail = re.sub(r":\d+\b", "", "\n".join(explained))[:4000]
                break
        out[name] = {"outcome": outcome, "message": message, "detail": detail}
    return out


def first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return (line[:157] + "...") if len(line) > 160 else line


def load(path: Path = RESULTS) -> dict[str, dict[str, Any]]:
    if path.is_file():
        data: dict[str, dict[str, Any]] = json.loads(path.read_text())
        return data
    return {}


def save(record: dict[str, Any]) -> None:
    # Runs of other files or servers may be saving at the same time.
    with (CACHE / "results.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = load()
        run = run_name(record["file"], record["protocol"])
        data.setdefault(run, {})[record["server"]] = record
        RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True))


# -- reporting ---------------------------------------------------------------------------


def count(record: dict[str, Any], outcome: str) -> int:
    return sum(1 for t in record["tests"].values() if t["outcome"] == outcome)


def cause(message: str) -> str:
    """A failure's first line without what varies from test to test (the arguments of
    an unknown command)."""
    text = re.sub(r"(unknown command '[^']*'), with args beginning with:.*", r"\1", message)
    return text.replace("|", "\\|")


def differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Tests that pass on server a and not on server b."""
    return sorted(
        name
        for name, t in a["tests"].items()
        if t["outcome"] == "passed" and b["tests"].get(name, {}).get("outcome") != "passed"
    )


def grouped(names: list[str], record: dict[str, Any]) -> list[str]:
    """One line per cause: the tests failing with the same first line, counted together."""
    groups: dict[str, list[str]] = {}
    for name in names:
        t = record["tests"].get(name, {"outcome": "absent", "message": "not run"})
        groups.setdefault(f"{t['outcome']}: {cause(t['message'])}", []).append(name)
    return [
        f"- {len(ns)} x {key}: " + ", ".join(f"`{n}`" for n in ns)
        for key, ns in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]


def report(results: Path = RESULTS) -> str:
    data = load(results)
    rows = [
        "| run | redis: passed | failed | skipped | ours: passed | failed | skipped | "
        "passing on redis, not on ours | passing on ours, not on redis |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    total = [0, 0, 0, 0]
    for name in (run_name(f, p) for p in PROTOCOLS for f in FILES):
        if not all(s in data.get(name, {}) for s in SERVERS):
            rows.append(f"| {name} | not run | | | | | | | |")
            continue
        redis, ours = data[name]["redis"], data[name]["ours"]
        missing, extra = differing(redis, ours), differing(ours, redis)
        for i, n in enumerate(
            (count(redis, "passed"), count(ours, "passed"), len(missing), len(extra))
        ):
            total[i] += n
        rows.append(
            f"| {name} | {count(redis, 'passed')} | "
            f"{count(redis, 'failed') + count(redis, 'error')} | {count(redis, 'skipped')} | "
            f"{count(ours, 'passed')} | {count(ours, 'failed') + count(ours, 'error')} | "
            f"{count(ours, 'skipped')} | {len(missing)} | {len(extra)} |"
        )
        details.append(f"\n#### {name}\n")
        details.append("Passing on redis-server, not on ours (ours' failure):\n")
        details += grouped(missing, ours) or ["- none"]
        details.append("\nPassing on ours, not on redis-server (redis-server's failure):\n")
        details += grouped(extra, redis) or ["- none"]
        both = sorted(
            n
            for n, t in redis["tests"].items()
            if t["outcome"] in ("failed", "error") and n not in extra
            if ours["tests"].get(n, {}).get("outcome") in ("failed", "error")
        )
        same = [n for n in both if redis["tests"][n]["detail"] == ours["tests"][n]["detail"]]
        details.append(
            "\nFailing on both, with the same explanation from pytest (redis-server's failure):\n"
        )
        details += grouped(same, redis) or ["- none"]
        other = [n for n in both if n not in same]
        if other:
            details.append("\nFailing on both, differently (ours' failure):\n")
            details += grouped(other, ours)
        skips: dict[str, int] = {}
        for t in redis["tests"].values():
            if t["outcome"] == "skipped":
                why = t["message"] or "(no reason)"
                skips[why] = skips.get(why, 0) + 1
        same_skips = {n for n, t in redis["tests"].items() if t["outcome"] == "skipped"} == {
            n for n, t in ours["tests"].items() if t["outcome"] == "skipped"
        }
        details.append(
            "\nSkipped on redis-server (by redis-py's markers; "
            + ("the same tests on ours" if same_skips else "NOT the same tests as on ours")
            + "): "
            + "; ".join(
                f"{n} x {cause(m)}" for m, n in sorted(skips.items(), key=lambda kv: -kv[1])
            )
        )
    rows.append(
        f"| **all runs** | **{total[0]}** | | | **{total[1]}** | | | **{total[2]}** | "
        f"**{total[3]}** |"
    )
    return "\n".join(rows) + "\n" + "\n".join(details)


def write_doc(results: Path = RESULTS) -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + BEGIN + "\n" + report(results) + "\n" + END + tail)


def run(a: argparse.Namespace) -> None:
    fetch()
    runs = [(f, p) for p in a.protocol or PROTOCOLS for f in a.file or FILES]
    for file, protocol in runs:
        for server in a.server or SERVERS:
            record = run_file(server, file, protocol, a.timeout)
            save(record)
            print(
                f"{server:5} {run_name(file, protocol):50} passed {count(record, 'passed'):4} "
                f"failed {count(record, 'failed') + count(record, 'error'):4} skipped "
                f"{count(record, 'skipped'):4} exit {record['exit']}",
                flush=True,
            )
    if a.report:
        write_doc()


def show(a: argparse.Namespace) -> None:
    if a.write:
        write_doc(a.results)
    else:
        print(report(a.results))


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch").set_defaults(func=lambda _: print(fetch()))
    r = sub.add_parser("run")
    r.set_defaults(func=run)
    r.add_argument("--file", action="append", choices=FILES, help="default: both")
    r.add_argument("--server", action="append", choices=SERVERS, help="default: both")
    r.add_argument("--protocol", action="append", choices=PROTOCOLS, help="default: both")
    r.add_argument("--timeout", type=float, default=3600, help="seconds per file and server")
    r.add_argument("--report", action="store_true", help="then rewrite docs/compatibility.md")
    rep = sub.add_parser("report", help="print the comparison (markdown)")
    rep.set_defaults(func=show)
    rep.add_argument("--results", type=Path, default=RESULTS, help="another results.json")
    rep.add_argument("--write", action="store_true", help="rewrite docs/compatibility.md")
    a = p.parse_args()
    a.func(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
