"""Processes the benchmark starts: TemporalStore, redis-server and a moto S3 server,
each on a free port, pinned to a CPU with taskset, and always stopped at exit."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
OURS = str(BIN / "temporalstore")
CORES = os.cpu_count() or 1
PINNED = CORES >= 2 and shutil.which("taskset") is not None
SERVER_CPU = 0
LOAD_CPU = 1
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

_live: list[Proc] = []
_tmpdirs: list[Path] = []


def pin(cpu: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(cpu), *argv] if PINNED else argv


def pin_self() -> None:
    """The runner itself (loaders, INFO samplers) stays on the load generator's CPU."""
    if PINNED:
        os.sched_setaffinity(0, {LOAD_CPU})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tmpdir(tag: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"tsbench-{tag}-"))
    _tmpdirs.append(d)
    return d


def _cleanup() -> None:
    for p in list(_live):
        p.kill9()
    for d in _tmpdirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)


@dataclass
class Proc:
    name: str
    argv: list[str]
    port: int
    popen: subprocess.Popen[bytes]
    log: Path
    started: float  # time.monotonic() just before the process was created
    serving_s: float = 0.0  # process start to the first PONG
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"{self.name}: no VmRSS")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process (all its threads) so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill9(self) -> None:
        """kill -9 of the server and of every process it forked (its process group):
        a child outlives its parent's kill otherwise, as redis' AOF rewrite after a
        restart did, pinned to the server CPU while the next server restarted there."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.popen.wait()
        if self in _live:
            _live.remove(self)

    def discard(self) -> None:
        """The benchmark is done with this server: kill -9. A graceful stop of ours
        writes a final checkpoint of its whole store (seconds for a million keys) that
        nothing measures."""
        self.kill9()

    def stop(self, timeout: float = 30.0) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()  # its children too
        if self in _live:
            _live.remove(self)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _spawn(name: str, argv: list[str], port: int, env: dict[str, str] | None = None) -> Proc:
    logdir = tmpdir("log")
    log = logdir / f"{name}.log"
    fh = log.open("wb")
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    started = time.monotonic()
    popen = subprocess.Popen(
        argv,
        stdout=fh,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=full_env,
        start_new_session=True,  # its own process group: kill9 takes its children too
    )
    fh.close()
    p = Proc(name, argv, port, popen, log, started)
    _live.append(p)
    return p


def wait_pong(p: Proc, timeout: float = 300.0) -> float:
    """Poll PING every 2 ms until +PONG (not -LOADING); seconds since the process
    was created."""
    deadline = time.monotonic() + timeout
    sock: socket.socket | None = None
    try:
        while time.monotonic() < deadline:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited ({p.popen.returncode}):\n{p.log_tail()}")
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", p.port), timeout=5)
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                line = sock.recv(256)
                if line.startswith(b"+PONG"):
                    p.serving_s = time.monotonic() - p.started
                    return p.serving_s
                if not line:
                    sock.close()
                    sock = None
            except OSError:
                if sock is not None:
                    sock.close()
                sock = None
            time.sleep(0.002)
    finally:
        if sock is not None:
            sock.close()
    raise RuntimeError(f"{p.name} did not answer PING in {timeout}s:\n{p.log_tail()}")


def ours_argv(port: int, storage: str, *flags: str, cpu: int = SERVER_CPU) -> list[str]:
    return pin(
        cpu,
        [
            OURS,
            "serve",
            "--port",
            str(port),
            "--storage",
            storage,
            "--log-level",
            "warning",
            *flags,
        ],
    )


def start_ours(
    storage: str, *flags: str, env: dict[str, str] | None = None, cpu: int = SERVER_CPU
) -> Proc:
    port = free_port()
    p = _spawn("temporalstore", ours_argv(port, storage, *flags, cpu=cpu), port, env)
    wait_pong(p)
    return p


def restart(p: Proc, env: dict[str, str] | None = None) -> Proc:
    """The same command line again (after kill -9), timed to the first PONG."""
    q = _spawn(p.name, p.argv, p.port, env)
    wait_pong(q)
    return q


def redis_argv(port: int, workdir: Path, *flags: str, cpu: int = SERVER_CPU) -> list[str]:
    return pin(
        cpu,
        ["redis-server", "--port", str(port), "--dir", str(workdir), "--save", "", *flags],
    )


def start_redis(*flags: str, workdir: Path | None = None, cpu: int = SERVER_CPU) -> Proc:
    port = free_port()
    d = workdir or tmpdir("redis")
    p = _spawn("redis-server", redis_argv(port, d, *flags, cpu=cpu), port)
    wait_pong(p)
    return p


MOTO_STARTS = {
    # moto's S3 served with HTTP/1.1 keep-alive, as S3 and MinIO serve (bench/motoserver.py).
    "keepalive": "bench.motoserver",
    # moto's own start: werkzeug's development server closes every connection.
    "close": "moto.server",
}


def start_moto(start: str = "keepalive") -> Proc:
    """moto stands in for remote object storage: it runs on the load generator's CPU
    so that it never takes the server's core. `start` is a key of `MOTO_STARTS`."""
    port = free_port()
    argv = pin(LOAD_CPU, [sys.executable, "-m", MOTO_STARTS[start], "-p", str(port)])
    p = _spawn("moto", argv, port, S3_ENV)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not p.alive():
            raise RuntimeError(f"moto exited:\n{p.log_tail()}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2):
            return p
        time.sleep(0.1)
    raise RuntimeError(f"moto did not start:\n{p.log_tail()}")


def create_bucket(moto: Proc, bucket: str) -> None:
    import boto3  # type: ignore[import-untyped]  # moto[server] brings it (test extras)

    os.environ.update(S3_ENV)
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto.port}")
    s3.create_bucket(Bucket=bucket)
