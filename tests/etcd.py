"""Real etcd for the tests: one member, or a three-member cluster (stop two members and
it loses quorum), each on free loopback ports in a temporary directory, with Raft
timings small enough that a member elects itself in a fraction of a second and a
1-second lease is allowed (etcd's minimum lease TTL is 1.5 election timeouts).

Fixtures (registered for every test by tests/conftest.py): `etcd` (one member for the
session: tests keep apart by using their own group, see `unique_group`) and
`etcd_cluster` (three members, new for each test). Debian's `etcd-server` is
installed by `make etcd`, which `make test` runs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import free_port

HEARTBEAT_MS = 25
ELECTION_MS = 250


def etcd_binary() -> str:
    exe = shutil.which("etcd")
    if exe is None:
        raise RuntimeError("etcd is not installed: run `make etcd` (or `make test`, which runs it)")
    return exe


def unique_group(prefix: str = "g") -> str:
    """A group name no other test uses, so tests can share one etcd."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class EtcdMember:
    """One etcd process; `start()` again after `stop()` rejoins with its data."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    initial_cluster: str = ""
    token: str = ""
    proc: subprocess.Popen[bytes] | None = None
    starts: int = field(default=0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.name}.log"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [
            etcd_binary(),
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            self.url,
            "--advertise-client-urls",
            self.url,
            "--listen-peer-urls",
            self.peer_url,
            "--initial-advertise-peer-urls",
            self.peer_url,
            "--initial-cluster",
            self.initial_cluster,
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            self.token,
            "--heartbeat-interval",
            str(HEARTBEAT_MS),
            "--election-timeout",
            str(ELECTION_MS),
            "--logger",
            "zap",
            "--log-outputs",
            "stderr",
        ]
        # Nothing from the environment (ETCD_* variables configure etcd too).
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        self.starts += 1
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the member (SIGTERM: clean; SIGKILL: a crash) and wait for it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if sig == signal.SIGTERM:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGCONT)  # a paused member can't exit
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def healthy(self) -> bool:
        """etcd's /health: true once the member has a leader and serves requests (asked
        with a short timeout: before there is a leader the answer waits)."""
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=0.3) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.HTTPError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class EtcdCluster:
    """One or more members on loopback; `endpoints` is what clients are given."""

    members: list[EtcdMember]
    workdir: Path

    @property
    def endpoints(self) -> list[str]:
        return [m.url for m in self.members]

    def wait_healthy(self, timeout: float = 20.0, members: list[EtcdMember] | None = None) -> None:
        wanted = members if members is not None else self.members
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in wanted:
                if not m.running():
                    raise RuntimeError(f"etcd member {m.name} exited:\n{m.log_tail()}")
            if all(m.healthy() for m in wanted):
                return
            time.sleep(0.05)
        raise RuntimeError(
            "etcd did not become healthy:\n" + "\n".join(m.log_tail() for m in wanted)
        )

    def stop(self) -> None:
        for m in self.members:
            m.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_etcd(size: int = 1, attempts: int = 3) -> EtcdCluster:
    """Start `size` members forming one new cluster and wait until all are healthy.
    Retried on new ports when a member dies at start (a free port can be taken before
    etcd binds it)."""
    last_error: Exception | None = None
    for _attempt in range(attempts):
        workdir = Path(tempfile.mkdtemp(prefix="etcd-"))
        token = uuid.uuid4().hex
        members = [
            EtcdMember(f"m{i}", free_port(), free_port(), workdir / f"m{i}.data", token=token)
            for i in range(size)
        ]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
        for m in members:
            m.initial_cluster = initial
            m.start()
        cluster = EtcdCluster(members, workdir)
        try:
            cluster.wait_healthy()
            return cluster
        except RuntimeError as exc:
            last_error = exc
            cluster.stop()
    raise RuntimeError(f"etcd did not start in {attempts} attempts") from last_error


@pytest.fixture(scope="session")
def etcd() -> Iterator[EtcdCluster]:
    """One etcd member for the whole session; use a `unique_group()` per test."""
    cluster = start_etcd(1)
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd_cluster() -> Iterator[EtcdCluster]:
    """Three etcd members, new for each test (a test may stop some of them)."""
    cluster = start_etcd(3)
    yield cluster
    cluster.stop()
