"""Fixtures: a real redis-server and a TemporalStore server, each started on a free
port for the session, and a differential helper that sends the same command to
both and compares the raw reply bytes, in RESP2 and RESP3."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.resp_client import RawClient, canonical, parse

ROOT = Path(__file__).resolve().parent.parent

# The etcd fixtures (`etcd`, `etcd_cluster`) live in tests/etcd.py.
pytest_plugins = ("tests.etcd",)


def proc_status_kb(pid: int, field: str = "VmRSS") -> int:
    """A size from /proc/PID/status (VmRSS: resident; VmSize: address space), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field}")


def until(
    check: Callable[[], Any],
    timeout: float = 15.0,
    retry_on: tuple[type[BaseException], ...] = (),
) -> Any:
    """Poll `check` every 50 ms until it returns something true, and return that;
    an error of `retry_on` counts as not yet. AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except retry_on:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                # Listening is not enough: a server replaying its storage answers
                # -LOADING until it is done.
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                reply = sock.recv(64)
                if reply and not reply.startswith(b"-LOADING"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path
    log_lines: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def start_redis(extra: list[str] | None = None) -> ServerProcess:
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed: run `make test`, which installs it")
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="redis-ref-"))
    cmd = [
        exe,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
        "--daemonize",
        "no",
        "--protected-mode",
        "no",
        "--logfile",
        "",
    ] + (extra or [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return ServerProcess(proc, port, workdir)


def start_temporalstore(
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    workdir: Path | None = None,
    cwd: Path = ROOT,
) -> ServerProcess:
    """Start `temporalstore serve --port 0` and read the port from its log line; `cwd`:
    the checkout whose server runs (another commit's, tools/old_image.py)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ts-"))
    cmd = [
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--port",
        "0",
        "--storage",
        f"file://{workdir}/data",
    ] + (extra or [])
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=full_env
    )
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    port = None
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode(errors="replace")
        if not line:
            if proc.poll() is not None:
                proc.stderr.close()  # not left for a later test's garbage collection
                raise RuntimeError("temporalstore exited:\n" + "".join(lines))
            continue
        lines.append(line)
        m = re.search(r"listening on [^ ]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        # Replay is done (the server answers -LOADING until then) once it logs the
        # storage line with its writer epoch (or, for a replica, its primary).
        if port is not None and re.search(r"storage .*: (epoch \d+|replica of)", line):
            break
    if port is None or proc.poll() is not None:
        proc.kill()
        proc.wait()
        proc.stderr.close()
        raise RuntimeError("temporalstore did not start:\n" + "".join(lines))
    # Keep draining stderr so the server never blocks on a full pipe.
    import threading

    def drain() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append(raw.decode(errors="replace"))

    threading.Thread(target=drain, daemon=True).start()
    wait_port(port, proc)
    return ServerProcess(proc, port, workdir, lines)


@pytest.fixture(scope="session")
def redis_ref() -> Iterator[ServerProcess]:
    p = start_redis()
    yield p
    p.stop()


@pytest.fixture(scope="session")
def ts_server() -> Iterator[ServerProcess]:
    p = start_temporalstore()
    yield p
    p.stop()


@pytest.fixture(scope="module")
def redis_dbg() -> Iterator[ServerProcess]:
    """A redis-server of the module's own with DEBUG enabled."""
    p = start_redis(["--enable-debug-command", "yes"])
    yield p
    p.stop()


@pytest.fixture(scope="module")
def ts_dbg() -> Iterator[ServerProcess]:
    """A TemporalStore server of the module's own with DEBUG enabled."""
    p = start_temporalstore(["--enable-debug-command", "yes"])
    yield p
    p.stop()


class Differ:
    """Sends each command to both servers over raw sockets and compares replies."""

    def __init__(self, ref_port: int, ours_port: int, resp: int) -> None:
        self.resp = resp
        self.ref = RawClient(ref_port)
        self.ours = RawClient(ours_port)
        self.cases = 0
        self.attempts = 0
        for c in (self.ref, self.ours):
            c.call("FLUSHALL")
            if resp == 3:
                c.call("HELLO", "3")

    def close(self) -> None:
        self.ref.close()
        self.ours.close()

    def both(self, *args: Any) -> tuple[bytes, bytes]:
        return self.ref.call(*args), self.ours.call(*args)

    def check(
        self,
        *args: Any,
        unordered: int = 0,
        normalize: Callable[[bytes], Any] | None = None,
    ) -> bytes:
        """Assert identical replies; `unordered=n` sorts n levels of aggregates first."""
        ref, ours = self.both(*args)
        self.attempts += 1
        if normalize is not None:
            same = normalize(ours) == normalize(ref)
        elif unordered:
            same = canonical(parse(ours), unordered) == canonical(parse(ref), unordered)
        else:
            same = ours == ref
        assert same, f"{args!r} (RESP{self.resp})\nredis: {ref!r}\nours:  {ours!r}"
        self.cases += 1
        return ref

    def record(self, n: int, same: bool) -> None:
        """Count `n` command cases compared outside `check` (multi-client scenarios)."""
        self.attempts += n
        if same:
            self.cases += n

    def run(self, script: str) -> None:
        """One command per line, words split like redis-cli; `~` prefix = unordered."""
        import shlex

        for line in script.strip().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            unordered = 0
            if line.startswith("~"):
                unordered = 2
                line = line[1:].strip()
            self.check(*shlex.split(line), unordered=unordered)


def _differ(
    request: pytest.FixtureRequest, ref: ServerProcess, ours: ServerProcess
) -> Iterator[Differ]:
    d = Differ(ref.port, ours.port, request.param)
    yield d
    counts = request.config.stash.setdefault(CASES_KEY, [0, 0])
    counts[0] += d.cases
    counts[1] += d.attempts
    d.close()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def diff(
    request: pytest.FixtureRequest, redis_ref: ServerProcess, ts_server: ServerProcess
) -> Iterator[Differ]:
    yield from _differ(request, redis_ref, ts_server)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def ddiff(
    request: pytest.FixtureRequest, redis_dbg: ServerProcess, ts_dbg: ServerProcess
) -> Iterator[Differ]:
    """`diff` on the DEBUG-enabled servers (`redis_dbg`, `ts_dbg`)."""
    yield from _differ(request, redis_dbg, ts_dbg)


CASES_KEY = pytest.StashKey[list[int]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[CASES_KEY] = [0, 0]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    identical, attempted = config.stash.get(CASES_KEY, [0, 0])
    if attempted:
        terminalreporter.write_line(
            f"differential: {identical} of {attempted} command cases identical to redis-server"
        )


# --------------------------------------------------------------------------- S3 (moto)

_MOTO_BUCKETS = 0
_MOTO_SERVERS: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def _moto_answers(endpoint: str, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until the server answers an HTTP request (any status will do)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(endpoint + "/", timeout=2):
                return True
        except urllib.error.HTTPError as exc:
            exc.close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def _moto_log_tail(log_path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on a free port for the session, started as the benchmark starts
    it (`python -m bench.motoserver`: moto's application with HTTP/1.1 keep-alive, so
    that the S3 client reuses its connections as it does with S3): yields its endpoint
    URL. Sets dummy AWS credentials and region in this process's environment
    (inherited by servers the tests start) and hides any real AWS configuration."""
    with pytest.MonkeyPatch.context() as mp:
        aws_dir = tmp_path_factory.mktemp("aws")
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_CONFIG_FILE", str(aws_dir / "config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(aws_dir / "credentials"))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_REGION"):
            mp.delenv(name, raising=False)
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(name, raising=False)
        log_path = aws_dir / "moto.log"
        proc: subprocess.Popen[bytes] | None = None
        endpoint = ""
        # The log file, not a pipe: moto logs every request and nobody drains a pipe.
        with open(log_path, "wb") as log:
            for _attempt in range(3):  # a free port can be taken before moto binds it
                port = free_port()
                endpoint = f"http://127.0.0.1:{port}"
                proc = subprocess.Popen(
                    [sys.executable, "-m", "bench.motoserver", "-H", "127.0.0.1", "-p", str(port)],
                    cwd=ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                if _moto_answers(endpoint, proc, timeout=60.0):
                    break
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                proc = None
        if proc is None:
            raise RuntimeError("moto server did not start:\n" + _moto_log_tail(log_path))
        _MOTO_SERVERS[endpoint] = (proc, log_path)
        try:
            yield endpoint
        finally:
            del _MOTO_SERVERS[endpoint]
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def make_bucket(endpoint: str) -> str:
    """Create a fresh, uniquely named bucket on the S3 endpoint and return its name."""
    import uuid

    import boto3
    from botocore.config import Config

    global _MOTO_BUCKETS
    _MOTO_BUCKETS += 1
    name = f"ts-test-{_MOTO_BUCKETS}-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        config=Config(connect_timeout=5, read_timeout=30, retries={"total_max_attempts": 3}),
    )
    try:
        client.create_bucket(Bucket=name)
    except Exception as exc:
        server = _MOTO_SERVERS.get(endpoint)
        if server is not None and server[0].poll() is not None:
            raise RuntimeError(
                f"moto server at {endpoint} exited with {server[0].returncode}:\n"
                + _moto_log_tail(server[1])
            ) from exc
        raise
    finally:
        client.close()
    return name
