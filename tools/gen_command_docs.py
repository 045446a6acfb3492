"""Regenerate `commands/redis_commands.json` from a real redis-server.

    .venv/bin/python tools/gen_command_docs.py              # starts its own redis-server
    .venv/bin/python tools/gen_command_docs.py --port 6379  # asks a running one
    .venv/bin/python tools/gen_command_docs.py --config-c path/to/config.c

What it records, per top-level command, is the exact reply of `COMMAND INFO name` and
`COMMAND DOCS name` read in RESP3 (which carries every type: maps, sets, simple strings)
as a typed JSON tree; re-encoding that tree as RESP2 and RESP3 is checked against the raw
bytes the server sent in both protocols before anything is written. Subcommands are
sorted by name (Redis lists them in hash-table order, which changes per process).

It also records `CONFIG GET *` of a server started with default settings (the values a
default 7.0 server reports) and, when Redis' `src/config.c` is available, the type,
bounds and flags of every configuration parameter, so CONFIG SET can validate exactly.

Typed tree: a JSON string is a bulk string, a number an integer, null a null, a list an
array, {"+": s} a simple string, {"~": [...]} a set, {"%": [[k, v], ...]} a map.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "commands" / "redis_commands.json"
REDIS_TAG = "7.0.15"
# A bare clone of github.com/redis/redis (for config.c); override with REDIS_GIT.
DEFAULT_REDIS_GIT = Path(os.environ.get("REDIS_GIT", "redis.git"))


# -- a minimal RESP client that keeps the raw bytes -------------------------------------


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def call(self, *args: str) -> tuple[Any, bytes]:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a.encode()
            out.append(b"$%d\r\n%b\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        value, end = self._parse(0)
        raw, self.buf = self.buf[:end], self.buf[end:]
        return value, raw

    def _need(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def _line(self, pos: int) -> int:
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._need(len(self.buf) + 1)

    def _parse(self, pos: int) -> tuple[Any, int]:
        self._need(pos + 1)
        nl = self._line(pos)
        kind = self.buf[pos : pos + 1]
        head = self.buf[pos + 1 : nl].decode()
        end = nl + 2
        if kind in (b"$", b"="):
            n = int(head)
            if n < 0:
                return None, end
            self._need(end + n + 2)
            text = self.buf[end : end + n].decode()
            return (text[4:] if kind == b"=" else text), end + n + 2
        if kind == b"+":
            return {"+": head}, end
        if kind == b"-":
            raise RuntimeError(head)
        if kind == b":":
            return int(head), end
        if kind == b"_":
            return None, end
        if kind in (b"*", b"~", b"%"):
            n = int(head)
            if n < 0:
                return None, end
            items = []
            for _ in range(2 * n if kind == b"%" else n):
                v, end = self._parse(end)
                items.append(v)
            if kind == b"*":
                return items, end
            if kind == b"~":
                return {"~": items}, end
            return {"%": [[items[i], items[i + 1]] for i in range(0, len(items), 2)]}, end
        raise RuntimeError(f"unexpected reply type {kind!r}")


def encode(v: Any, resp: int) -> bytes:
    """The RESP bytes of a typed tree (what the server must have sent)."""
    if v is None:
        return b"$-1\r\n" if resp == 2 else b"_\r\n"
    if isinstance(v, bool):
        raise TypeError("bool")
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, str):
        b = v.encode()
        return b"$%d\r\n%b\r\n" % (len(b), b)
    if isinstance(v, list):
        return b"*%d\r\n" % len(v) + b"".join(encode(x, resp) for x in v)
    if "+" in v:
        return b"+%s\r\n" % v["+"].encode()
    if "~" in v:
        head = b"*" if resp == 2 else b"~"
        return head + b"%d\r\n" % len(v["~"]) + b"".join(encode(x, resp) for x in v["~"])
    pairs = v["%"]
    head = b"*%d\r\n" % (2 * len(pairs)) if resp == 2 else b"%%%d\r\n" % len(pairs)
    return head + b"".join(encode(k, resp) + encode(x, resp) for k, x in pairs)


# -- sorting subcommands ----------------------------------------------------------------


def sort_info(info: list[Any]) -> list[Any]:
    subs = info[9]
    if isinstance(subs, list) and subs:
        info[9] = sorted((sort_info(s) for s in subs), key=lambda s: s[0])
    return info


def sort_docs(docs: dict[str, Any]) -> dict[str, Any]:
    for pair in docs["%"]:
        if pair[0] == "subcommands":
            pair[1]["%"] = sorted(
                ([k, sort_docs(v)] for k, v in pair[1]["%"]), key=lambda kv: kv[0]
            )
    return docs


# -- configuration parameters -------------------------------------------------------------

_C_CONSTS = {
    "INT_MAX": 2**31 - 1,
    "INT_MIN": -(2**31),
    "UINT_MAX": 2**32 - 1,
    "LONG_MAX": 2**63 - 1,
    "LONG_MIN": -(2**63),
    "LLONG_MAX": 2**63 - 1,
    "LLONG_MIN": -(2**63),
    "ULLONG_MAX": 2**64 - 1,
    "ULONG_MAX": 2**64 - 1,
    "SSIZE_MAX": 2**63 - 1,
    "SIZE_MAX": 2**64 - 1,
}


def _c_int(expr: str) -> int:
    expr = expr.strip()
    if expr in _C_CONSTS:
        return _C_CONSTS[expr]
    if re.fullmatch(r"0[0-7]+", expr):
        return int(expr, 8)
    clean = re.sub(r"(\d+)(?:ll|LL|ULL|ull|UL|ul|L|U)\b", r"\1", expr)
    if not re.fullmatch(r"[0-9*+\-/<>() ]+", clean):
        raise ValueError(expr)
    return int(eval(clean))  # only digits and arithmetic reach this point


def _split_args(text: str) -> list[str]:
    """Split a C argument list on top-level commas."""
    out, depth, cur, quoted = [], 0, "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if not quoted:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
                continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _flags(expr: str) -> list[str]:
    names = {
        "IMMUTABLE_CONFIG": "immutable",
        "SENSITIVE_CONFIG": "sensitive",
        "DEBUG_CONFIG": "debug",
        "MULTI_ARG_CONFIG": "multi_arg",
        "HIDDEN_CONFIG": "hidden",
        "PROTECTED_CONFIG": "protected",
        "DENY_LOADING_CONFIG": "deny_loading",
        "VOLATILE_CONFIG": "volatile",
    }
    return sorted(names[f.strip()] for f in expr.split("|") if f.strip() in names)


def parse_config_c(source: str) -> dict[str, dict[str, Any]]:
    enums: dict[str, list[str]] = {}
    for m in re.finditer(r"configEnum (\w+)\[\] = \{(.*?)\n\};", source, re.S):
        enums[m.group(1)] = re.findall(r'\{\s*"([^"]+)"', m.group(2))
    table = source[source.index("standardConfig static_configs[]") :]
    table = table[: table.index("{NULL}")]
    out: dict[str, dict[str, Any]] = {}
    table = re.sub(r"/\*.*?\*/", "", table, flags=re.S)
    for m in re.finditer(r"create(\w+)Config\((.*?)\),?\s*\n", table):
        kind, args = m.group(1), _split_args(m.group(2))
        name = args[0].strip('"')
        alias = None if args[1] == "NULL" else args[1].strip('"')
        entry: dict[str, Any] = {"alias": alias, "flags": _flags(args[2])}
        if kind == "Bool":
            entry["type"] = "bool"
        elif kind in ("String", "SDS"):
            entry["type"] = "string"
            entry["empty_is_null"] = args[3] == "EMPTY_STRING_IS_NULL"
        elif kind == "Enum":
            entry["type"] = "enum"
            entry["values"] = enums[args[3]]
        elif kind == "Special":
            entry["type"] = "special"
        else:
            numeric = {
                "Int": "int",
                "UInt": "uint",
                "Long": "long",
                "ULong": "ulong",
                "LongLong": "longlong",
                "ULongLong": "ulonglong",
                "SizeT": "size_t",
                "SSizeT": "ssize_t",
                "TimeT": "time_t",
                "OffT": "off_t",
            }[kind]
            entry["type"] = numeric
            entry["min"] = _c_int(args[3])
            entry["max"] = _c_int(args[4])
            nflags = args[7]
            entry["memory"] = "MEMORY_CONFIG" in nflags
            entry["percent"] = "PERCENT_CONFIG" in nflags
            entry["octal"] = "OCTAL_CONFIG" in nflags
        out[name] = entry
    return out


def read_config_c(path: str | None, git_dir: Path) -> str | None:
    if path:
        return Path(path).read_text()
    if git_dir.exists():
        try:
            return subprocess.run(
                ["git", "-C", str(git_dir), "show", f"{REDIS_TAG}:src/config.c"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        except (subprocess.CalledProcessError, OSError):
            return None
    return None


# -- main -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis() -> tuple[subprocess.Popen[bytes], int, str]:
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="gen-command-docs-")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, "--logfile", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port, workdir
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


def collect(port: int, exact_configs: list[str]) -> dict[str, Any]:
    r3 = Conn(port)
    r3.call("HELLO", "3")
    r2 = Conn(port)
    version = r3.call("INFO", "server")[0]
    m = re.search(r"redis_version:(\S+)", version if isinstance(version, str) else "")
    names = sorted(r3.call("COMMAND", "LIST")[0])
    commands: dict[str, Any] = {}
    for name in names:
        if "|" in name:
            continue
        (info,), raw3 = r3.call("COMMAND", "INFO", name)
        _, raw2 = r2.call("COMMAND", "INFO", name)
        docs_map, draw3 = r3.call("COMMAND", "DOCS", name)
        _, draw2 = r2.call("COMMAND", "DOCS", name)
        if encode([info], 3) != raw3 or encode([info], 2) != raw2:
            raise SystemExit(f"COMMAND INFO {name}: the typed tree does not re-encode exactly")
        if encode(docs_map, 3) != draw3 or encode(docs_map, 2) != draw2:
            raise SystemExit(f"COMMAND DOCS {name}: the typed tree does not re-encode exactly")
        [[_, docs]] = docs_map["%"]
        commands[name] = {"info": sort_info(info), "docs": sort_docs(docs)}
    config_pairs = r3.call("CONFIG", "GET", "*")[0]["%"]
    for name in exact_configs:  # hidden parameters only answer to their exact name
        config_pairs += r3.call("CONFIG", "GET", name)[0]["%"]
    defaults = dict(sorted((k, v) for k, v in config_pairs))
    # What this generator passed on the command line is not a default.
    defaults.update({"port": "6379", "bind": "* -::*", "dir": ""})
    return {
        "redis_version": m.group(1) if m else "",
        "commands": commands,
        "config_defaults": defaults,
    }


def dump(data: dict[str, Any]) -> str:
    """Compact JSON with one command (or config) per line, so diffs stay readable."""

    def compact(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

    parts = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            body = ",\n".join(f"  {compact(k)}:{compact(v)}" for k, v in value.items())
            parts.append(f"{compact(key)}:{{\n{body}\n}}")
        else:
            parts.append(f"{compact(key)}:{compact(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--port",
        type=int,
        help="use the redis-server on this port (its CONFIG values are recorded as defaults)",
    )
    ap.add_argument("--config-c", help="Redis' src/config.c")
    ap.add_argument(
        "--redis-git",
        type=Path,
        default=DEFAULT_REDIS_GIT,
        help=f"a git clone of Redis to read {REDIS_TAG}:src/config.c from (default: %(default)s)",
    )
    ap.add_argument("--out", default=str(OUT))
    ns = ap.parse_args()
    source = read_config_c(ns.config_c, ns.redis_git)
    configs = parse_config_c(source) if source is not None else None
    if configs is None:
        print("warning: config.c not found: CONFIG SET will not validate types", file=sys.stderr)
    hidden = sorted(n for n, c in (configs or {}).items() if "hidden" in c["flags"])
    proc = None
    port = ns.port
    if port is None:
        proc, port, workdir = start_redis()
    try:
        data = collect(port, hidden)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            shutil.rmtree(workdir, ignore_errors=True)
    if data["redis_version"] != REDIS_TAG:
        print(f"warning: the server is redis {data['redis_version']}, not {REDIS_TAG}")
    if configs is not None:
        data["configs"] = configs
        missing = set(configs) - set(data["config_defaults"])
        if missing:
            print(f"warning: configs without a default value: {sorted(missing)}")
    Path(ns.out).write_text(dump(data))
    print(
        f"wrote {ns.out}: {len(data['commands'])} commands, {len(data['config_defaults'])} configs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
