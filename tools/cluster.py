"""`make cluster`: a group on this machine, without Docker: one etcd member and three
nodes sharing one storage directory, on free ports (or --ports), until Ctrl-C.

    python tools/cluster.py [--storage file://./cluster-data] [--ports 6379,6380,6381]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on port {port}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--storage", default="file://./cluster-data")
    parser.add_argument("--ports", default="", help="three ports (default: free ones)")
    parser.add_argument("--group", default="temporalstore")
    ns = parser.parse_args()
    etcd = shutil.which("etcd")
    if etcd is None:
        raise SystemExit("etcd is not installed: `make etcd` installs Debian's etcd-server")
    ports = [int(p) for p in ns.ports.split(",")] if ns.ports else [free_port() for _ in range(3)]
    if len(ports) != 3:
        raise SystemExit("--ports takes three ports")
    workdir = Path(tempfile.mkdtemp(prefix="ts-cluster-"))
    client, peer = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        etcd_proc = subprocess.Popen(
            [
                etcd,
                "--name",
                "m0",
                "--data-dir",
                str(workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{client}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{client}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"m0=http://127.0.0.1:{peer}",
                # The raft log is appended and trimmed all the time: without compaction
                # etcd 3.4 keeps every revision until its 2 GB quota refuses writes.
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=5m",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(workdir / "etcd.log", "wb"),  # noqa: SIM115
        )
        procs.append(etcd_proc)
        wait_port(client, etcd_proc, "etcd")
        for port in ports:
            log = open(workdir / f"node-{port}.log", "wb")  # noqa: SIM115
            node = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "proxy.cli",
                    "serve",
                    "--port",
                    str(port),
                    "--storage",
                    ns.storage,
                    "--etcd-endpoints",
                    f"http://127.0.0.1:{client}",
                    "--group",
                    ns.group,
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            procs.append(node)
            wait_port(port, node, f"node on port {port}")
        sentinels = ", ".join(f'("127.0.0.1", {p})' for p in ports)
        print(f"etcd on 127.0.0.1:{client}; nodes on ports {', '.join(map(str, ports))}")
        print(f"logs in {workdir}; storage {ns.storage}")
        print(
            "redis-py: Sentinel([" + sentinels + f"]).master_for({ns.group!r})\n"
            f"redis-cli -p {ports[0]} SENTINEL GET-MASTER-ADDR-BY-NAME {ns.group}\n"
            "Ctrl-C stops the group."
        )
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
